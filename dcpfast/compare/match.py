"""Documents matched across the two sides by (collection, key) and each one judged: equal,
missing from one side, a mismatch (with the fields that differ), or not compared (a side
cannot vouch for it). Vectorised: keys are hashed once for both sides, never turned into
Python objects."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .fields import differing
from .rules import KINDS, VALUE_FIELDS, order, wanted
from .sides import Side

#: A judgement: an index into ``KINDS``, or one of these.
MISSING_FROM_SOURCE, MISSING_FROM_TARGET, MISMATCH = range(len(KINDS))
EQUAL, NOT_COMPARED, ABSENT = range(len(KINDS), len(KINDS) + 3)


@dataclass
class Judged:
    """Every document of either side, judged. Arrays run over the identities (one per
    document present on either side, a tombstone counting as a row of its side)."""

    labels: list[tuple]       # the collections, in row order; ``code`` indexes them
    code: np.ndarray          # each identity's collection
    source: np.ndarray        # its row in the source's table, -1 where it has none
    target: np.ndarray        # its row in the target's table, -1 where it has none
    present: tuple[np.ndarray, np.ndarray]     # whether each side holds it (a tombstone
    #                           counts only with include_deleted)
    kind: np.ndarray          # MISSING_FROM_SOURCE ... ABSENT
    differs: np.ndarray       # for the mismatches, in order: which of ``fields`` differ
    fields: tuple[str, ...]


def judge(a: Side, b: Side, *, fields: tuple[str, ...], include_deleted: bool,
          collections) -> Judged:
    """Match ``a`` (the source) and ``b`` (the target) and judge every document."""
    labels, (ra, ka, ca), (rb, kb, cb) = _identities(a, b, collections)
    keys = int(max(ka.max(initial=-1), kb.max(initial=-1))) + 1
    values = any(f in VALUE_FIELDS for f in fields)
    ua = a.uncertain(b, values=values)[ra]
    ub = b.uncertain(a, values=values)[rb]
    found_a, found_b = Identities(ka, ca, keys), Identities(kb, cb, keys)
    wa, ua = found_a.winners(a.numbers("by_seqno", np.uint64)[ra],
                             a.numbers("vbucket", np.int64)[ra], ua)
    wb, ub = found_b.winners(b.numbers("by_seqno", np.uint64)[rb],
                             b.numbers("vbucket", np.int64)[rb], ub)
    ia, ib = _matched(found_a.take(wa), found_b.take(wb))
    code = np.where(ia >= 0, _at(ca[wa], ia, 0), _at(cb[wb], ib, 0))
    source, target = _at(ra[wa], ia, -1), _at(rb[wb], ib, -1)
    unsure = _at(ua, ia, False) | _at(ub, ib, False)
    has_a = _present(a, source, include_deleted)
    has_b = _present(b, target, include_deleted)
    kind = np.full(len(code), ABSENT, np.int8)
    kind[has_b & ~has_a] = MISSING_FROM_SOURCE
    kind[has_a & ~has_b] = MISSING_FROM_TARGET
    both = np.flatnonzero(has_a & has_b & ~unsure)
    differs = np.zeros((len(both), len(fields)), bool)
    for j, field in enumerate(fields):
        differs[:, j] = differing(field, a, source[both], b, target[both])
    mismatch = differs.any(axis=1)
    kind[both] = np.where(mismatch, MISMATCH, EQUAL)
    kind[unsure] = NOT_COMPARED
    return Judged(labels, code, source, target, (has_a, has_b), kind, differs[mismatch],
                  fields)


def _identities(a: Side, b: Side, collections):
    """The collections of both sides in order, and per side the rows ``collections``
    keeps, each row's key number (the same key has the same number on both sides) and
    collection."""
    (la, ia), (lb, ib) = a.labels(b), b.labels(a)
    labels = order(la + lb)
    keep = wanted(labels, collections)
    labels = [lb_ for lb_ in labels if lb_ in keep]
    code_of = {lb_: i for i, lb_ in enumerate(labels)}
    sides = []
    for side, found, inverse in ((a, la, ia), (b, lb, ib)):
        codes = np.array([code_of.get(lb_, -1) for lb_ in found], np.int64)[inverse] \
            if found else np.zeros(0, np.int64)
        rows = np.flatnonzero(codes >= 0)
        keys = side.column("key").cast(pa.large_binary())
        sides.append((rows, keys if len(rows) == side.rows else keys.take(pa.array(rows)),
                      codes[rows]))
    encoded = pc.dictionary_encode(pa.concat_arrays([sides[0][1], sides[1][1]]))
    number = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    n = len(sides[0][0])
    return labels, *[(rows, k, codes) for (rows, _, codes), k in
                     zip(sides, (number[:n], number[n:]))]


class Identities:
    """A side's documents named as (collection, key number) pairs: matched by a table
    indexed by key number where no key is in two collections of a side (the usual case),
    else by a hash of the pairs."""

    def __init__(self, key: np.ndarray, code: np.ndarray, keys: int):
        self.key, self.code, self.keys = key, code, keys
        self.shared = bool(len(key)) and np.bincount(key, minlength=keys).max() > 1

    def combined(self) -> np.ndarray:
        """Each pair as one int64."""
        return self.code * self.keys + self.key

    def winners(self, seqno: np.ndarray, vbucket: np.ndarray,
                unsure: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One row per identity, and whether it is unsure. A side holds a key once per
        bucket; where it holds one in several vbuckets (dumps of several buckets put
        together), the row with the highest seqno (then vbucket) stands, and the identity
        is unsure if any of its rows is."""
        if not self.shared:
            return np.arange(len(self.key)), unsure
        ids = self.combined()
        if len(pc.unique(pa.array(ids))) == len(ids):
            return np.arange(len(ids)), unsure
        by = np.lexsort((vbucket, seqno, ids))
        ordered = ids[by]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        ends = np.r_[starts[1:], len(ordered)] - 1
        return by[ends], np.logical_or.reduceat(unsure[by], starts)

    def take(self, rows: np.ndarray) -> Identities:
        out = Identities(self.key[rows], self.code[rows], self.keys)
        out.shared = self.shared and out.shared
        return out


