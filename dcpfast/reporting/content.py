"""The documents a report saw: value sizes, datatypes, changes per collection (with the
names the system events gave) and the keys with the most versions.

Counts are exact. The keys are counted with a bounded table: it holds the ``KEEP`` most
changed keys and, once it has had to drop some, ``floor``, the most versions a dropped key
had. A key's count is then a lower bound, short by at most ``floor`` (exact while
``floor`` is 0: no key was ever dropped).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import protocol as P
from ..arrays import unique as distinct
from ..arrow import binary, positions
from ..batch import FrameBatch, view_of
from ..events import Manifest

#: The document changes by column of ``Content.collections``.
CHANGES = (P.Opcode.MUTATION, P.Opcode.DELETION, P.Opcode.EXPIRATION, P.Opcode.PREPARE,
           P.Opcode.COMMIT, P.Opcode.ABORT)
#: The changes with a value, by row of ``Content.sizes``.
VALUED = CHANGES[:4]
#: The changes that make a new version of their document (counted per key).
VERSIONS = (P.Opcode.MUTATION, P.Opcode.DELETION, P.Opcode.EXPIRATION, P.Opcode.COMMIT)
#: Value size bins: 0 holds empty values, bin k values of 2**(k-1) to 2**k - 1 bytes.
SIZE_BINS = 34
#: The keys the key table keeps.
KEEP = 4096
#: A batch with fewer keys to count keeps them as bytes until more come.
_FEW = 64
_CHANGE_INDEX = np.full(256, -1, np.int64)
_CHANGE_INDEX[list(CHANGES)] = np.arange(len(CHANGES))
_IS_VERSION = np.zeros(256, bool)
_IS_VERSION[list(VERSIONS)] = True


class Content:
    """The documents of a report, batch by batch (``update``) and merged (``merge``)."""

    def __init__(self) -> None:
        #: Values by change (rows: ``VALUED``) and size bin (``SIZE_BINS``).
        self.sizes = np.zeros((len(VALUED), SIZE_BINS), np.int64)
        #: Changes with a value by datatype (JSON 1, Snappy 2, xattrs 4 combined).
        self.datatypes = np.zeros(8, np.int64)
        #: collection id -> changes by ``CHANGES``, then their value bytes.
        self.collections: dict[int, np.ndarray] = {}
        #: collection id -> "scope.collection", from the system events seen.
        self.names: dict[int, str] = {}
        self.keys: pa.Table | None = None
        self._waiting: list[pa.Table] = []     # key counts of batches, not yet added
        self._few: list[tuple[int, bytes]] = []    # keys of small batches, not yet added
        self._rows = 0
        #: The most versions a key dropped from the key table had (0: counts exact).
        self.floor = 0

    def update(self, batch: FrameBatch, rows: np.ndarray, manifest: Manifest) -> None:
        """Count the document changes at ``rows`` of ``batch``; ``manifest`` (the
        connection's, updated with this batch) names their collections."""
        if not len(rows):
            return
        op = batch["opcode"][rows]
        change = _CHANGE_INDEX[op]
        valued = change < 4
        sizes = batch["value_len"][rows]
        bins = np.frexp(sizes[valued].astype(np.float64))[1]
        np.add.at(self.sizes, (change[valued], bins), 1)
        self.datatypes += np.bincount(batch["datatype"][rows][valued] & 7, minlength=8)
        cids = batch["collection_id"][rows].astype(np.int64) if batch.collections \
            else np.zeros(len(rows), np.int64)
        pairs, counts = np.unique(cids << 4 | change, return_counts=True)
        for pair, n in zip(pairs.tolist(), counts.tolist()):
            self._collection(pair >> 4)[pair & 0xF] += n
        where, size = distinct(cids[valued], inverse=True)
        for cid, total in zip(where.tolist(),
                              np.bincount(size, sizes[valued], len(where)).tolist()):
            self._collection(cid)[-1] += int(total)
        for cid in distinct(cids).tolist():
            name = manifest.collections.get(cid)
            if name is not None:
                scope = manifest.scopes.get(manifest.collection_scopes.get(cid, -1))
                self.names.setdefault(cid, f"{scope}.{name}" if scope else name)
        self._count_keys(batch, rows[_IS_VERSION[op]], cids[_IS_VERSION[op]])

    def _collection(self, cid: int) -> np.ndarray:
        found = self.collections.get(cid)
        if found is None:
            found = self.collections[cid] = np.zeros(len(CHANGES) + 1, np.int64)
        return found

    def _count_keys(self, batch: FrameBatch, rows: np.ndarray, cids: np.ndarray) -> None:
        if not len(rows):
            return
        if len(rows) < _FEW:                  # a few keys wait as bytes (a table is costly)
            view, base = view_of(batch), batch.base_offset
            for cid, at, n in zip(cids.tolist(), batch["key_offset"][rows].tolist(),
                                  batch["key_len"][rows].tolist()):
                self._few.append((cid, bytes(view[at - base:at - base + n])))
        else:
            keys = binary(view_of(batch), positions(batch["key_offset"][rows],
                                                    batch.base_offset),
                          batch["key_len"][rows], [None])
            self._waiting.append(pa.table({
                "collection_id": pa.array(cids, pa.int64()), "key": keys,
                "versions": pa.array(np.ones(len(rows), np.int64))}))
        self._rows += len(rows)
        if self._rows >= KEEP:
            self._flush()

    def _flush(self) -> None:
        """Add the key counts waiting (small batches are counted together)."""
        if self._few:
            cids, keys = zip(*self._few)
            self._waiting.append(pa.table({
                "collection_id": pa.array(cids, pa.int64()), "key": pa.array(keys, pa.binary()),
                "versions": pa.array(np.ones(len(keys), np.int64))}))
            self._few = []
        if self._waiting:
            waiting, self._waiting, self._rows = self._waiting, [], 0
            self._add_keys(pa.concat_tables(waiting))

    def _add_keys(self, found: pa.Table) -> None:
        if self.keys is not None:
            found = pa.concat_tables([self.keys, found])
        found = found.group_by(["collection_id", "key"], use_threads=False) \
            .aggregate([("versions", "sum")]).rename_columns(["collection_id", "key",
                                                               "versions"])
        if found.num_rows > 2 * KEEP:
            found = self._pruned(found)
        self.keys = found

    def _pruned(self, found: pa.Table) -> pa.Table:
        """The ``KEEP`` keys with the most versions (of those with as many as the last
        kept, the first in the table); ``floor`` learns the most a dropped key had."""
        counts = found["versions"].to_numpy()
        cut = int(np.partition(counts, len(counts) - KEEP)[len(counts) - KEEP])
        above = np.flatnonzero(counts > cut)
        level = np.flatnonzero(counts == cut)[:KEEP - len(above)]
        keep = np.sort(np.concatenate([above, level]))
        dropped = np.ones(len(counts), bool)
        dropped[keep] = False
        self.floor = max(self.floor, int(counts[dropped].max()))
        return found.take(keep)

    def __getstate__(self) -> dict:
        self._flush()
        return self.__dict__

    def merge(self, other: Content) -> None:
        """Add ``other``'s counts."""
        self.sizes += other.sizes
        self.datatypes += other.datatypes
        for cid, counts in other.collections.items():
            self._collection(cid)[:] += counts
        for cid, name in other.names.items():
            self.names.setdefault(cid, name)
        self.floor = max(self.floor, other.floor)
        self._flush()
        other._flush()
        if other.keys is not None:
            self._add_keys(other.keys)

    def top_keys(self, n: int) -> list[tuple[int, bytes, int]]:
        """The ``n`` keys with the most versions: ``(collection id, key, versions)``,
        most first (ties by collection, then key)."""
        self._flush()
        if self.keys is None:
            return []
        top = self.keys.sort_by([("versions", "descending"), ("collection_id", "ascending"),
                                 ("key", "ascending")]).slice(0, n)
        return list(zip(top["collection_id"].to_pylist(), top["key"].to_pylist(),
                        top["versions"].to_pylist()))
