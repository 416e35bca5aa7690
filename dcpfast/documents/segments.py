"""Whole-array helpers of the state engine: running minima that restart at segment
boundaries, and the questions a document asks of the restarts and collection clears of a
stretch of stream (``Barriers``).

Positions here are small ints local to one stretch (``rel``): 0 for what the state already
holds, 1 for the carried state of each stream, 2 and up for the stretch's rows in order.
"""

from __future__ import annotations

import numpy as np

from ..arrays import unique as distinct

U64_MAX = np.uint64(2**64 - 1)


def segment_ids(starts: np.ndarray) -> np.ndarray:
    """The segment of each element (0, 1, ...) where ``starts`` marks each segment's first."""
    return np.cumsum(starts, dtype=np.int64) - 1


def cummin(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running minimum of ``values`` (uint64) that restarts at each segment start."""
    if not len(values):
        return values.copy()
    unique, rank = distinct(values, inverse=True)
    top = len(unique) - 1
    base = segment_ids(starts) * len(unique)
    return unique[top - (np.maximum.accumulate(base + top - rank) - base)]


def dense(keys: np.ndarray, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each of ``keys`` in the sorted unique array ``known``, and whether found."""
    at = np.searchsorted(known, keys)
    inside = at < len(known)
    found = np.zeros(len(keys), bool)
    found[inside] = known[at[inside]] == keys[inside]
    return np.where(found, at, 0), found


class Barriers:
    """The restarts and collection clears of one stretch, and what they do to a document.

    A restart of a stream at ``rel`` with restart point ``S`` discards every version of
    that stream before it with a seqno above ``S`` (and every collection clear among
    them). A clear of a collection on a stream removes every version of it before the
    clear. ``restarts``: (unit, rel, S) arrays; ``clears``: (unit, cid, rel, seqno).
    """

    def __init__(self, restarts, clears, size: int):
        self.stride = size + 3           # a key's stride: the rel values are below it
        unit, rel, point = restarts
        order = np.lexsort((rel, unit))
        self.r_unit, self.r_rel, self.r_point = unit[order], rel[order], point[order]
        self.r_units = distinct(self.r_unit)
        ids, _ = dense(self.r_unit, self.r_units)
        self.r_key = ids * self.stride + self.r_rel
        # the restart points with a sentinel, for range minima by reduceat
        self.r_min = np.append(self.r_point, U64_MAX).astype(np.uint64)
        unit, cid, rel, seqno = clears
        keys = unit.astype(np.uint64) << np.uint64(32) | cid.astype(np.uint64)
        order = np.lexsort((rel, keys))
        self.c_keys, self.c_rel, self.c_seqno = keys[order], rel[order], seqno[order]
        self.c_unit = unit[order]
        self.c_known = distinct(self.c_keys)
        ids, _ = dense(self.c_keys, self.c_known)
        self.c_key = ids * self.stride + self.c_rel
        kept = self.c_kept = ~self.discarded(self.c_unit, self.c_seqno, self.c_rel)
        # surviving clears' seqnos, suffix minima per collection key (for gone_after)
        self.c_left = np.where(kept, self.c_seqno, U64_MAX).astype(np.uint64)
        starts = np.ones(len(keys), bool)
        starts[1:] = self.c_keys[1:] != self.c_keys[:-1]
        ends = np.ones(len(keys), bool)
        ends[:-1] = starts[1:]
        self.c_suffix = cummin(self.c_left[::-1], ends[::-1])[::-1] if len(keys) \
            else self.c_left

    @property
    def empty(self) -> bool:
        return not len(self.r_unit) and not len(self.c_keys)

    def restart_min(self, unit, lo, hi=None) -> np.ndarray:
        """Smallest restart point of each ``unit`` strictly between ``lo`` and ``hi`` (None:
        the stretch's end); 2**64 - 1 where there is none."""
        n = len(unit)
        out = np.full(n, U64_MAX, np.uint64)
        if not len(self.r_unit) or not n:
            return out
        ids, found = dense(np.asarray(unit, np.uint32), self.r_units)
        hi = np.full(n, self.stride - 1, np.int64) if hi is None else np.asarray(hi, np.int64)
        base = ids * self.stride
        first = np.searchsorted(self.r_key, base + np.asarray(lo, np.int64), "right")
        stop = np.searchsorted(self.r_key, base + hi, "left")
        some = found & (first < stop)
        if some.any():
            bounds = np.empty(2 * int(some.sum()), np.int64)
            bounds[0::2], bounds[1::2] = first[some], stop[some]
            out[some] = np.minimum.reduceat(self.r_min, bounds)[0::2]
        return out

    def discarded(self, unit, seqno, lo, hi=None) -> np.ndarray:
        """Whether a restart strictly between ``lo`` and ``hi`` discards each version."""
        return self.restart_min(unit, lo, hi) < np.asarray(seqno, np.uint64)

    def _clear_bounds(self, unit, cid, lo, hi):
        keys = np.asarray(unit, np.uint64) << np.uint64(32) | np.asarray(cid, np.uint64)
        ids, found = dense(keys, self.c_known)
        base = ids * self.stride
        first = np.searchsorted(self.c_key, base + np.asarray(lo, np.int64), "right")
        stop = np.searchsorted(self.c_key, base + np.asarray(hi, np.int64), "left")
        return found, first, stop

    def cleared(self, unit, cid, lo, hi) -> np.ndarray:
        """Whether a clear of each document's collection lies strictly between ``lo`` and
        ``hi`` (whatever a later restart does to it)."""
        if not len(self.c_keys) or not len(unit):
            return np.zeros(len(unit), bool)
        found, first, stop = self._clear_bounds(unit, cid, lo, hi)
        return found & (first < stop)

    def gone_after(self, unit, cid, lo) -> np.ndarray:
        """Seqno of the first clear after ``lo`` of each document's collection that no later
        restart discards (2**64 - 1 where there is none)."""
        out = np.full(len(unit), U64_MAX, np.uint64)
        if not len(self.c_keys) or not len(unit):
            return out
        found, first, stop = self._clear_bounds(unit, cid, lo, self.stride - 1)
        some = found & (first < stop)
        out[some] = self.c_suffix[first[some]]
        return out