def _matched(a: Identities, b: Identities) -> tuple[np.ndarray, np.ndarray]:
    """For every identity of either side (the source's first, then the target's own),
    its index on each side, -1 where that side has none."""
    if a.shared or b.shared:
        found = pc.fill_null(pc.index_in(pa.array(b.combined()),
                                         value_set=pa.array(a.combined())), -1)
        at = found.to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        by_key = np.full(a.keys, -1, np.int64)
        by_key[a.key] = np.arange(len(a.key))
        at = by_key[b.key]
        hit = np.flatnonzero(at >= 0)
        at[hit[a.code[at[hit]] != b.code[hit]]] = -1
    b_of_a = np.full(len(a.key), -1, np.int64)
    b_of_a[at[at >= 0]] = np.flatnonzero(at >= 0)
    only_b = np.flatnonzero(at < 0)
    return (np.r_[np.arange(len(a.key)), np.full(len(only_b), -1)],
            np.r_[b_of_a, only_b])


def _at(values: np.ndarray, index: np.ndarray, fill) -> np.ndarray:
    """``values[index]``, ``fill`` where ``index`` is -1."""
    out = np.full(len(index), fill, values.dtype)
    found = index >= 0
    out[found] = values[index[found]]
    return out


def _present(side: Side, rows: np.ndarray, include_deleted: bool) -> np.ndarray:
    """Whether the side holds each identity: a row (``rows`` >= 0) that is not a
    tombstone, unless tombstones count."""
    out = rows >= 0
    if not include_deleted and side.rows:
        out &= ~side.numbers("deleted", bool)[np.maximum(rows, 0)]
    return out
