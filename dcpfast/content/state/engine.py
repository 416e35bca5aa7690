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

from ...errors import text
from .rows import ABORT, COMMIT, DELETION, DOCUMENTS, EXPIRATION, MUTATION, PREPARE, Rows
from .segments import Barriers
from .versions import History, Latest, Versions, concat, from_rows, group_ids
from .walk import Carry, walk

_EMPTY = (np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.uint64))


class Engine:
    """Documents rebuilt from a stream's rows.

    ``limit`` maps an array of vbucket ids to their at_seqno limits (uint64), ``at_time``
    is nanoseconds since the epoch or None; ``history`` keeps every version.
    """

    def __init__(self, *, limit: Callable, at_time: int | None, history: bool,
                 include_deleted: bool):
        self.limit, self.at_time, self.history = limit, at_time, history
        self.store: Latest | History = History() if history else Latest(include_deleted)
        self.carries: dict[int, Carry] = {}
        self.pending: Versions | None = None      # prepares awaiting their commit or abort
        self.problems: list[tuple[int, int, str]] = []

    def update(self, rows: Rows) -> None:
        """Take the next stretch of the stream (rows in stream order)."""
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
        versions, rel = self._changes(rows, docs, barriers)
        self.store.add(versions, rel, barriers)

    def _problem(self, rows: Rows, i: int, reason: str) -> None:
        self.problems.append((int(rows.offset[i]), int(rows.length[i]), reason))

    def _changes(self, rows: Rows, docs: np.ndarray, barriers: Barriers):
        """The versions of the stretch's changes (mutations, deletions, expirations and
        commits), with their ``rel``; the pending prepares move on."""
        changes = from_rows(rows, docs)
        rel = docs.astype(np.int64) + 2
        held = self.pending if self.pending is not None else from_rows(rows, docs[:0])
        every = concat([held, changes])
        every_rel = np.concatenate([np.zeros(len(held), np.int64), rel])
        prepared = np.concatenate([np.zeros(len(held), np.uint64), rows.prepared[docs]])
        what = every["what"]
        track = np.flatnonzero((what == PREPARE) | (what == COMMIT) | (what == ABORT))
        tracked = every.take(track)
        group = group_ids(tracked["unit"], tracked["cid"], tracked["key"])
        by_group = np.lexsort((every_rel[track], group))
        order, group = track[by_group], group[by_group]
        commits = np.flatnonzero(what[order] == COMMIT)
        c = order[commits]
        p = order[np.maximum(commits - 1, 0)]             # what came before, in its group
        ok = (commits > 0) & (group[np.maximum(commits - 1, 0)] == group[commits])
        ok &= (what[p] == PREPARE) & (prepared[c] == every["seqno"][p])
        ok &= ~barriers.cleared(every["unit"][p], every["cid"][p], every_rel[p], every_rel[c])
        ok &= ~barriers.discarded(every["unit"][p], every["seqno"][p], every_rel[p],
                                  every_rel[c])
        for j in c[~ok].tolist():
            i = docs[j - len(held)]
            self._problem(rows, i, text("state_no_prepare", prepared=int(prepared[j]),
                                        vbucket=int(rows.unit[i]) >> 16))
        committed = every.take(p[ok])
        for name in ("gpos", "seqno", "what"):
            committed[name] = every[name][c[ok]]
        last = np.ones(len(order), bool)
        last[:-1] = group[:-1] != group[1:]
        waiting = order[last & (what[order] == PREPARE)]
        span = np.full(len(waiting), barriers.span - 1)
        waiting = waiting[~barriers.discarded(every["unit"][waiting], every["seqno"][waiting],
                                              every_rel[waiting])
                          & ~barriers.cleared(every["unit"][waiting], every["cid"][waiting],
                                              every_rel[waiting], span)]
        self.pending = every.take(np.sort(waiting))
        plain = np.flatnonzero((what == MUTATION) | (what == DELETION) | (what == EXPIRATION))
        return concat([every.take(plain), committed]), \
            np.concatenate([every_rel[plain], every_rel[c[ok]]])

    def finish(self) -> tuple[Versions | None, dict[int, int]]:
        """The versions that stand (past ``at_time`` cut where the stream's clock passed it),
        and each stream's consistent seqno."""
        versions = self.store.result()
        if versions is not None and self.at_time is not None:
            cuts = {u: c.cut for u, c in self.carries.items()}
            units = np.array(sorted(cuts), np.uint32)
            limits = np.array([cuts[u] for u in units.tolist()], np.uint64)
            at = np.searchsorted(units, versions["unit"])
            versions = versions.take(np.flatnonzero(versions["seqno"] < limits[at]))
        return versions, {u: c.consistent for u, c in self.carries.items()}
