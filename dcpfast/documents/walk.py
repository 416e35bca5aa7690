"""Per vbucket stream, from stretch to stretch: a dense slot for each stream, the stream
checks that find lost frames (``streams.checks``, the same as ``summarize``'s), and the
walk of the state (``_core.state.walk_state``): where each stream restarts and from which
seqno, which items go backwards, which changes fall inside the requested point in time,
and how far each stream's snapshots are complete (its consistent seqno, which stops
rising where frames were lost).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _core
from .._core import contract as C
from ..arrays import unique as distinct
from ..streams.checks import Checks
from .rows import Rows

U64_MAX = np.uint64(2**64 - 1)


class Walk(NamedTuple):
    """What the walk found, per row of the stretch, and its restarts."""

    bad: np.ndarray          # an item whose seqno is not above the stream's previous one
    previous: np.ndarray     # that previous seqno
    applies: np.ndarray      # a change within at_seqno/at_time (and not bad)
    restarts: tuple          # (unit, rel, point) of each restart whose point is known
    found: C.Findings             # what the stream checks found
    slots: np.ndarray        # each row's stream slot (-1 for a loss)


class Streams:
    """The vbucket streams seen: a slot each, and their check and walk states."""

    def __init__(self):
        self.units: list[int] = []                 # the stream of each slot
        self.by_vbucket = np.full(1 << 16, -1, np.int64)   # streams without a stream id
        self.by_unit: dict[int, int] = {}          # streams with one
        self.carry = np.zeros((0, C.K_FIELDS), np.uint64)
        self.checks = Checks()
        self.every_lost = False                    # bytes were lost: every stream is

    def slots(self, units: np.ndarray, streams: np.ndarray) -> np.ndarray:
        """The slot of each row's stream, -1 where ``streams`` says the row has none (new
        streams get the next slots)."""
        if not (units & np.uint32(0xFFFF)).any():
            vbuckets = units >> np.uint32(16)
            slots = self.by_vbucket.take(vbuckets)
            new = (slots < 0) & streams
            if new.any():
                seen = np.bincount(vbuckets[new], minlength=1 << 16)
                for vb in np.flatnonzero(seen).tolist():
                    self.by_vbucket[vb] = self._new(vb << 16)
                slots = self.by_vbucket.take(vbuckets)
            slots[~streams] = -1
            return slots
        out = np.full(len(units), -1, np.int64)
        out[streams] = self._slots_of(units[streams])
        return out

    def _slots_of(self, units: np.ndarray) -> np.ndarray:
        """The slot of each of ``units`` (streams with a stream id among them)."""
        unique, inverse = distinct(units, inverse=True)
        known = [self.by_unit.get(u) for u in unique.tolist()]
        for k, u in enumerate(unique.tolist()):
            if known[k] is None:
                known[k] = self._new(u)
        return np.array(known, np.int64)[inverse].reshape(len(units))

    def _new(self, unit: int) -> int:
        slot = len(self.units)
        self.units.append(unit)
        if unit & 0xFFFF:
            self.by_unit[unit] = slot
        else:
            self.by_vbucket[unit >> 16] = slot
            self.by_unit[unit] = slot
        if slot >= len(self.carry):
            grown = np.zeros((max(16, 2 * len(self.carry)), C.K_FIELDS), np.uint64)
            grown[:len(self.carry)] = self.carry
            self.carry = grown
        self.carry[slot] = 0
        self.carry[slot, C.K_CUT] = self.carry[slot, C.K_FLOOR] = U64_MAX
        self.carry[slot, C.K_BITS] = C.K_FRESH | (C.K_LOST if self.every_lost else 0)
        return slot

    def walk(self, rows: Rows, limit, at_time: int | None) -> Walk:
        """Check and walk ``rows`` (the next stretch), the streams' states updated."""
        n = len(rows)
        what = rows.what
        slots = self.slots(rows.unit, (what != C.W_LOSS) & (what != C.W_SKIP))
        found, _ = self.checks.run(event=rows.events(), slot=slots, info=rows.info,
                                   opaque=rows.opaque, seqno=rows.seqno,
                                   snap_start=rows.snap_start, snap_end=rows.snap_end,
                                   snap_flags=rows.snap_flags, end_status=rows.end_status)
        lost = np.zeros(n, np.uint8)
        lost[found.at] = 1
        lim = limit(rows.unit >> np.uint32(16))
        walked = _core.state.walk_state(C.WalkRequest(
            what=rows.what, slot=slots, seqno=rows.seqno, cas=rows.cas,
            snap_start=rows.snap_start, snap_end=rows.snap_end, oso=rows.oso,
            rolled=rows.rolled.view(np.uint8), limit=np.ascontiguousarray(lim, np.uint64),
            lost=lost, at_time=int(U64_MAX) if at_time is None else at_time,
            carry=self.carry[:len(self.units)]))
        if (what == C.W_LOSS).any():
            self.every_lost = True
        done = np.flatnonzero(walked.known)
        units = np.array(self.units, np.uint32)
        carried_slots = walked.carried_slots
        restarts = (np.concatenate([units[carried_slots], rows.unit[done]]),
                    np.concatenate([np.ones(len(carried_slots), np.int64), done + 2]),
                    np.concatenate([walked.carried_points, walked.point[done]]))
        return Walk(bad=walked.bad, previous=walked.previous, applies=walked.applies,
                    restarts=restarts, found=found, slots=slots)

    def consistent(self) -> dict[int, int]:
        """Each stream's consistent seqno."""
        return dict(zip(self.units, self.carry[:len(self.units), C.K_CONSISTENT].tolist()))

    def cuts(self) -> dict[int, int]:
        """Each stream's time cut: its changes from this seqno are past ``at_time``."""
        return dict(zip(self.units, self.carry[:len(self.units), C.K_CUT].tolist()))

    def lost(self) -> list[int]:
        """The streams where frames were lost."""
        bits = self.carry[:len(self.units), C.K_BITS]
        return [u for u, b in zip(self.units, bits.tolist()) if b & C.K_LOST]

    def floors(self) -> dict[int, int]:
        """Each stream's floor: the highest seqno at or below which it sent nothing (0:
        it began at the beginning; 2**64 - 1: it has sent nothing)."""
        return dict(zip(self.units, self.carry[:len(self.units), C.K_FLOOR].tolist()))
