"""The distinct values of a large integer array, where each first appears and each
element's place among them (``unique``), as numpy's ``np.unique`` answers but without its
cost: numpy 2.4 finds them by hashing, many times slower than a sort on arrays of a
million elements, and sorts stably for ``return_index``. Here values that
span a small range are counted, the others sorted once. And a column at some of its rows
(``at``), by ``np.take``.
"""

from __future__ import annotations

import numpy as np


def unique(values: np.ndarray, *, first: bool = False, inverse: bool = False):
    """The sorted distinct values of ``values`` (integers, flattened); with ``first`` the
    index of each one's first element, with ``inverse`` the index of each element among
    them: what ``np.unique`` gives with ``return_index`` and ``return_inverse`` (in that
    order, the indices 1-D)."""
    values = np.asarray(values).ravel()
    found, rank = _distinct(values, inverse or first)
    if not (first or inverse):
        return found
    out = [found]
    if first:
        firsts = np.full(len(found), len(values), np.intp)
        np.minimum.at(firsts, rank, np.arange(len(values)))
        out.append(firsts)
    if inverse:
        out.append(rank)
    return tuple(out)


def at(column: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``column[index]`` for an array of indices: by ``np.take`` where they are integers
    numpy takes as they are (faster than indexing, for gathers and lookup tables alike),
    else by indexing."""
    kind, size = index.dtype.kind, index.dtype.itemsize
    if kind == "i" or (kind == "u" and size < 8):
        return column.take(index)
    return column[index]


def _distinct(values: np.ndarray, inverse: bool):
    """The sorted distinct values of the 1-D ``values``, and each element's index among
    them where ``inverse`` (else None)."""
    if not len(values):
        return values.copy(), np.zeros(0, np.intp)
    low, high = int(values.min()), int(values.max())
    if high - low <= max(1 << 16, len(values)):           # a range to count in
        if values.dtype.kind == "u":                 # no negative differences
            place = (values - values.dtype.type(low)).astype(np.intp)
        else:                                          # wide enough for any difference
            place = values.astype(np.int64) - np.int64(low)
        present = np.zeros(high - low + 1, bool)
        present[place] = True
        found = np.flatnonzero(present).astype(values.dtype) + values.dtype.type(low)
        return found, (np.cumsum(present, dtype=np.intp) - 1)[place] if inverse else None
    if not inverse:
        ordered = np.sort(values)
        return ordered[_heads(ordered)], None
    order = np.argsort(values)
    ordered = values[order]
    heads = _heads(ordered)
    rank = np.empty(len(values), np.intp)
    rank[order] = np.cumsum(heads, dtype=np.intp) - 1
    return ordered[heads], rank


def _heads(ordered: np.ndarray) -> np.ndarray:
    """Where each run of equal values of the sorted ``ordered`` begins."""
    heads = np.empty(len(ordered), bool)
    heads[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=heads[1:])
    return heads
