"""The state engine: reads the rows of a stream stretch by stretch (``update``) and keeps
the documents' versions and the stretch-to-stretch state of every stream; ``finish`` gives
the versions that stand, and each stream's consistent seqno.

Per stream, in stream order: a mutation, deletion or expiration is a new version of its
document; a prepare waits until its commit makes it a version (at the commit's seqno) or
its abort drops it; a restart discards the versions above its point, a collection clear
the versions of its collection before it. What changes above ``at_seqno`` or past
``at_time`` is left out. Problems (a commit without its prepare, a seqno that goes
backwards) are collected as ``(offset, length, reason)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import text
from .rows import ABORT, COMMIT, DELETION, DOCUMENTS, EXPIRATION, MUTATION, PREPARE, Rows
from .segments import U64_MAX, Barriers
from .versions import History, Latest, Lost, Versions, concat, from_rows, group_ids
from .walk import Carry, walk


class Engine:
    """Documents rebuilt from a stream's rows.

    ``limit`` maps an array of vbucket ids to their at_seqno limits (uint64), ``at_time``
    is nanoseconds since the epoch or None; ``history`` keeps every version, else
    ``include_deleted`` keeps the tombstones. ``only``
    (a ``Lost``) restricts the documents to those it names, every stream still walked.
    """

    def __init__(self, *, limit: Callable, at_time: int | None, history: bool,
                 include_deleted: bool = False, only: Lost | None = None):
        self.limit, self.at_time, self.history, self.only = limit, at_time, history, only
        self.store: Latest | History = History() if history else Latest(include_deleted)
        self.carries: dict[int, Carry] = {}
        self.pending: Versions | None = None      # prepares awaiting their commit or abort
        self.problems: list[tuple[int, int, str]] = []

    def update(self, rows: Rows) -> None:
        """Take the next stretch of the stream (rows in stream order)."""
        import pyarrow as pa

        if not len(rows):
            return
        found = walk(rows, self.carries, self.limit, self.at_time)
        for i in np.flatnonzero(found.bad).tolist():
            self._problem(rows, i, text("state_seqno_backwards", seqno=int(rows.seqno[i]),
                                        vbucket=int(rows.unit[i]) >> 16,
                                        previous=int(found.previous[i])))
        clears = np.flatnonzero(rows.clear & found.applies)
        barriers = Barriers(found.restarts, (rows.unit[clears], rows.cid[clears],
                                             clears + 2, rows.seqno[clears]), len(rows))
        if not barriers.empty:
            self.store.kill(barriers)
        docs = np.flatnonzero((rows.what < DOCUMENTS) & found.applies)
        if self.only is not None:
            keys = rows.key.take(pa.array(rows.documents(docs), pa.int64()))
            docs = docs[self.only.matches(rows.unit[docs], rows.cid[docs], keys)]
        versions, rel = self._changes(rows, docs, barriers)
        self.store.add(versions, rel, barriers)

    def _problem(self, rows: Rows, i: int, reason: str) -> None:
        self.problems.append((int(rows.offset[i]), int(rows.length[i]), reason))

    def _changes(self, rows: Rows, docs: np.ndarray, barriers: Barriers):
        """The versions of the stretch's changes (mutations, deletions, expirations and
        commits) that the store keeps, with their ``rel``; the pending prepares move on.

        Works on indices into the held prepares followed by the stretch's changes; only
        the versions and prepares kept are built (``_build``)."""
        import pyarrow as pa

        held = self.pending if self.pending is not None else from_rows(rows, docs[:0])
        h = len(held)
        cat = np.concatenate
        what = cat([held["what"], rows.what[docs]])
        unit, cid = cat([held["unit"], rows.unit[docs]]), cat([held["cid"], rows.cid[docs]])
        seqno = cat([held["seqno"], rows.seqno[docs]])
        rel = cat([np.zeros(h, np.int64), docs.astype(np.int64) + 2])
        prepared = cat([np.zeros(h, np.uint64), rows.prepared[docs]])
        keys = pa.concat_arrays([held["key"], rows.key.take(pa.array(rows.documents(docs)))])
        group = group_ids(unit, cid, keys)
        track = np.flatnonzero((what == PREPARE) | (what == COMMIT) | (what == ABORT))
        order = track[np.lexsort((rel[track], group[track]))]
        commits = np.flatnonzero(what[order] == COMMIT)
        before = np.maximum(commits - 1, 0)
        c, p = order[commits], order[before]            # a commit, what came before it
        ok = (commits > 0) & (group[order[before]] == group[c]) & (what[p] == PREPARE)
        ok &= prepared[c] == seqno[p]
        ok &= ~barriers.cleared(unit[p], cid[p], rel[p], rel[c])
        ok &= ~barriers.discarded(unit[p], seqno[p], rel[p], rel[c])
        for j in c[~ok].tolist():
            i = docs[j - h]
            self._problem(rows, i, text("state_no_prepare", prepared=int(prepared[j]),
                                        vbucket=int(rows.unit[i]) >> 16))
        last = np.ones(len(order), bool)
        last[:-1] = group[order][:-1] != group[order][1:]
        waiting = order[last & (what[order] == PREPARE)]
        waiting = waiting[~barriers.discarded(unit[waiting], seqno[waiting], rel[waiting])
                          & ~barriers.cleared(unit[waiting], cid[waiting], rel[waiting],
                                              np.full(len(waiting), barriers.span - 1))]
        self.pending = self._build(rows, docs, held, np.sort(waiting)).combined()
        plain = np.flatnonzero((what == MUTATION) | (what == DELETION) | (what == EXPIRATION))
        at = cat([plain, c[ok]])                          # where each version is
        source = cat([plain, p[ok]])                      # where its document comes from
        keep = self.store.select(group[at], rel[at])
        at, source = at[keep], source[keep]
        by_source = np.argsort(source, kind="stable")
        at, source = at[by_source], source[by_source]
        versions = self._build(rows, docs, held, source)
        for name, column in (("gpos", cat([held["gpos"], rows.pos[docs]])), ("seqno", seqno),
                             ("what", what)):
            versions[name] = column[at]
        return versions, rel[at]

    @staticmethod
    def _build(rows: Rows, docs: np.ndarray, held: Versions, index: np.ndarray) -> Versions:
        """The versions at ``index`` (ascending) among the held prepares then the rows
        ``docs``."""
        h = len(held)
        return concat([held.take(index[index < h]), from_rows(rows, docs[index[index >= h] - h])])

    @property
    def lost(self) -> Lost:
        """The documents whose state a restart or a time cut left unknown to a ``Latest``
        store (always empty for ``History``)."""
        return self.store.lost if isinstance(self.store, Latest) else Lost()

    def finish(self) -> tuple[Versions | None, dict[int, int]]:
        """The versions that stand (past ``at_time`` cut where the stream's clock passed it),
        and each stream's consistent seqno. A version the cut removes from a ``Latest``
        store may have hidden an earlier one: its document joins ``lost``."""
        versions = self.store.result()
        if self.at_time is None:
            return versions, {u: c.consistent for u, c in self.carries.items()}
        cuts = {u: c.cut for u, c in self.carries.items()}
        latest = self.store if isinstance(self.store, Latest) else None
        if latest is not None:
            latest.lost.add_streams(latest.dropped_above(lambda units, _: np.array(
                [cuts.get(u, int(U64_MAX)) for u in units.tolist()], np.uint64)))
        if versions is not None:
            units = np.array(sorted(cuts), np.uint32)
            limits = np.array([cuts[u] for u in units.tolist()], np.uint64)
            before = versions["seqno"] < limits[np.searchsorted(units, versions["unit"])]
            if latest is not None:
                latest.lost.add(versions, ~before)
            versions = versions.take(np.flatnonzero(before))
        return versions, {u: c.consistent for u, c in self.carries.items()}
