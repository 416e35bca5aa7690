"""The stream checks proper, on numpy arrays: the runs of each stream, the snapshot spans
in them, and the anomalies they hold.

They read one batch's stream rows as columns (a dict of arrays, ``Summary`` builds it)
sorted by stream key, each stream's rows in arrival order, with a pseudo row holding the
carried state of a continuing stream first in its group. Each step is a few whole-array
operations; Python loops only over the few spans that hold an anomaly or an OSO snapshot.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .frames import NO_ROWS

#: Anomaly kinds, in code order.
ANOMALIES = ("seqno_not_increasing", "outside_snapshot", "snapshot_ended_early",
             "ended_in_snapshot", "unmatched_rollback")
BACKWARDS, OUTSIDE, EARLY, ENDED_INSIDE, UNMATCHED = range(len(ANOMALIES))
#: What opened the snapshot a frame belongs to.
NO_SNAPSHOT, MARKER, OSO_OPEN, OSO_CLOSED = range(4)
U64 = np.uint64


class Runs(NamedTuple):
    """The runs of each stream: a run starts at the stream's first row, after a Stream
    End, at a request or placed response (unless it answers the request just before it)
    and where the opaque of its messages changes."""

    start: np.ndarray       # per row: a run starts here
    id: np.ndarray          # per row: its run's number
    first: np.ndarray       # per run: its first row
    started: np.ndarray     # per run: its request (or response) was seen
    messages: np.ndarray    # rows of the messages (those carrying the stream's opaque)


class Spans(NamedTuple):
    """Intervals between run starts, snapshot starts (markers, OSO starts), OSO ends and
    Stream Ends, and the seqnos the items in each reach."""

    at: np.ndarray          # first row of each span
    ends: np.ndarray        # row after each span
    kind: np.ndarray        # what opened it: NO_SNAPSHOT, MARKER, OSO_OPEN or OSO_CLOSED
    run: np.ndarray         # the run each span is in
    opens: np.ndarray       # per row: it opens a snapshot (marker or OSO start)
    oso_ends: np.ndarray    # rows of the OSO ends that close an OSO snapshot
    high: np.ndarray        # highest item seqno of each span (0 when none)
    low: np.ndarray         # lowest item seqno of each span (2**64 - 1 when none)
    items: np.ndarray       # how many items each span holds


class Chain(NamedTuple):
    """The seqnos that must rise within a run."""

    checked: np.ndarray     # per row: an item checked against the chain (outside OSO)
    rows: np.ndarray        # rows on the chain
    values: np.ndarray      # per row: the seqno it puts on the chain


def runs(cols: dict, firsts: np.ndarray) -> Runs:
    """The runs of the streams whose groups start at ``firsts``."""
    key, start, opaque = cols["key"], cols["start"], cols["opaque"]
    run_start = np.zeros(len(key), bool)
    run_start[firsts] = True
    run_start[1:] |= cols["end"][:-1]
    mpos = np.flatnonzero(cols["msg"])
    if len(mpos):
        a, b = mpos[:-1], mpos[1:]
        same = key[a] == key[b]
        same_opaque = same & (opaque[a] == opaque[b])
        run_start[b[(start[b] & ~(same_opaque & start[a])) | (same & ~same_opaque)]] = True
        run_start[mpos[0]] |= start[mpos[0]]
    run_first = np.flatnonzero(run_start)
    return Runs(run_start, np.cumsum(run_start, dtype=np.int32) - 1, run_first,
                cols["opens"][run_first], mpos)


def spans(cols: dict, r: Runs) -> Spans:
    """The spans of the runs ``r``; an OSO end counts when its run's latest snapshot
    start is an OSO start."""
    def_kind, seq, reach = cols["def_kind"], cols["reach_val"], cols["reach"]
    is_def = def_kind != NO_SNAPSHOT
    dpos = np.flatnonzero(is_def)
    opos = np.flatnonzero(cols["oso_end"]) if len(dpos) else NO_ROWS
    if len(opos):
        k = np.searchsorted(dpos, opos) - 1
        d = dpos[np.maximum(k, 0)]
        opos = opos[(k >= 0) & (r.id[d] == r.id[opos]) & (def_kind[d] == OSO_OPEN)]
    bound = r.start | is_def | cols["end"]
    bound[opos] = True
    bpos = np.flatnonzero(bound)
    bkind = def_kind[bpos]
    bkind[np.searchsorted(bpos, opos)] = OSO_CLOSED
    rmax = np.maximum.reduceat(np.where(reach, seq, U64(0)), bpos)
    rmin = np.minimum.reduceat(np.where(reach, seq, U64(2**64 - 1)), bpos)
    rcnt = np.add.reduceat(reach, bpos, dtype=np.int64)
    return Spans(bpos, np.append(bpos[1:], len(bound)), bkind, r.id[bpos], is_def, opos,
                 rmax, rmin, rcnt)


def chain(cols: dict, r: Runs, s: Spans) -> tuple[Chain, list]:
    """The chain of seqnos that must rise: items outside OSO snapshots, a request's start
    seqno, the highest seqno of an OSO snapshot at its end, the carried one; and the
    ``seqno_not_increasing`` anomalies on it."""
    check = cols["item"].copy()
    for oso in np.flatnonzero(s.kind == OSO_OPEN).tolist():
        check[s.at[oso]:s.ends[oso]] = False
    on_chain = check | cols["chain"]
    chain_val = cols["chain_val"]
    if len(s.oso_ends):
        j = np.searchsorted(s.at, s.oso_ends) - 1
        filled = s.items[j] > 0
        on_chain[s.oso_ends[filled]] = True
        chain_val = chain_val.copy()
        chain_val[s.oso_ends[filled]] = s.high[j[filled]]
    found = []
    cpos = np.flatnonzero(on_chain)
    if len(cpos) > 1:
        cv = chain_val[cpos]
        back = np.flatnonzero(check[cpos[1:]] & (r.id[cpos[1:]] == r.id[cpos[:-1]])
                              & (cv[1:] <= cv[:-1]))
        found.append(anomalies(BACKWARDS, cols, cpos[back + 1], cv[back + 1], cv[back]))
    return Chain(check, cpos, chain_val), found


def outside(cols: dict, r: Runs, s: Spans, check: np.ndarray) -> list:
    """``outside_snapshot``: checked items outside their marker's range, or (once the
    stream's request was seen) before any marker."""
    seq, snap_start, snap_end = cols["reach_val"], cols["snap_start"], cols["snap_end"]
    bpos = s.at
    suspect = (s.kind == MARKER) & (s.items > 0) & ((s.low < snap_start[bpos])
                                                   | (s.high > snap_end[bpos]))
    loose = (s.kind == NO_SNAPSHOT) & (s.items > 0) & r.started[s.run]
    found = []
    for j in np.flatnonzero(suspect | loose).tolist():
        lo, hi, b = bpos[j], s.ends[j], bpos[j]
        seqs = seq[lo:hi]
        if suspect[j]:
            at = lo + np.flatnonzero(check[lo:hi] & ((seqs < snap_start[b])
                                                     | (seqs > snap_end[b])))
            found.append(anomalies(OUTSIDE, cols, at, seq[at], np.full(len(at), snap_start[b]),
                                   np.full(len(at), snap_end[b])))
        else:
            at = lo + np.flatnonzero(check[lo:hi])
            found.append(anomalies(OUTSIDE, cols, at, seq[at]))
    return found


