"""The state engine: reads the rows of a stream stretch by stretch (``update``) and keeps
the documents' versions and the stretch-to-stretch state of every stream; ``finish`` gives
the versions that stand, and each stream's consistent seqno.

Per stream, in stream order: a mutation, deletion or expiration is a new version of its
document; a prepare waits until its commit makes it a version (at the commit's seqno) or
its abort drops it; a restart discards the versions above its point, a collection clear
the versions of its collection before it. What changes above ``at_seqno`` or past
``at_time`` is left out. The stream checks find where frames were lost (the stream's
consistent seqno then stops). Problems (frames lost, a commit without its prepare, a
seqno that goes backwards) are collected as ``(offset, length, reason, kind, note)``: the
kind of ``problems.KINDS``, and what a strict error adds to the reason.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import _core
from ..errors import text
from ..streams.checks import details, expectation
from .rows import ABORT, COMMIT, DELETION, DOCUMENTS, EXPIRATION, MUTATION, PREPARE, Rows
from .segments import U64_MAX, Barriers
from .versions import History, Latest, Lost, Versions, concat, from_rows
from .walk import Streams, Walk


class Engine:
    """Documents rebuilt from a stream's rows.

    ``limit`` maps an array of vbucket ids to their at_seqno limits (uint64), ``at_time``
    is nanoseconds since the epoch or None; ``history`` keeps every version, else
    ``include_deleted`` keeps the tombstones. ``only`` (a ``Lost``) restricts the
    documents to those it names, every stream still walked. ``index`` (a
    ``KeyIndex``) gives each document its id; engines that read the same documents share
    one.
    """

    def __init__(self, *, limit: Callable, at_time: int | None, history: bool,
                 include_deleted: bool = False, only: Lost | None = None, index=None):
        self.limit, self.at_time, self.history, self.only = limit, at_time, history, only
        self.index = _core.state.KeyIndex() if index is None else index
        self.store: Latest | History = History() if history else Latest(include_deleted)
        self.streams = Streams()
        self.pending: Versions | None = None      # prepares awaiting their commit or abort
        self.problems: list[tuple[int, int, str, str, str]] = []

    def update(self, rows: Rows) -> None:
        """Take the next stretch of the stream (rows in stream order)."""
        if not len(rows):
            return
        found = self.streams.walk(rows, self.limit, self.at_time)
        self._report(rows, found)
        c = rows.columns
        clears = np.flatnonzero(c["clear"] & found.applies)
        barriers = Barriers(found.restarts, (c["unit"][clears], c["cid"][clears],
                                             clears + 2, c["seqno"][clears]), len(rows))
        if not barriers.empty:
            self.store.kill(barriers)
        docs = np.flatnonzero((c["what"] < DOCUMENTS) & found.applies)
        ids = self.index.ids(rows.keys if rows.keys is not None else b"", c["key_pos"][docs],
                             c["key_len"][docs], c["unit"][docs], c["cid"][docs])
        if self.only is not None:
            keep = self.only.matches(c["unit"][docs], c["cid"][docs], ids)
            docs, ids = docs[keep], ids[keep]
        versions, rel = self._changes(rows, docs, ids, barriers)
        self.store.add(versions, rel, barriers)

    def _report(self, rows: Rows, walk: Walk) -> None:
        """The problems of a stretch: where frames were lost (what the stream checks
        found), and items whose seqno goes backwards that they did not name."""
        c = rows.columns
        f = walk.found
        for i, rule, seqno, given, low, high in zip(*(col.tolist() for col in f)):
            expected, got = expectation(rule, seqno, given, low, high)
            what = details(rule, seqno, given, low, high, int(c["end_status"][i]))
            vbucket = int(c["unit"][i]) >> 16
            self._problem(rows, i, text("state_lost", vbucket=vbucket, details=what,
                                        expected=expected, found=got), "lost_frames",
                          text("state_keep_going", vbucket=vbucket))
        bad = np.flatnonzero(walk.bad)
        for i in bad[~np.isin(bad, f.at)].tolist():
            self._problem(rows, i, text("state_seqno_backwards", seqno=int(c["seqno"][i]),
                                        vbucket=int(c["unit"][i]) >> 16,
                                        previous=int(walk.previous[i])), "seqno_backwards")

    def _problem(self, rows: Rows, i: int, reason: str, kind: str, note: str = "") -> None:
        self.problems.append((int(rows.offset[i]), int(rows.length[i]), reason, kind, note))

    # long: one pass over a stretch's tracked changes, kept whole to read as one rule
    def _changes(self, rows: Rows, docs: np.ndarray, ids: np.ndarray, barriers: Barriers):
        """The versions of the stretch's changes (mutations, deletions, expirations and
        commits) that the store keeps, with their ``rel``; the pending prepares move on.

        Works on indices into the held prepares followed by the stretch's changes; only
        the versions and prepares kept are built (``_build``)."""
        c = rows.columns
        held = self.pending if self.pending is not None else from_rows(rows, docs[:0],
                                                                       ids[:0])
        h = len(held)
        cat = np.concatenate
        what = cat([held["what"], c["what"][docs]])
        unit, cid = cat([held["unit"], c["unit"][docs]]), cat([held["cid"], c["cid"][docs]])
        seqno = cat([held["seqno"], c["seqno"][docs]])
        rel = cat([np.zeros(h, np.int64), docs.astype(np.int64) + 2])
        group = cat([held["doc"], ids])
        tracked = (what == PREPARE) | (what == COMMIT) | (what == ABORT)
        track = np.flatnonzero(tracked)
        c_ok = np.zeros(0, np.int64)
        p_ok = np.zeros(0, np.int64)
        waiting = np.zeros(0, np.int64)
        if len(track):
            prepared = cat([np.zeros(h, np.uint64), c["prepared"][docs]])
            order = track[np.lexsort((rel[track], group[track]))]
            commits = np.flatnonzero(what[order] == COMMIT)
            before = np.maximum(commits - 1, 0)
            com, pre = order[commits], order[before]      # a commit, what came before it
            ok = (commits > 0) & (group[pre] == group[com]) & (what[pre] == PREPARE)
            ok &= prepared[com] == seqno[pre]
            ok &= ~barriers.cleared(unit[pre], cid[pre], rel[pre], rel[com])
            ok &= ~barriers.discarded(unit[pre], seqno[pre], rel[pre], rel[com])
            for j in com[~ok].tolist():
                i = docs[j - h]
                self._problem(rows, i, text("state_no_prepare", prepared=int(prepared[j]),
                                            vbucket=int(c["unit"][i]) >> 16),
                              "commit_without_prepare")
            c_ok, p_ok = com[ok], pre[ok]
            last = np.ones(len(order), bool)
            last[:-1] = group[order][:-1] != group[order][1:]
            waiting = order[last & (what[order] == PREPARE)]
            waiting = waiting[~barriers.discarded(unit[waiting], seqno[waiting],
                                                  rel[waiting])
                              & ~barriers.cleared(unit[waiting], cid[waiting], rel[waiting],
                                                  np.full(len(waiting), barriers.span - 1))]
        self.pending = self._build(rows, docs, ids, held, np.sort(waiting)).combined() \
            if len(waiting) else None
        plain = np.flatnonzero(~tracked) if len(track) else np.arange(len(what))
        at = cat([plain, c_ok])                           # where each version is
        source = cat([plain, p_ok])                       # where its document comes from
        keep = self.store.select(group[at], rel[at])
        at, source = at[keep], source[keep]
        if len(c_ok):
            by_source = np.argsort(source, kind="stable")
            at, source = at[by_source], source[by_source]
        versions = self._build(rows, docs, ids, held, source)
        if len(c_ok):
            for name, column in (("gpos", cat([held["gpos"], c["pos"][docs]])),
                                 ("seqno", seqno), ("what", what)):
                versions[name] = column[at]
        return versions, rel[at]

    @staticmethod
    def _build(rows: Rows, docs: np.ndarray, ids: np.ndarray, held: Versions,
               index: np.ndarray) -> Versions:
        """The versions at ``index`` (ascending) among the held prepares then the rows
        ``docs`` (of documents ``ids``)."""
        h = len(held)
        mine = index[index >= h] - h
        if not h:
            return from_rows(rows, docs[mine], ids[mine])
        return concat([held.take(index[index < h]), from_rows(rows, docs[mine], ids[mine])])

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
        consistent = self.streams.consistent()
        if self.at_time is None:
            return versions, consistent
        cuts = self.streams.cuts()
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
        return versions, consistent
