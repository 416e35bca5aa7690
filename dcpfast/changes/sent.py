"""The versions a captured stream sent, one per identity (vbucket, key, CAS), found again
by that identity (``Sent``): what an audit looks up each delivered message in.

A version sent twice (a restart below it sends it again) is one version, at the first
place it was sent; it stands where any of its sendings does. Lookups go by CAS first (a
sorted array: a CAS is nearly always one version's alone), then compare the vbucket and
the key of the one candidate; the few CAS values that several versions share are looked
up one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Sent:
    """One row per version: its ``vbucket``, ``key`` (text; null where not UTF-8),
    ``cas``, first ``place`` in the stream, ``doc`` (the engine's document id) and
    whether it ``stands``."""

    vbucket: np.ndarray
    key: pa.Array
    cas: np.ndarray
    place: np.ndarray
    doc: np.ndarray
    stands: np.ndarray

    @classmethod
    def of(cls, vbucket: np.ndarray, key: pa.Array, cas: np.ndarray, place: np.ndarray,
           doc: np.ndarray, stands: np.ndarray) -> Sent:
        """The versions of every sending (one row each), those sent twice made one."""
        vbucket = np.asarray(vbucket, np.int64)
        cas = np.asarray(cas, np.uint64)
        order = np.lexsort((place, vbucket, cas))
        vb, c = vbucket[order], cas[order]
        same = np.zeros(len(order), bool)           # the same CAS and vbucket as before
        same[1:] = (c[1:] == c[:-1]) & (vb[1:] == vb[:-1])
        group = np.cumsum(~same) - 1
        if same.any():                              # rare: split by key within a run
            group = _by_key(group, same, key.take(pa.array(order)))
            regroup = np.argsort(group, kind="stable")
            order, group = order[regroup], group[regroup]
        first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]]) if len(group) \
            else np.zeros(0, np.int64)
        at = order[first]
        doc_min = np.minimum.reduceat(np.asarray(doc, np.int64)[order], first) \
            if len(first) else np.zeros(0, np.int64)
        stands_any = np.logical_or.reduceat(np.asarray(stands, bool)[order], first) \
            if len(first) else np.zeros(0, bool)
        return cls(vbucket[at], key.take(pa.array(at)), cas[at],
                   np.asarray(place, np.int64)[at], doc_min, stands_any)

    def __len__(self) -> int:
        return len(self.cas)

    def find(self, vbucket: np.ndarray, key: pa.Array, cas: np.ndarray) -> np.ndarray:
        """The row of each (vbucket, key, CAS), ``-1`` where no version is it."""
        vbucket = np.asarray(vbucket, np.int64)
        cas = np.asarray(cas, np.uint64)
        out = np.full(len(cas), -1, np.int64)
        if not len(self) or not len(cas):
            return out
        lo = np.searchsorted(self.cas, cas, "left")     # self.cas is sorted (``of``)
        hi = np.searchsorted(self.cas, cas, "right")
        one = np.flatnonzero(hi - lo == 1)
        if len(one):
            row = lo[one]
            same = (self.vbucket[row] == vbucket[one]) & pc.fill_null(pc.equal(
                self.key.take(pa.array(row)), key.take(pa.array(one))), False).to_numpy(
                zero_copy_only=False)
            out[one[same]] = row[same]
        many = np.flatnonzero(hi - lo > 1)
        if len(many):
            keys = key.take(pa.array(many)).to_pylist()
            for i, k in zip(many.tolist(), keys, strict=True):
                for at in range(int(lo[i]), int(hi[i])):
                    if self.vbucket[at] == vbucket[i] and k is not None and \
                            self.key[at].as_py() == k:
                        out[i] = at
                        break
        return out


def _by_key(run: np.ndarray, same: np.ndarray, keys: pa.Array) -> np.ndarray:
    """Each row's identity: its ``run`` (rows of one CAS and vbucket, in order) and, in a
    run of several rows, its key; numbered in the rows' order of runs."""
    shared = np.flatnonzero(same | np.r_[same[1:], False])     # rows of runs of several
    sub = np.zeros(len(run), np.int64)
    texts = keys.take(pa.array(shared)).to_pylist()
    seen: dict = {}
    last = -1
    for i, k in zip(shared.tolist(), texts, strict=True):
        if run[i] != last:
            seen, last = {}, int(run[i])
        sub[i] = seen.setdefault(k, len(seen))
    return run * (int(sub.max()) + 1) + sub
