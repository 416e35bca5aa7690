"""Stream health: every vbucket stream's seqno range, snapshots, message counts,
rollbacks, end status and anomalies, built batch by batch.

``summarize`` (or ``Summary.update`` per batch) reports every vbucket stream. Its
per-frame checks run on numpy arrays (``checks``); only per-stream bookkeeping is Python.
Responses are placed on their streams as ``matching`` says. A malformed Stream Request or
Rollback value follows ``batch.mode`` as in the ``tables``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch
from . import checks as K
from . import frames as F
from .checks import ANOMALIES, MARKER, U64, UNMATCHED
from .matching import (
    AMBIGUOUS,
    Matcher,
    StreamTracker,
    batch_requests,
    learn,
    message_opaques,
    stream_key,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


class _Carry:
    """The check state of an unfinished stream at the end of a batch."""

    __slots__ = ("started", "last_start", "opaque", "chain", "snapshot", "range", "reach")

    def __init__(self, started, last_start, opaque, chain, snapshot, range_, reach):
        self.started = started          # the stream's request (or response) was seen
        self.last_start = last_start    # its latest message is that request or response
        self.opaque = opaque            # opaque of its latest message, or None
        self.chain = chain              # by_seqno the next item must exceed, or None
        self.snapshot = snapshot        # NO_SNAPSHOT, MARKER, OSO_OPEN or OSO_CLOSED (checks)
        self.range = range_             # (start, end, flags) of the current marker
        self.reach = reach              # highest seqno since the snapshot opened, or None


class _Stream:
    """What the summary reports for one vbucket stream, and its carried check state: a
    few hundred bytes (its opcode counts and snapshot ranges are kept by the summary,
    in arrays for all streams)."""

    __slots__ = ("vbucket", "stream_id", "slot", "opaque", "streams", "first_seqno",
                 "last_seqno", "rollbacks", "end_status", "anomalies", "carry")

    def __init__(self, key: int, slot: int):
        self.vbucket, self.stream_id = key >> 16, key & 0xFFFF
        self.slot = slot                # its number in the summary's counts and ranges
        self.opaque = None
        self.streams = 0
        self.first_seqno = self.last_seqno = None
        self.rollbacks: list[int] | None = None
        self.end_status = None
        self.anomalies = 0
        self.carry: _Carry | None = None


class _Tally:
    """Frames by (stream slot, opcode), kept sparse: sorted ``slot << 8 | opcode`` keys
    and their counts, the pairs of later batches merged in when they outnumber those
    merged (so that n pairs cost O(n log n) in all)."""

    def __init__(self) -> None:
        self.keys = np.empty(0, np.int64)
        self.counts = np.empty(0, np.int64)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._unmerged = 0

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        self._parts.append((keys, counts))
        self._unmerged += len(keys)
        if self._unmerged > len(self.keys):
            self._merge()

    def _merge(self) -> None:
        if not self._parts:
            return
        keys = np.concatenate([self.keys, *(k for k, _ in self._parts)])
        counts = np.concatenate([self.counts, *(n for _, n in self._parts)])
        self._parts, self._unmerged = [], 0
        if not len(keys):                   # batches of responses only: nothing counted
            return
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        self.keys, self.counts = keys[heads], np.add.reduceat(counts, heads)

    def of(self, slots: list[int]) -> pa.MapArray:
        """The counts of the stream slots, in that order, as a map of opcode name to frames."""
        import pyarrow as pa

        self._merge()
        pick, offsets = _spans(self.keys >> 8, slots)
        names = pa.array(F.OPCODE_NAMES).take(pa.array(self.keys[pick] & 0xFF))
        return pa.MapArray.from_arrays(pa.array(offsets.astype(np.int32)), names,
                                       pa.array(self.counts[pick]))


def _spans(at: np.ndarray, slots) -> tuple[np.ndarray, np.ndarray]:
    """The rows of sorted ``at`` equal to each of ``slots``, one slot after the other, and
    the offsets of each slot's rows among them."""
    wanted = np.asarray(slots, np.int64)
    lo = np.searchsorted(at, wanted)
    sizes = np.searchsorted(at, wanted, side="right") - lo
    offsets = np.zeros(len(wanted) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    pick = np.repeat(lo - offsets[:-1], sizes) + np.arange(offsets[-1])
    return pick, offsets


class Summary:
    """Health of every vbucket stream in a DCP dump, built batch by batch.

    ``update(batch)`` takes the batches of one stream in order (``iter_batches`` gives
    them); the result does not depend on where the batches are cut. A stream is a
    vbucket (and stream id, when there is one); it restarts at a Stream Request, after a
    Stream End, at a successful or Rollback response placed on it, and when its messages
    change opaque (the server sends a stream's messages under its request's opaque).
    Give it one ordered stream: a dump, or a capture's server-to-client direction (feed
    the client-to-server batches to ``summary.tracker.update`` so that responses find
    their requests without those requests restarting streams out of order).

    Anomalies (``summary.anomalies``), each checked within one run of a stream:

    - ``seqno_not_increasing``: an item's by_seqno is not above the previous item's (or
      the Stream Request's start seqno). Items are mutations, deletions, expirations,
      prepares, commits/aborts (their own seqno), system events and seqno advances.
      Inside an OSO snapshot (0x65 start .. end) items come in key order and are not
      compared; after its end the next item must exceed the highest seqno inside it.
    - ``outside_snapshot``: an item outside the current marker's [start, end], or, once
      the stream's request was seen, an item before any marker.
    - ``snapshot_ended_early``: a marker (or OSO start) arrives before the previous
      snapshot reached its end seqno. The server ends a snapshot with its last item or
      closes it with a seqno advance (filtered collections, prepares the client does not
      take); a consumer that negotiated neither can see a legitimate short snapshot.
    - ``ended_in_snapshot``: a Stream End inside an unfinished snapshot (the client
      must resume from that snapshot's start).
    - ``unmatched_rollback``: a Rollback response that neither a request nor a stream
      opaque places on a vbucket.
    """

    def __init__(self):
        #: Frames seen.
        self.frames = 0
        #: Requests and stream opaques of the batches seen so far.
        self.tracker = StreamTracker()
        self._streams: dict[int, _Stream] = {}
        self._counts = _Tally()                            # frames by stream slot, opcode
        self._markers: list[np.ndarray] = []   # per batch: slot, start, end, flags rows
        self._anomalies: list[dict[str, np.ndarray]] = []
        self._pending: list[tuple[int, int, int]] = []     # opaque, seqno, offset

    # -- input ---------------------------------------------------------------------------

    def update(self, batch: FrameBatch) -> Summary:
        """Add the next batch of the stream; returns the summary."""
        self.frames += len(batch)
        if not len(batch):
            return self
        decoded = F.decoded_requests(batch)
        opaques = message_opaques(batch)
        self._update(batch, decoded, opaques)
        learn(self.tracker, batch_requests(batch, decoded), opaques)
        return self

    def _stream(self, key: int) -> _Stream:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = _Stream(key, len(self._streams))
        return stream

    def _place_responses(self, batch, match) -> dict[int, int]:
        """Stream keys of the Stream Request responses that open (or refuse) a stream;
        rollback seqnos go to their stream or wait for an opaque to place them."""
        rolled = F.rollback_seqnos(batch)
        ok = F.rows(batch, P.Opcode.STREAM_REQUEST, response=True, status=P.Status.SUCCESS)
        placed = {}
        for i in sorted([*ok.tolist(), *rolled]):
            where = match.place(i)
            if where is not None:
                placed[i] = stream_key(*where)
            if i in rolled:
                if where is None:
                    self._pending.append((int(batch["opaque"][i]), rolled[i],
                                          int(batch["offset"][i])))
                else:
                    stream = self._stream(placed[i])
                    stream.rollbacks = (stream.rollbacks or []) + [rolled[i]]
        return placed

    def _update(self, batch: FrameBatch, decoded: dict, opaques: dict) -> None:
        op = batch["opcode"]
        real_mask = F.requests(batch) & F.IS_STREAM[op]
        placed = self._place_responses(batch, Matcher(batch, self.tracker, decoded,
                                                       prefix=True, opaques=opaques))
        mask = real_mask.copy()
        mask[list(placed)] = True
        rows = np.flatnonzero(mask)
        keys = batch["vbucket"][rows].astype(np.uint32) << 16 | batch["stream_id"][rows]
        start = ~real_mask[rows]                       # placed responses
        chain = np.zeros(len(rows), bool)
        chain_val = np.zeros(len(rows), U64)
        fixes = {**placed, **{i: stream_key(r["vbucket"], r["stream_id"] or 0)
                              for i, r in decoded.items()}}
        if fixes:
            keys[np.searchsorted(rows, list(fixes))] = list(fixes.values())
        if decoded:
            at = np.searchsorted(rows, list(decoded))
            start[at] = chain[at] = True
            chain_val[at] = [r["start_seqno"] for r in decoded.values()]
        if (keys & 0xFFFF).any():
            order = np.argsort(keys, kind="stable")
        else:                                          # a 16-bit key sorts in linear time
            order = np.argsort((keys >> 16).astype(np.uint16), kind="stable")
        rows = rows[order]
        cols = {"key": keys[order], "start": start[order], "chain": chain[order],
                "chain_val": chain_val[order]}
        self._check(batch, rows, real_mask[rows], cols)

    def _check(self, batch: FrameBatch, rows: np.ndarray, real: np.ndarray, cols: dict) -> None:
        """Run the checks over one batch's stream rows, grouped by stream key."""
        op = batch["opcode"][rows]
        seq = batch["by_seqno"][rows]
        oso = batch["oso_flags"][rows]
        cols.update(
            row=rows.astype(np.int64, copy=False), real=real, op=op,
            opaque=batch["opaque"][rows], item=real & F.IS_ITEM[op], reach_val=seq,
            def_kind=np.where(real & (op == P.Opcode.SNAPSHOT_MARKER), MARKER,
                              np.where(real & (op == P.Opcode.OSO_SNAPSHOT)
                                       & (oso & P.OsoFlag.START != 0)
                                       & (oso & P.OsoFlag.END == 0), K.OSO_OPEN,
                                       K.NO_SNAPSHOT)).astype(np.int8),
            oso_end=real & (op == P.Opcode.OSO_SNAPSHOT) & (oso & P.OsoFlag.END != 0),
            end=real & (op == P.Opcode.STREAM_END),
            snap_start=batch["snap_start"][rows], snap_end=batch["snap_end"][rows],
            snap_flags=batch["snap_flags"][rows], end_status=batch["end_status"][rows],
            offset=batch["offset"][rows])
        cols["msg"] = (real & F.IS_MESSAGE[op]) | cols["start"]
        cols["opens"] = cols["start"].copy()
        cols["reach"] = cols["item"].copy()
        cols["chain_val"] = np.where(cols["item"], seq, cols["chain_val"])
        cols, firsts = self._carry_in(cols)
        self._scan_rows(cols, firsts)

    def _carry_in(self, cols: dict) -> tuple[dict, np.ndarray]:
        """Put one pseudo row holding the carried state in front of each continuing
        stream; returns the columns and the first row of each stream group."""
        keys = cols["key"]
        firsts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1]))) \
            if len(keys) else F.NO_ROWS
        where, carries = [], []
        for g, key in zip(firsts.tolist(), keys[firsts].tolist()):
            carry = self._stream(key).carry
            if carry is not None:
                where.append(g)
                carries.append(carry)
        n = len(where)
        ranges = [cy.range or (0, 0, 0) for cy in carries]
        pseudo = {"key": keys[where], "start": [cy.last_start for cy in carries],
                  "opens": [cy.started for cy in carries],
                  "chain": [cy.chain is not None for cy in carries],
                  "chain_val": [cy.chain or 0 for cy in carries], "row": [-1] * n,
                  "real": [False] * n, "op": [0] * n,
                  "opaque": [cy.opaque or 0 for cy in carries], "item": [False] * n,
                  "reach_val": [cy.reach or 0 for cy in carries],
                  "def_kind": [cy.snapshot for cy in carries], "oso_end": [False] * n,
                  "end": [False] * n, "snap_start": [r[0] for r in ranges],
                  "snap_end": [r[1] for r in ranges], "snap_flags": [r[2] for r in ranges],
                  "end_status": [0] * n, "offset": [0] * n,
                  "msg": [cy.opaque is not None for cy in carries],
                  "reach": [cy.reach is not None for cy in carries]}
        if where:
            cols = {name: np.insert(col, where, np.asarray(pseudo[name], col.dtype))
                 for name, col in cols.items()}
            firsts = firsts + np.searchsorted(where, firsts)
        return cols, firsts

    def _scan_rows(self, cols: dict, firsts: np.ndarray) -> None:
        """The checks proper, on rows sorted by stream (pseudo rows first)."""
        if not len(cols["key"]):
            return
        runs = K.runs(cols, firsts)
        spans = K.spans(cols, runs)
        chain, found = K.chain(cols, runs, spans)
        found += K.outside(cols, runs, spans, chain.checked)
        found += K.ended_early(cols, runs, spans)
        self._record([f for f in found if f is not None])
        self._tally(cols, firsts, runs, spans, chain)

    def _record(self, found: list[dict[str, np.ndarray]]) -> None:
        """Keep the anomaly columns found in a batch; count them against their streams."""
        if not found:
            return
        self._anomalies.append({name: np.concatenate([f[name] for f in found])
                                for name in found[0]})
        for k, n in zip(*np.unique(np.concatenate([f["key"] for f in found]),
                                   return_counts=True)):
            self._stream(int(k)).anomalies += int(n)

    def _tally(self, cols: dict, firsts: np.ndarray, r: K.Runs, s: K.Spans, ch: K.Chain) -> None:
        """Per-stream counts, seqnos, snapshots and end status; carry the check state."""
        m = len(cols["key"])
        real, seq = cols["real"], cols["reach_val"]
        groups = len(firsts)
        lasts = np.append(firsts[1:], m) - 1
        gid = np.repeat(np.arange(groups), np.diff(np.append(firsts, m)))
        streams = [self._stream(k) for k in cols["key"][firsts].tolist()]
        slots = np.array([stream.slot for stream in streams], np.int64)
        keys, counts = np.unique((slots[gid[real]] << 8) | cols["op"][real], return_counts=True)
        self._counts.add(keys, counts.astype(np.int64))
        news = np.flatnonzero(r.start & (cols["row"] >= 0))
        runs = np.diff(np.searchsorted(news, np.append(firsts, m))).tolist()
        markers = np.flatnonzero(real & (cols["def_kind"] == MARKER))
        if len(markers):
            self._markers.append(np.stack([slots[gid[markers]].astype(U64),
                                           cols["snap_start"][markers], cols["snap_end"][markers],
                                           cols["snap_flags"][markers].astype(U64)], axis=1))

        items = np.flatnonzero(cols["item"])
        first_item, has_item = K.first_from(items, firsts, lasts)
        last_item, _ = K.last_upto(items, lasts, firsts)
        first_seq, last_seq = K.pick(seq, first_item, has_item), K.pick(seq, last_item, has_item)
        end, has_end = K.last_upto(np.flatnonzero(cols["end"]), lasts, firsts)
        end_status = K.pick(cols["end_status"], end, has_end)
        msg, has_msg = K.last_upto(r.messages, lasts, firsts)
        opaque = K.pick(cols["opaque"], msg, has_msg & (cols["row"][msg] >= 0))
        run_first = r.first[r.id[lasts]]
        in_run = has_msg & (msg >= run_first)
        carried_opaque = K.pick(cols["opaque"], msg, in_run)
        last_start = (in_run & cols["start"][msg]).tolist()
        chain_row, has_chain = K.last_upto(ch.rows, lasts, run_first)
        chain = K.pick(ch.values, chain_row, has_chain)
        j = np.searchsorted(s.at, lasts, "right") - 1
        b, kind = s.at[j], s.kind[j]
        reach = K.pick(s.high, j, np.isin(kind, (MARKER, K.OSO_OPEN)) & (s.items[j] > 0))
        ranges = np.stack([cols["snap_start"][b], cols["snap_end"][b],
                           cols["snap_flags"][b].astype(U64)], axis=1).tolist()
        opens = cols["opens"][run_first].tolist()
        closed = cols["end"][lasts].tolist()
        kind = kind.tolist()
        for g, stream in enumerate(streams):
            stream.streams += runs[g]
            if first_seq[g] is not None:
                if stream.first_seqno is None:
                    stream.first_seqno = first_seq[g]
                stream.last_seqno = last_seq[g]
            if end_status[g] is not None:
                stream.end_status = end_status[g]
            if opaque[g] is not None:
                stream.opaque = opaque[g]
            stream.carry = None if closed[g] else _Carry(
                opens[g], last_start[g], carried_opaque[g], chain[g], kind[g],
                tuple(ranges[g]) if kind[g] == MARKER else None, reach[g])

    # -- output --------------------------------------------------------------------------

    def _resolved_pending(self) -> tuple[dict[int, list[int]], list[tuple[int, int, int]]]:
        """Pending rollbacks placed by the stream opaques learnt since, and the rest."""
        placed: dict[int, list[int]] = {}
        rest = []
        for opaque, seqno, offset in self._pending:
            key = self.tracker.opaques.get(opaque, AMBIGUOUS)
            if key == AMBIGUOUS:
                rest.append((opaque, seqno, offset))
            else:
                placed.setdefault(key, []).append(seqno)
        return placed, rest

    def to_arrow(self) -> pa.Table:
        """One row per vbucket stream, ordered by vbucket and stream id.

        ``vbucket, stream_id`` (null without one), ``opaque`` (of its latest message),
        ``streams`` (runs of it that began in the data), ``first_seqno, last_seqno`` (of
        the first and last item in arrival order), ``snapshots`` and ``snapshot_ranges``
        (start, end, flags of each marker), ``counts`` (frames by opcode name),
        ``rollbacks`` (rollback seqnos), ``end_status`` (name of the latest Stream End's
        status, null if none) and ``anomalies`` (how many).
        """
        import pyarrow as pa

        late, _ = self._resolved_pending()
        streams = [self._streams[k] for k in sorted(self._streams)]
        ranges = self._ranges([s.slot for s in streams])
        counts = self._counts.of([s.slot for s in streams])
        range_type = pa.struct([("start", pa.uint64()), ("end", pa.uint64()),
                                ("flags", pa.uint32())])
        return pa.table({
            "vbucket": pa.array([s.vbucket for s in streams], pa.uint16()),
            "stream_id": pa.array([s.stream_id or None for s in streams], pa.uint16()),
            "opaque": pa.array([s.opaque for s in streams], pa.uint32()),
            "streams": pa.array([s.streams for s in streams], pa.int64()),
            "first_seqno": pa.array([s.first_seqno for s in streams], pa.uint64()),
            "last_seqno": pa.array([s.last_seqno for s in streams], pa.uint64()),
            "snapshots": pa.array(np.diff(np.asarray(ranges.offsets)).astype(np.int64)),
            "snapshot_ranges": ranges.cast(pa.list_(range_type)),
            "counts": counts.cast(pa.map_(pa.string(), pa.int64())),
            "rollbacks": pa.array([(s.rollbacks or [])
                                   + late.get(stream_key(s.vbucket, s.stream_id), [])
                                   for s in streams], pa.list_(pa.uint64())),
            "end_status": pa.array([None if s.end_status is None else
                                    F.enum_name(P.StreamEndStatus, s.end_status)
                                    or str(s.end_status) for s in streams], pa.string()),
            "anomalies": pa.array([s.anomalies for s in streams], pa.int64()),
        })

    def _ranges(self, slots: list[int]) -> pa.ListArray:
        """The snapshot ranges of the stream slots, in that order, each in arrival order."""
        import pyarrow as pa

        rows = np.concatenate(self._markers) if self._markers else np.zeros((0, 4), U64)
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        pick, offsets = _spans(rows[:, 0].astype(np.int64), slots)
        rows = rows[pick]
        ranges = pa.StructArray.from_arrays(
            [pa.array(rows[:, 1]), pa.array(rows[:, 2]), pa.array(rows[:, 3].astype(np.uint32))],
            names=["start", "end", "flags"])
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), ranges)

    def to_pandas(self) -> pd.DataFrame:
        """``to_arrow()`` as a pandas DataFrame with Arrow-backed dtypes."""
        import pandas as pd

        return self.to_arrow().to_pandas(types_mapper=pd.ArrowDtype)

    @property
    def anomalies(self) -> pa.Table:
        """Every anomaly found, by stream offset: ``kind, offset, vbucket, stream_id,
        by_seqno, details`` (``by_seqno``: the item's, or the seqno a snapshot reached)."""
        import pyarrow as pa

        _, unmatched = self._resolved_pending()
        cols = {name: np.concatenate([a[name] for a in self._anomalies])
                for name in self._anomalies[0]} if self._anomalies else None
        rows = []
        if cols is not None:
            for k, off, key, s, s_ok, lo, hi, r_ok, status in zip(
                    *(cols[n].tolist() for n in ("kind", "offset", "key", "seqno",
                                                 "seqno_ok", "low", "high", "range_ok",
                                                 "end_status"))):
                rows.append((off, ANOMALIES[k], key >> 16, key & 0xFFFF or None,
                             s if s_ok else None, _details(k, s if s_ok else None,
                                                           (lo, hi) if r_ok else None,
                                                           status)))
        for opaque, seqno, offset in unmatched:
            rows.append((offset, ANOMALIES[UNMATCHED], None, None, seqno,
                         f"rollback to seqno {seqno} for opaque 0x{opaque:x}: no request "
                         f"or stream uses that opaque"))
        rows.sort(key=lambda r: r[0])
        columns = list(zip(*rows)) or [()] * 6
        return pa.table({
            "kind": pa.array(columns[1], pa.string()),
            "offset": pa.array(columns[0], pa.uint64()),
            "vbucket": pa.array(columns[2], pa.uint16()),
            "stream_id": pa.array(columns[3], pa.uint16()),
            "by_seqno": pa.array(columns[4], pa.uint64()),
            "details": pa.array(columns[5], pa.string()),
        })

    def report(self, max_anomalies: int = 20) -> str:
        """A readable account: one line per stream, then the first anomalies."""
        table = self.to_arrow().to_pylist()
        anomalies = self.anomalies
        lines = [f"{self.frames} frames, {len(table)} vbucket streams, "
                 f"{anomalies.num_rows} anomalies"]
        for s in table:
            name = f"vb {s['vbucket']}" + (f" sid {s['stream_id']}" if s["stream_id"] else "")
            seqnos = ("no items" if s["first_seqno"] is None
                      else f"seqno {s['first_seqno']}..{s['last_seqno']}")
            counts = ", ".join(f"{n} {op}" for op, n in sorted(s["counts"],
                                                                key=lambda x: -x[1])[:4])
            extra = f", rollbacks to {s['rollbacks']}" if s["rollbacks"] else ""
            lines.append(f"  {name}: {seqnos}, {s['snapshots']} snapshots ({counts}){extra}, "
                         f"end {s['end_status'] or '-'}, {s['anomalies']} anomalies")
        for a in anomalies.slice(0, max_anomalies).to_pylist():
            lines.append(f"  ! {a['kind']} at byte {a['offset']}"
                         + (f" (vb {a['vbucket']})" if a["vbucket"] is not None else "")
                         + f": {a['details']}")
        if anomalies.num_rows > max_anomalies:
            lines.append(f"  ... {anomalies.num_rows - max_anomalies} more anomalies")
        return "\n".join(lines)

    def __str__(self):
        return self.report()

    def __repr__(self):
        return (f"<Summary {self.frames} frames, {len(self._streams)} vbucket streams, "
                f"{sum(s.anomalies for s in self._streams.values())} anomalies>")


def _details(kind: int, seqno, span, status: int) -> str:
    """The ``details`` text of an anomaly: the seqno found, the span it broke."""
    where = f"snapshot [{span[0]}, {span[1]}]" if span else "an OSO snapshot"
    at = f"seqno {seqno}" if seqno is not None else "no item"
    if kind == K.BACKWARDS:
        return f"by_seqno {seqno} does not exceed the previous {span[0]}"
    if kind == K.OUTSIDE:
        return (f"by_seqno {seqno} outside {where}" if span
                else f"by_seqno {seqno} before any snapshot marker of the stream")
    if kind == K.EARLY:
        return (f"{where} ended at {at}" if span
                else "an OSO snapshot ended without its end marker")
    name = F.enum_name(P.StreamEndStatus, status) or str(status)
    return f"stream end ({name}) inside {where}" + (f", reached {at}" if span else "")


def summarize(batches: FrameBatch | Iterable[FrameBatch]) -> Summary:
    """Stream health of one batch or an iterable of batches (e.g. ``iter_batches``)."""
    summary = Summary()
    for batch in [batches] if isinstance(batches, FrameBatch) else batches:
        summary.update(batch)
    return summary

