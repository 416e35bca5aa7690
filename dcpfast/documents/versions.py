"""Document versions as columns (``Versions``), and the two stores the engine keeps them in:
``Latest`` (one version per document, for the state) and ``History`` (every version).
``Lost`` names the documents whose earlier version ``Latest`` let go where a restart
needed it back; ``standing`` picks the current version of each document from a history.
A document is its id in the engine's ``KeyIndex`` (``doc``), which keeps its key.

A version's ``gone`` says whether it still stands: ``ALIVE``, ``DISCARDED`` (a restart
threw it away, or, in ``Latest``, a collection clear removed it), or the seqno of the
collection clear that ended it (``History``: a restart below that seqno revives it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .. import _core, buffers
from .._core.contract import W_DELETION, W_EXPIRATION
from ..arrays import unique as distinct
from . import bodies
from .rows import Rows
from .segments import U64_MAX, Barriers, dense

ALIVE = U64_MAX
DISCARDED = np.uint64(0)
#: The numpy columns of ``Versions`` and their dtypes.
NUMERIC = {"gpos": np.int64, "doc": np.int64, "unit": np.uint32, "cid": np.uint32,
           "seqno": np.uint64,
           "rev": np.uint64, "cas": np.uint64, "flags": np.uint32, "expiration": np.uint32,
           "datatype": np.uint8, "delete_time": np.uint32, "timed_delete": bool,
           "deleted": bool, "what": np.uint8, "gone": np.uint64}
#: ``Latest`` merges its runs when they hold more than twice the versions (or the bytes)
#: of its last merge, or of these floors.
MERGE_FLOOR = 1 << 12
MERGE_FLOOR_BYTES = 16 << 20


@dataclass
class Versions:
    """Versions of documents: the numpy columns of ``NUMERIC``, and with values the
    ``vref`` of each (``bodies``) and the chunks ``values`` it refers to (None without
    values)."""

    columns: dict
    values: bodies.Chunks | None = None

    def __len__(self):
        return len(self.columns["doc"])

    def __getitem__(self, name):
        return self.columns[name]

    def __setitem__(self, name, value):
        self.columns[name] = value

    @property
    def nbytes(self) -> int:
        """The bytes of the columns and of the value chunks referred to."""
        return sum(c.nbytes for c in self.columns.values()) + bodies.nbytes(self.values)

    def owned(self) -> Versions:
        """The same versions with their values copied into a chunk of their own (that
        holds nothing else)."""
        if self.values is None:
            return self
        values, vref = bodies.owned(self.values, self.columns["vref"])
        return Versions({**self.columns, "vref": vref}, values)

    def compacted(self) -> Versions:
        """The same versions, their values copied down where the chunks they refer to
        hold far more (``bodies.compacted``)."""
        if self.values is None:
            return self
        values, vref = bodies.compacted(self.values, self.columns["vref"])
        if values is self.values:
            return self
        return Versions({**self.columns, "vref": vref}, values)

    def spilled(self, into: bodies.SpillFile, done: dict[int, bodies.Chunk]) -> Versions:
        """The same versions, their values' bodies written to ``into`` and kept as their
        places there (``bodies.spilled``; ``done`` as there)."""
        if self.values is None:
            return self
        return Versions(self.columns, bodies.spilled(self.values, into, done))

    def take(self, index: np.ndarray, numeric=None) -> Versions:
        """The versions at ``index`` (their values still where they are); of the numeric
        columns only ``numeric`` (None: all; ``vref`` comes along with values)."""
        names = list(self.columns) if numeric is None else [*numeric, *(
            ("vref",) if self.values is not None else ())]
        return Versions(buffers.pooled_take(self.columns, names, index), self.values)


def concat(parts: list[Versions], index: list[np.ndarray] | None = None) -> Versions:
    """The versions of ``parts`` (at least one), in order; with ``index``, those at
    ``index[k]`` of each part ``parts[k]``, each column taken once into its place. No value
    is copied."""
    values = bodies.union([p.values for p in parts])
    names = [*NUMERIC, *(("vref",) if values is not None else ())]
    size = sum(len(p) for p in (parts if index is None else index))
    for part, at in zip(parts, index or ()):
        if len(at) and not 0 <= int(at.min()) <= int(at.max()) < len(part):
            raise IndexError(f"an index outside the {len(part)} versions")
    out = {}
    for name in names:
        dtype = parts[0][name].dtype
        column = np.empty(size, dtype) if size * dtype.itemsize < buffers.POOLED_FROM \
            else buffers.pooled(size * dtype.itemsize).view(dtype)
        if index is None:
            np.concatenate([p[name] for p in parts], out=column)
        else:
            start = 0
            for part, at in zip(parts, index):
                # checked above: "wrap" takes straight into ``out`` ("raise" buffers it)
                np.take(part[name], at, out=column[start:start + len(at)], mode="wrap")
                start += len(at)
        out[name] = column
    return Versions(out, values)


#: The columns of ``Versions`` taken from rows, and the rows' columns they come from.
_FROM_ROWS = {"gpos": "pos", "unit": "unit", "cid": "cid", "seqno": "seqno", "rev": "rev",
              "cas": "cas", "flags": "flags", "expiration": "expiration",
              "datatype": "datatype", "delete_time": "delete_time",
              "timed_delete": "timed_delete", "deleted": "deleted", "what": "what"}


def from_rows(rows: Rows, index: np.ndarray, doc: np.ndarray) -> Versions:
    """The document-change rows at ``index`` (of documents ``doc``) as versions (alive);
    their values are referred to where they are (``bodies``)."""
    index = np.asarray(index)
    taken = rows.gathers([*_FROM_ROWS.values(), *(("value_at",) if rows.chunk else ())],
                         index)
    out: dict = {name: taken[source] for name, source in _FROM_ROWS.items()}
    out.update(doc=doc, gone=np.full(len(index), ALIVE, np.uint64))
    if rows.chunk is None:
        return Versions(out)
    chunk, chunks = rows.chunk
    out["vref"] = bodies.refs(chunk, taken["value_at"])
    return Versions(out, chunks)


def newest(group: np.ndarray, order_key: np.ndarray) -> np.ndarray:
    """Index of the element with the highest ``order_key`` in each group (of dense ids;
    the last such element where several share it), ascending."""
    if not len(group):
        return np.zeros(0, np.int64)
    best = _core.state.newest(np.ascontiguousarray(group, np.int64),
                              np.ascontiguousarray(order_key, np.int64), int(group.max()) + 1)
    keep = np.zeros(len(group), bool)
    keep[best[best >= 0]] = True
    return np.flatnonzero(keep)


class Latest:
    """The newest version of every document, in runs merged when they grow (each run holds
    what one stretch added; a merge keeps the newest version of each document and drops
    what no longer stands), so that it holds about twice the documents at most.
    Tombstones are dropped unless ``include_deleted``; a restart that discards one would
    bring back the version it deleted, so each stream remembers the highest seqno of a
    tombstone it dropped (``dropped``), and a restart below it makes the stream ``lost``."""

    def __init__(self, include_deleted: bool):
        self.include_deleted = include_deleted
        self.runs: list[Versions] = []
        self.merged = self.merged_bytes = 0       # versions and bytes after the last merge
        self.held = self.held_bytes = 0           # versions and bytes in the runs
        self.lost = Lost()
        #: per document id, the place among the runs' versions of its newest one (-1: none)
        self.owner = np.zeros(0, np.int64)
        #: per stream, the highest seqno of a tombstone a merge dropped
        self.dropped: dict[int, int] = {}
        #: the collection clears that stand: (unit, cid, seqno)
        self.clears = (np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.uint64))

    def kill(self, barriers: Barriers) -> None:
        """What the stretch's restarts and clears remove from the versions held. A version
        a restart discards, and a clear a restart undoes, may have hidden an earlier
        version that now stands again: those documents join ``lost``."""
        for run in self.runs:
            zero = np.zeros(len(run), np.int64)
            out = barriers.discarded(run["unit"], run["seqno"], zero)
            self.lost.add(run, out & (run["gone"] == ALIVE))
            out |= barriers.cleared(run["unit"], run["cid"], zero, zero + barriers.stride - 1)
            run["gone"][out] = DISCARDED
        self.lost.add_streams(self.dropped_above(barriers.restart_min))
        unit, cid, seqno = self.clears
        undone = barriers.discarded(unit, seqno, np.zeros(len(unit), np.int64))
        self.lost.add_collections(unit[undone], cid[undone])
        kept = barriers.c_kept
        cids = (barriers.c_keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        self.lost.add_collections(barriers.c_unit[~kept], cids[~kept])
        self.clears = (np.concatenate([unit[~undone], barriers.c_unit[kept]]),
                       np.concatenate([cid[~undone], cids[kept]]),
                       np.concatenate([seqno[~undone], barriers.c_seqno[kept]]))

    def dropped_above(self, lowest) -> list[int]:
        """The streams whose dropped tombstones reach above ``lowest(units, zeros)``, an
        array of seqnos per stream (a restart's point, a time cut)."""
        if not self.dropped:
            return []
        units = np.array(list(self.dropped), np.uint32)
        tops = np.array(list(self.dropped.values()), np.uint64)
        return units[lowest(units, np.zeros(len(units), np.int64)) < tops].tolist()

    @staticmethod
    def select(group: np.ndarray, rel: np.ndarray) -> np.ndarray:
        """Which of a stretch's versions (of ``group``, at ``rel``) to keep: the newest of
        each document."""
        return newest(group, rel)

    def add(self, versions: Versions, rel: np.ndarray, barriers: Barriers) -> None:
        """Add a stretch's versions (at ``rel``, one per document)."""
        if not len(versions):
            return
        if not barriers.empty:
            out = barriers.discarded(versions["unit"], versions["seqno"], rel)
            self.lost.add(versions, out)
            out |= barriers.cleared(versions["unit"], versions["cid"], rel,
                                    np.full(len(rel), barriers.stride - 1))
            versions["gone"][out] = DISCARDED
        versions = versions.compacted()         # a few of a stretch's values: copied
        if not self.runs and barriers.empty:
            # one stretch's versions: one per document, all standing, as a merge leaves
            self.merged, self.merged_bytes = len(versions), versions.nbytes
        doc = versions["doc"]
        if int(doc.max()) >= len(self.owner):
            grown = np.full(max(2 * len(self.owner), int(doc.max()) + 1), -1, np.int64)
            grown[:len(self.owner)] = self.owner
            self.owner = grown
        # a stretch comes after the runs: its version of a document is the newest
        self.owner[doc] = np.arange(self.held, self.held + len(versions))
        self.runs.append(versions)
        self.held += len(versions)
        self.held_bytes += versions.nbytes
        if self.held > 2 * max(self.merged, MERGE_FLOOR) or \
                self.held_bytes > 2 * max(self.merged_bytes, MERGE_FLOOR_BYTES):
            self.merge()

    def merge(self) -> None:
        """The newest version of each document, where it still stands; each run keeps
        its part (no run is copied whole)."""
        if not self.runs or (len(self.runs) == 1 and self.merged == len(self.runs[0])
                             and (self.runs[0]["gone"] == ALIVE).all()):
            return
        parts = [run.take(keep).compacted()
                 for run, keep in zip(self.runs, self._standing())]
        self.runs = [part for part in parts if len(part)]
        self.owner[:] = -1
        start = 0
        for run in self.runs:
            self.owner[run["doc"]] = np.arange(start, start + len(run))
            start += len(run)
        self.merged, self.merged_bytes = start, sum(p.nbytes for p in self.runs)
        self.held, self.held_bytes = self.merged, self.merged_bytes

    def _standing(self) -> list[np.ndarray]:
        """Per run, the index of its versions that stand: each document's newest
        (``owner``), where it stands and, unless ``include_deleted``, is no tombstone;
        each stream remembers the highest seqno of a tombstone let go."""
        out = []
        start = 0
        for run in self.runs:
            mine = np.arange(start, start + len(run))
            start += len(run)
            keep = np.flatnonzero((self.owner.take(run["doc"]) == mine)
                                  & (run["gone"] == ALIVE))
            if not self.include_deleted:
                tomb = tombstones(run)[keep]
                if tomb.any():
                    units, seqnos = run["unit"][keep[tomb]], run["seqno"][keep[tomb]]
                    for u in distinct(units).tolist():
                        top = int(seqnos[units == u].max())
                        self.dropped[u] = max(top, self.dropped.get(u, 0))
                    keep = keep[~tomb]
            out.append(keep)
        return out

    def result(self) -> Versions | None:
        """The versions that stand, handed over: the store is empty after."""
        if not self.runs:
            return None
        runs, keep = self.runs, self._standing()
        self.runs, self.owner = [], np.zeros(0, np.int64)
        self.held = self.held_bytes = self.merged = self.merged_bytes = 0
        return concat(runs, keep)


class Futures:
    """What the whole stream will do, known from a first pass over it: each stream's
    restarts (their positions and points) and its time cut (the seqno from which its
    changes are past ``at_time``). From it, a version that will stand at the end (no
    later restart discards it, the cut keeps it) is known when it comes."""

    def __init__(self, restarts: tuple, cuts: dict[int, int]):
        unit, pos, point = restarts
        self.cuts = cuts
        self.by_unit: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        order = np.lexsort((pos, unit))
        unit, pos, point = unit[order], pos[order], point[order]
        for u in distinct(unit).tolist():
            mine = unit == u
            points = point[mine]
            # the lowest point of the restarts from each one on
            suffix = np.minimum.accumulate(points[::-1])[::-1]
            self.by_unit[u] = (pos[mine], np.append(suffix, U64_MAX).astype(np.uint64))

    def final(self, versions: Versions) -> np.ndarray:
        """Which versions will stand at the end of the stream (unless a later version of
        their document replaces them): below their stream's time cut, and above no
        later restart's point."""
        out = np.ones(len(versions), bool)
        unit, gpos, seqno = versions["unit"], versions["gpos"], versions["seqno"]
        for u in distinct(unit).tolist():
            mine = np.flatnonzero(unit == u)
            cut = self.cuts.get(u, int(U64_MAX))
            ok = seqno[mine] < np.uint64(cut)
            if u in self.by_unit:
                pos, suffix = self.by_unit[u]
                lowest = suffix[np.searchsorted(pos, gpos[mine], side="right")]
                ok &= lowest >= seqno[mine]
            out[mine] = ok
        return out


class Store(Protocol):
    """Where the engine keeps the versions it reads: ``Latest``, ``History``, or a store of
    its own (``dcpfast.changes`` keeps every version sent)."""

    def kill(self, barriers: Barriers) -> None:
        """Apply the restarts and clears of a stretch to the versions held."""

    def select(self, group: np.ndarray, rel: np.ndarray) -> np.ndarray:
        """Which of a stretch's changes (of documents ``group``) are worth a version."""

    def add(self, versions: Versions, rel: np.ndarray, barriers: Barriers) -> None:
        """Take a stretch's versions."""

    def result(self) -> Versions | None:
        """The versions held, handed over."""


class History:
    """Every version of every document that a restart has not discarded; with
    ``futures``, only those that may still stand at the end: a version that a later
    version of its document replaces for good (``Futures.final``) is let go as the store
    grows, so that it holds about twice what may stand (the second pass of a one-version
    state, ``build``)."""

    def __init__(self, futures: Futures | None = None):
        self.runs: list[Versions] = []
        self.futures = futures
        self.held = self.compacted = 0

    def kill(self, barriers: Barriers) -> None:
        for i, run in enumerate(self.runs):
            zero = np.zeros(len(run), np.int64)
            gone = run["gone"]
            ended = (gone != ALIVE) & (gone != DISCARDED)
            revived = ended & (barriers.restart_min(run["unit"], zero) < gone)
            gone[revived] = ALIVE
            np.minimum(gone, barriers.gone_after(run["unit"], run["cid"], zero), out=gone)
            out = barriers.discarded(run["unit"], run["seqno"], zero)
            if out.any():
                self.runs[i] = run.take(np.flatnonzero(~out)).compacted()

    @staticmethod
    def select(group: np.ndarray, rel: np.ndarray) -> np.ndarray:
        """Every version of a stretch."""
        return np.arange(len(group))

    def add(self, versions: Versions, rel: np.ndarray, barriers: Barriers) -> None:
        if not len(versions):
            return
        if not barriers.empty:
            out = barriers.discarded(versions["unit"], versions["seqno"], rel)
            versions["gone"] = barriers.gone_after(versions["unit"], versions["cid"], rel)
            versions = versions.take(np.flatnonzero(~out)).compacted()
        self.runs.append(versions)
        self.held += len(versions)
        if self.futures is not None and self.held > 2 * max(self.compacted, MERGE_FLOOR):
            self.compact()

    def compact(self) -> None:
        """Let go of the versions that a later, final version of their document
        replaces; each run keeps its part."""
        assert self.futures is not None
        every = concat(self.runs)
        order = np.lexsort((every["gpos"], every["doc"]))
        final = self.futures.final(every)[order]
        doc = every["doc"][order]
        # per document, whether a final version comes after each one
        last = np.ones(len(order), bool)
        last[:-1] = doc[1:] != doc[:-1]
        later = np.zeros(len(order), bool)
        later[:-1] = final[1:] & ~last[:-1]
        groups = np.cumsum(last[::-1])[::-1]            # a group id, counted from the end
        later = _any_after(later, groups)
        keep = np.sort(order[~later])
        bounds = np.cumsum([0, *map(len, self.runs)])
        parts = [run.take(keep[(keep >= lo) & (keep < hi)] - lo).compacted()
                 for run, lo, hi in zip(self.runs, bounds[:-1], bounds[1:])]
        self.runs = [part for part in parts if len(part)]
        self.held = self.compacted = len(keep)

    def result(self) -> Versions | None:
        """The versions held, handed over: the store is empty after."""
        runs, self.runs = self.runs, []
        self.held = 0
        return concat(runs) if runs else None


def _any_after(flags: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per element, whether it or an element after it in its group (consecutive equal
    ``groups``) is flagged."""
    if not len(flags):
        return flags
    reverse = flags[::-1].astype(np.int64)
    starts = np.ones(len(flags), bool)
    starts[1:] = groups[::-1][1:] != groups[::-1][:-1]
    total = np.cumsum(reverse)
    base = np.maximum.accumulate(np.where(starts, total - reverse, 0))
    return (total - base > 0)[::-1]


def tombstones(versions: Versions) -> np.ndarray:
    """Which versions are deletions or expirations (or a committed prepared deletion)."""
    what = versions["what"]
    return (what == W_DELETION) | (what == W_EXPIRATION) | versions["deleted"]


def standing(versions: Versions, *, include_deleted: bool) -> np.ndarray:
    """Index (ascending) of each document's current version among ``versions``: its
    newest in stream order, where that one still stands (and is not a tombstone, unless
    ``include_deleted``)."""
    keep = newest(versions["doc"], versions["gpos"])
    keep = keep[versions["gone"][keep] == ALIVE]
    if not include_deleted:
        keep = keep[~tombstones(versions)[keep]]
    return keep


class Lost:
    """Documents whose version at some restart point a ``Latest`` store may have let go
    (a restart discarded the version that hid it), collections of a stream whose clear a
    restart undid, and streams a restart took below a tombstone already dropped: what a
    second, exact pass must work out again."""

    def __init__(self):
        self.docs: list[np.ndarray] = []          # ids of documents
        self.units = np.zeros(0, np.uint32)       # their streams
        self.collections: set[tuple[int, int]] = set()   # (unit, cid)
        self.streams: set[int] = set()            # every document of these streams

    def __bool__(self) -> bool:
        return bool(self.docs or self.collections or self.streams)

    def add(self, versions: Versions, mask: np.ndarray) -> None:
        """The documents of ``versions`` where ``mask``."""
        at = np.flatnonzero(mask)
        if not len(at):
            return
        self.docs.append(versions["doc"][at])
        self.units = distinct(np.concatenate([self.units, versions["unit"][at]]))
        if len(self.docs) > 64:                   # each document once
            self.docs = [distinct(np.concatenate(self.docs))]

    def add_collections(self, unit: np.ndarray, cid: np.ndarray) -> None:
        self.collections.update(zip(unit.tolist(), cid.tolist()))

    def add_streams(self, units: list[int]) -> None:
        self.streams.update(units)

    def vbuckets(self) -> list[int]:
        """The vbuckets of the documents and collections named."""
        units = np.concatenate([self.units, np.array([u for u, _ in self.collections],
                                                     np.uint32),
                                np.array(list(self.streams), np.uint32)])
        return distinct(units >> np.uint32(16)).tolist()

    def matches(self, unit: np.ndarray, cid: np.ndarray, doc: np.ndarray) -> np.ndarray:
        """Which documents (``unit``, ``cid``, ``doc``) are named."""
        out = np.zeros(len(unit), bool)
        if not len(unit):
            return out
        if self.docs:
            if len(self.docs) > 1:
                self.docs = [distinct(np.concatenate(self.docs))]
            out |= np.isin(doc, self.docs[0])
        if self.collections:
            pairs = unit.astype(np.uint64) << np.uint64(32) | cid.astype(np.uint64)
            named = np.array(sorted(u << 32 | c for u, c in self.collections), np.uint64)
            out |= dense(pairs, named)[1]
        if self.streams:
            out |= np.isin(unit, np.array(list(self.streams), np.uint32))
        return out
