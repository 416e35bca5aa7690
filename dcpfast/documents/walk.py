"""The per-stream walk of a stretch: where each stream restarts and from which seqno, which
items go backwards, which changes fall inside the requested point in time, and how far
each stream's snapshots are complete. All streams at once, in whole-array steps.

The rows of a stretch are laid out stream by stream (``Sequence``): first a slot holding
what the stream carried from the stretch before (``Carry``), then its rows in stream
order. Scans run over that layout and restart at each stream's carried slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import protocol as P
from .rows import ITEMS, MARKER, OSO, RESTART, TIMED, Rows
from .segments import U64_MAX, cummax, cummin, last_flagged, next_flagged

#: The ``what`` of a carried slot.
CARRIED = 254
#: The logical-counter bits of a CAS: the hybrid logical clock keeps nanoseconds since the
#: epoch in the bits above them.
CLOCK_COUNTER = np.uint64(0xFFFF)


@dataclass
class Carry:
    """What a stream carries from one stretch to the next."""

    chain: int = 0                               # the seqno its next item must exceed
    oso: bool = False                            # inside an OSO snapshot
    lazy: bool = False                           # restarted; the point awaits an item
    cut: int = int(U64_MAX)                      # at_time: changes from this seqno are out
    marker: tuple[int, int] | None = None        # its open snapshot (start, end)
    consistent: int = 0                          # end of its last complete snapshot


class Walk(NamedTuple):
    """What the walk found, per row of the stretch, and its restarts."""

    bad: np.ndarray          # an item whose seqno is not above the stream's previous one
    previous: np.ndarray     # that previous seqno
    applies: np.ndarray      # a change within at_seqno/at_time (and not bad)
    restarts: tuple          # (unit, rel, point) of each restart whose point is known


class Sequence:
    """The stretch laid out stream by stream, each stream after a carried slot."""

    def __init__(self, rows: Rows, carries: dict[int, Carry]):
        n = len(rows)
        self.units = np.unique(rows.unit)
        self.order = np.argsort(rows.unit, kind="stable")
        k = len(self.units)
        self.carry_at = np.searchsorted(rows.unit[self.order], self.units) + np.arange(k)
        self.size = n + k
        self.is_carry = np.zeros(self.size, bool)
        self.is_carry[self.carry_at] = True
        self.row_slot = np.empty(n, np.int64)
        self.row_slot[self.order] = np.flatnonzero(~self.is_carry)
        self.group = np.cumsum(self.is_carry) - 1
        self.carries = [carries.get(int(u)) or Carry() for u in self.units.tolist()]
        self.rows = rows

    def lay(self, column: np.ndarray, carried, dtype=None) -> np.ndarray:
        """``column`` of the rows in this layout, ``carried`` in the carried slots."""
        out = np.empty(self.size, dtype or column.dtype)
        out[self.row_slot] = column
        out[self.carry_at] = carried
        return out

    def last_slots(self) -> np.ndarray:
        """The last slot of each stream."""
        return np.append(self.carry_at[1:], self.size) - 1


def walk(rows: Rows, carries: dict[int, Carry], limit, at_time: int | None) -> Walk:
    """Walk ``rows`` with the ``carries`` of their streams (updated in place); ``limit``
    gives the at_seqno limit of vbuckets (``limits``), ``at_time`` the time in
    nanoseconds since the epoch (or None)."""
    seq = Sequence(rows, carries)
    what = seq.lay(rows.what, CARRIED)
    seqno = seq.lay(rows.seqno, 0)
    unit = seq.lay(rows.unit, seq.units)
    item = ITEMS[np.minimum(what, 15)] & ~seq.is_carry
    lazy = np.array([c.lazy for c in seq.carries], bool)
    # a restart row starts its stream afresh; a carried slot whose restart point awaited
    # an item stands for that earlier restart (the point, and what it discards, only)
    fresh = what == RESTART
    restart = fresh | (seq.is_carry & lazy[seq.group])
    point, known = _points(seq, what, seqno, unit, item, restart)
    previous, bad, inside, running = _chain(seq, what, seqno, item, restart, fresh, point,
                                            known)
    lim = limit(unit >> np.uint32(16))
    cut = _cut(seq, what, seqno, rows, restart & known, point, at_time, bad)
    oso_end = (what == OSO) & (seq.lay(rows.oso, 0) & P.OsoFlag.END != 0)
    # inside an OSO snapshot items come in key order: the snapshot is complete only at
    # its end, if the highest seqno by then reached the marker's end
    reach = (item & ~bad & ~inside) | oso_end
    _snapshots(seq, what, np.where(oso_end, running, seqno), reach, restart, fresh, known,
               point, lim, cut)
    waiting = np.zeros(len(seq.units), bool)
    waiting[seq.group[restart & ~known]] = True
    for c, still in zip(seq.carries, waiting.tolist()):
        c.lazy = still
    for u, c in zip(seq.units.tolist(), seq.carries):
        carries[u] = c
    applies = (seqno <= lim) & (seqno < cut) & ~bad
    rel = seq.lay(np.arange(2, len(rows) + 2), 1, np.int64)
    done = restart & known
    return Walk(bad[seq.row_slot], previous[seq.row_slot], applies[seq.row_slot],
                (unit[done], rel[done], point[done]))


def _points(seq, what, seqno, unit, item, restart):
    """Each restart's point: a rollback's seqno, else one below the stream's next item
    (unknown, ``known`` false, where no item follows in the stretch)."""
    point = np.zeros(seq.size, np.uint64)
    rolled = seq.lay(seq.rows.rolled, False)
    point[rolled] = seqno[rolled]
    known = restart & rolled
    lazy = restart & ~rolled
    if lazy.any():
        nxt = next_flagged(item)[lazy]
        ok = nxt < seq.size
        ok[ok] = unit[nxt[ok]] == unit[lazy][ok]
        at = np.flatnonzero(lazy)[ok]
        point[at] = seqno[nxt[ok]] - np.uint64(1)
        known[at] = True
    return point, known


def _chain(seq, what, seqno, item, restart, fresh, point, known):
    """The seqno each item must exceed, and the items that do not (outside OSO); and at
    each slot whether it is inside an OSO snapshot, and the highest seqno so far."""
    chain = np.where(item, seqno, np.uint64(0)).astype(np.uint64)
    chain[seq.carry_at] = [c.chain for c in seq.carries]
    chain[restart] = np.where(known[restart], point[restart], np.uint64(0))
    starts = seq.is_carry | restart
    running = cummax(chain, starts)
    previous = np.zeros(seq.size, np.uint64)
    previous[1:] = running[:-1]
    oso_flags = seq.lay(seq.rows.oso, 0)
    setters = starts | (what == OSO)
    value = (what == OSO) & (oso_flags & P.OsoFlag.START != 0) & (oso_flags & P.OsoFlag.END == 0)
    value[seq.carry_at] = [c.oso for c in seq.carries]
    value[fresh] = False
    inside = value[last_flagged(setters)]
    bad = item & ~inside & (seqno <= previous)
    for c, end in zip(seq.carries, seq.last_slots().tolist()):
        c.chain, c.oso = int(running[end]), bool(inside[end])
    return previous, bad, inside, running


def _cut(seq, what, seqno, rows, restarts, point, at_time, bad):
    """At each slot, the seqno from which the stream's changes are past ``at_time``: the
    lowest seqno of a change whose CAS clock is past it, since the stream last restarted
    below that seqno."""
    if at_time is None:
        return np.full(seq.size, U64_MAX, np.uint64)
    cas = seq.lay(rows.cas, 0)
    late = TIMED[np.minimum(what, 15)] & ~seq.is_carry & ~bad & \
        (cas & ~CLOCK_COUNTER > np.uint64(at_time))
    values = np.where(late, seqno, U64_MAX).astype(np.uint64)
    values[seq.carry_at] = [c.cut for c in seq.carries]
    breaks = seq.is_carry.copy()
    group, lo, low = -1, 0, U64_MAX
    for q in np.flatnonzero(restarts).tolist():
        if seq.group[q] != group:
            group, lo, low = seq.group[q], seq.carry_at[seq.group[q]], U64_MAX
        if q > lo:
            low = min(low, values[lo:q].min())
        before = min(low, values[q]) if seq.is_carry[q] else low
        if point[q] < before:
            breaks[q], values[q], low = True, U64_MAX, U64_MAX
        lo = q
    cut = cummin(values, breaks)
    for c, end in zip(seq.carries, seq.last_slots().tolist()):
        c.cut = int(cut[end])
    return cut


def _snapshots(seq, what, seqno, item, restart, fresh, known, point, lim, cut) -> None:
    """Complete the snapshots of the stretch and move each stream's ``consistent`` to the
    end of its last complete snapshot within the limits (a restart lowers it to its point).
    ``item``: the slots that complete their snapshot if their ``seqno`` reaches its end."""
    marker = what == MARKER
    setters = seq.is_carry | restart | marker
    start = seq.lay(seq.rows.snap_start, 0)
    end = seq.lay(seq.rows.snap_end, 0)
    has = marker.copy()
    for c, at in zip(seq.carries, seq.carry_at.tolist()):
        if c.marker is not None:
            has[at] = True
            start[at], end[at] = c.marker
    has[fresh] = False
    current = last_flagged(setters)
    reach = item & has[current] & (seqno >= end[current])
    setter_ids, first = np.unique(current[reach], return_index=True)
    done_at = np.full(seq.size, -1, np.int64)
    done_at[setter_ids] = np.flatnonzero(reach)[first]
    slots = np.flatnonzero(setters)
    nexts = np.append(slots[1:], seq.size)
    follow = (nexts < seq.size) & has[slots] & (done_at[slots] < 0)
    follow[follow] = marker[nexts[follow]] & (seq.group[nexts[follow]] == seq.group[slots[follow]])
    done_at[slots[follow]] = nexts[follow]
    completed = np.flatnonzero((done_at >= 0) & has)
    by = done_at[completed]
    covered = completed[(end[completed] <= lim[by]) & (end[completed] < cut[by])]
    groups = len(seq.units)
    consistent = np.array([c.consistent for c in seq.carries], np.uint64)
    after = np.full(groups, -1, np.int64)
    mine = seq.group[covered]
    last = len(covered) - 1 - np.unique(mine[::-1], return_index=True)[1]
    consistent[mine[last]] = end[covered[last]]
    after[mine[last]] = done_at[covered[last]]
    points = np.flatnonzero(restart & known)
    later = points > after[seq.group[points]]
    np.minimum.at(consistent, seq.group[points[later]], point[points[later]])
    tails = slots[len(slots) - 1 - np.unique(seq.group[slots][::-1], return_index=True)[1]]
    for c, value, tail in zip(seq.carries, consistent.tolist(), tails.tolist()):
        c.consistent = value
        c.marker = (int(start[tail]), int(end[tail])) if has[tail] and done_at[tail] < 0 \
            else None