def ended_early(cols: dict, r: Runs, s: Spans) -> list:
    """``snapshot_ended_early`` and ``ended_in_snapshot``: a snapshot start or Stream End
    before the previous snapshot of its run reached its end."""
    end, snap_start, snap_end = cols["end"], cols["snap_start"], cols["snap_end"]
    closer = np.flatnonzero(cols["real"] & (s.opens | end))
    cj = np.searchsorted(s.at, closer) - 1
    pj = np.maximum(cj, 0)
    p = s.at[pj]
    ok = (cj >= 0) & (s.run[pj] == r.id[closer])
    pk = s.kind[pj]
    reached, has = s.high[pj], s.items[pj] > 0
    short = ok & (pk == MARKER) & (~has | (reached < snap_end[p]))
    unended = ok & (pk == OSO_OPEN)
    found = []
    for kind, sel in ((EARLY, ~end[closer]), (ENDED_INSIDE, end[closer])):
        hit = short & sel
        found.append(anomalies(kind, cols, closer[hit], reached[hit], snap_start[p[hit]],
                               snap_end[p[hit]], seqno_ok=has[hit]))
        hit = unended & sel
        found.append(anomalies(kind, cols, closer[hit], reached[hit], seqno_ok=has[hit]))
    return found


def anomalies(kind, cols, at, seqno, low=None, high=None, seqno_ok=None) -> dict | None:
    """Anomaly columns of ``kind`` for rows ``at`` (None when there are none): the seqno
    found, and the range it broke (``low``, ``high``) where there is one."""
    n = len(at)
    if not n:
        return None
    return {"kind": np.full(n, kind, np.int8), "offset": cols["offset"][at],
            "key": cols["key"][at], "seqno": seqno.astype(U64),
            "seqno_ok": np.ones(n, bool) if seqno_ok is None else seqno_ok,
            "low": np.zeros(n, U64) if low is None else low.astype(U64),
            "high": np.zeros(n, U64) if high is None else high.astype(U64),
            "range_ok": np.full(n, low is not None),
            "end_status": cols["end_status"][at].astype(np.int64)}


# -- per-stream picks ----------------------------------------------------------------------


def first_from(positions: np.ndarray, lows: np.ndarray, highs: np.ndarray):
    """The first of ``positions`` in each [low, high], and whether there is one."""
    k = np.searchsorted(positions, lows)
    at = positions[np.minimum(k, len(positions) - 1)] if len(positions) else lows
    return at, (k < len(positions)) & (at <= highs)


def last_upto(positions: np.ndarray, highs: np.ndarray, lows: np.ndarray):
    """The last of ``positions`` in each [low, high], and whether there is one."""
    k = np.searchsorted(positions, highs, "right") - 1
    at = positions[np.maximum(k, 0)] if len(positions) else highs
    return at, (k >= 0) & (at >= lows)


def pick(values: np.ndarray, at: np.ndarray, valid: np.ndarray) -> list:
    """``values[at]`` as Python numbers, None where not ``valid``."""
    return [v if ok else None for v, ok in zip(values[at].tolist(), valid.tolist())]
