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
from .._core.contract import W_ABORT, W_COMMIT, W_PREPARE, DurableRequest
from ..errors import text
from ..streams.checks import details, expectation
from .rows import DOCUMENTS, Rows
from .segments import U64_MAX, Barriers
from .versions import Futures, History, Latest, Lost, Store, Versions, concat, from_rows
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
                 include_deleted: bool = False, only: Lost | None = None, index=None,
                 futures: Futures | None = None):
        self.limit, self.at_time, self.history, self.only = limit, at_time, history, only
        self.index = _core.state.KeyIndex() if index is None else index
        self.store: Store = History(futures) if history \
            else Latest(include_deleted)
        #: every restart whose point is known: (unit, position, point) arrays per stretch
        self.restarts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        #: every collection clear that found documents of its collection on its stream:
        #: (unit, collection id, position, seqno) arrays per stretch
        self.clears: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self.streams = Streams()
        self.pending: Versions | None = None      # prepares awaiting their commit or abort
        self.problems: list[tuple[int, int, str, str, str]] = []

    def keys(self, rows: Rows, changes: np.ndarray | None = None) -> tuple[np.ndarray, int]:
        """The document id of each document change of ``rows`` (in order), and how many
        documents the index knew before: ``update``'s first use of the index, which may
        run on another thread while ``rows`` are walked (the index's loop lets the GIL
        go). Changes that the walk then leaves out (past ``at_seqno``, say) have ids too.
        ``changes``: the rows of those changes, where known."""
        docs = np.flatnonzero(rows.columns["what"] < DOCUMENTS) if changes is None else changes
        known = len(self.index)
        return rows.ids(self.index, docs), known

    def update(self, rows: Rows, keys: Callable[[], tuple[np.ndarray, int]] | None = None
               ) -> None:
        """Take the next stretch of the stream (rows in stream order); ``keys`` gives
        ``self.keys(rows)`` worked out beforehand (the same rows, or the same with rows
        that are no document changes put in)."""
        if not len(rows):
            return
        found = self.streams.walk(rows, self.limit, self.at_time)
        self._report(rows, found)
        c = rows.columns
        changes = np.flatnonzero(c["what"] < DOCUMENTS)
        every, known = self.keys(rows, changes) if keys is None else keys()
        if len(every) != len(changes):
            raise ValueError("the keys given are not those of these rows")
        applies = found.applies.take(changes)
        docs, ids = changes[applies], every[applies]
        g = rows.gather
        clears = self._clears(rows, np.flatnonzero(c["clear"] & found.applies), changes,
                              every, known)
        barriers = Barriers(found.restarts, (g("unit", clears), g("cid", clears),
                                             clears + 2, g("seqno", clears)), len(rows))
        if len(clears):
            self.clears.append((g("unit", clears), g("cid", clears), c["pos"][clears],
                                g("seqno", clears)))
        unit, rel, point = found.restarts
        if len(unit):                # a restart carried from before stands just before
            pos = c["pos"]
            self.restarts.append((unit, np.where(rel >= 2, pos[np.maximum(rel - 2, 0)],
                                                 pos[0] - 1), point))
        if not barriers.empty:
            self.store.kill(barriers)
        if self.only is not None:
            keep = self.only.matches(g("unit", docs), g("cid", docs), ids)
            docs, ids = docs[keep], ids[keep]
        versions, rel = self._changes(rows, docs, ids, barriers)
        self.store.add(versions, rel, barriers)

    def _clears(self, rows: Rows, clears: np.ndarray, docs: np.ndarray, ids: np.ndarray,
                known: int) -> np.ndarray:
        """Of the collection clears at ``clears``, those of a collection that had a
        document on its stream before them (one the index knew before this stretch, its
        first ``known``, or one of the stretch's changes ``docs``, of ids ``ids``, before
        the clear): the others clear nothing (a collection's creation, say). A change the
        walk leaves out counts too: a clear counted in clears what it finds."""
        if not len(clears):
            return clears
        first = self.index.firsts(rows.gather("unit", clears), rows.gather("cid", clears))
        effective = (first >= 0) & (first < known)
        later = np.flatnonzero((first >= known))
        if len(later):          # the first row of a document new in this stretch
            top = np.maximum.accumulate(ids)
            effective[later] = docs[np.searchsorted(top, first[later])] < clears[later]
        return clears[effective]

    def _report(self, rows: Rows, walk: Walk) -> None:
        """The problems of a stretch: where frames were lost (what the stream checks
        found), and items whose seqno goes backwards that they did not name."""
        c = rows.columns
        f = walk.found
        for i, rule, seqno, given, low, high in zip(*(col.tolist() for col in f)):
            expected, got = expectation(rule, seqno, given, low, high)
            what = details(rule, seqno, given, low, high,
                           int(rows.gather("end_status", np.array([i]))[0]))
            vbucket = int(c["unit"][i]) >> 16
            self._problem(rows, i, text("state_lost", vbucket=vbucket, details=what,
                                        expected=expected, found=got), "lost_frames",
                          text("state_keep_going", vbucket=vbucket))
        bad = np.flatnonzero(walk.bad)
        for i in bad[~np.isin(bad, f.at)].tolist():
            self._problem(rows, i, text("state_seqno_backwards", seqno=int(c["seqno"][i]),
                                        vbucket=int(c["unit"][i]) >> 16,
                                        previous=int(walk.previous[i])), "seqno_backwards",
                          text("state_skip_hint"))

    def _problem(self, rows: Rows, i: int, reason: str, kind: str, note: str = "") -> None:
        self.problems.append((int(rows.offset[i]), int(rows.length[i]), reason, kind, note))

    def _changes(self, rows: Rows, docs: np.ndarray, ids: np.ndarray, barriers: Barriers):
        """The versions of the stretch's changes (mutations, deletions, expirations and
        commits) that the store keeps, with their ``rel``; the pending prepares move on.

        The plain changes are versions as they are; the durable writes (prepares,
        commits, aborts, with the prepares held from earlier stretches) are paired
        (``_paired``). Only the versions the store keeps are built."""
        what = rows.columns["what"].take(docs)
        tracked = (what == W_PREPARE) | (what == W_COMMIT) | (what == W_ABORT)
        plain = np.flatnonzero(~tracked)
        held = self.pending
        if held is None and len(plain) == len(docs):
            keep = self.store.select(ids, docs)
            return from_rows(rows, docs[keep], ids[keep]), docs[keep] + 2
        t = _Tracked(rows, docs, ids, np.flatnonzero(tracked), held)
        c_ok, p_ok, waiting = self._paired(rows, t, barriers)
        self.pending = t.build(np.sort(waiting)).owned() if len(waiting) else None
        cat = np.concatenate
        keep = self.store.select(cat([ids[plain], t.group[c_ok]]),
                                 cat([docs[plain] + 2, t.rel[c_ok]]))
        mine = plain[keep[keep < len(plain)]]
        kept = keep[keep >= len(plain)] - len(plain)
        c_ok, p_ok = c_ok[kept], p_ok[kept]
        # the plain changes and the commits whose prepare is in this stretch: versions of
        # their rows (a commit's of its prepare's row), then those of a held prepare
        here = p_ok >= t.h
        at = np.flatnonzero(here)
        versions = from_rows(rows, cat([docs[mine], t.at[p_ok[at] - t.h]]),
                             cat([ids[mine], t.ids[p_ok[at] - t.h]]))
        done = cat([at, np.flatnonzero(~here)])          # the commits, in that order
        if held is not None and len(at) < len(c_ok):
            versions = concat([versions, held.take(p_ok[~here])])
        if len(c_ok):
            c_ok = c_ok[done]
            committed = slice(len(mine), None)           # each commit's prepare, at the commit
            versions["gpos"][committed] = t.pos(c_ok)
            versions["seqno"][committed] = t.seqno[c_ok]
            versions["what"][committed] = t.what[c_ok]
        return versions, cat([docs[mine] + 2, t.rel[c_ok]])

    def _paired(self, rows: Rows, t: _Tracked, barriers: Barriers):
        """Each commit of ``t`` paired with the change of its document before it (the
        commits whose pair is their prepare, at its seqno and with no clear or restart
        between that drops it, and those prepares: indices into ``t``), and the prepares
        still waiting at the stretch's end; a commit without its prepare is a problem."""
        paired = _core.state.pair_durable(DurableRequest(
            group=t.group, what=t.what, seqno=t.seqno, prepared=t.prepared, size=t.size))
        com, pre, ok, waiting = paired.commits, paired.before, paired.ok, paired.waiting
        if not barriers.empty and ok.any():
            at = np.flatnonzero(ok)
            c, p = com[at], pre[at]
            ok[at] = ~barriers.cleared(t.unit[p], t.cid[p], t.rel[p], t.rel[c]) \
                & ~barriers.discarded(t.unit[p], t.seqno[p], t.rel[p], t.rel[c])
        for j in com[~ok].tolist():
            vbucket = int(t.unit[j]) >> 16
            self._problem(rows, t.row(j), text("state_no_prepare",
                                               prepared=int(t.prepared[j]), vbucket=vbucket),
                          "commit_without_prepare", text("state_skip_hint"))
        if not barriers.empty:
            waiting = waiting[~barriers.discarded(t.unit[waiting], t.seqno[waiting],
                                                  t.rel[waiting])
                              & ~barriers.cleared(t.unit[waiting], t.cid[waiting],
                                                  t.rel[waiting],
                                                  np.full(len(waiting), barriers.stride - 1))]
        return com[ok], pre[ok], waiting

    @property
    def lost(self) -> Lost:
        """The documents whose state a restart or a time cut left unknown to a ``Latest``
        store (always empty for ``History``)."""
        return self.store.lost if isinstance(self.store, Latest) else Lost()

    def futures(self) -> Futures:
        """What this pass learnt of the whole stream, for a second pass over it."""
        parts = list(zip(*self.restarts)) or [[np.zeros(0, np.uint32)],
                                                [np.zeros(0, np.int64)],
                                                [np.zeros(0, np.uint64)]]
        restarts = tuple(np.concatenate(p) for p in parts)
        cuts = self.streams.cuts() if self.at_time is not None else {}
        return Futures(restarts, cuts)

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


class _Tracked:
    """The durable-write changes of a stretch (prepares, commits, aborts, at ``tracked``
    among the stretch's changes ``docs`` of documents ``ids``) after the prepares
    ``held`` from earlier stretches: their columns, held ones first."""

    def __init__(self, rows: Rows, docs: np.ndarray, ids: np.ndarray, tracked: np.ndarray,
                 held: Versions | None):
        self.rows, self.held = rows, held
        self.h = h = 0 if held is None else len(held)
        self.at = docs[tracked]                 # their rows
        self.ids = ids[tracked]
        cat = np.concatenate

        def joined(name, column, dtype):
            mine = rows.gather(column, self.at)
            if not h:
                return mine
            return cat([held[name] if name else np.zeros(h, dtype), mine])
        self.what = joined("what", "what", np.uint8)
        self.group = cat([held["doc"], self.ids]) if held is not None else self.ids
        self.size = int(self.group.max()) + 1 if len(self.group) else 0
        self.rel = cat([np.zeros(h, np.int64), self.at + 2])
        self.seqno = joined("seqno", "seqno", np.uint64)
        self.unit = joined("unit", "unit", np.uint32)
        self.cid = joined("cid", "cid", np.uint32)
        self.prepared = joined(None, "prepared", np.uint64)

    def row(self, j: int) -> int:
        """The row of change ``j`` (not a held one)."""
        return int(self.at[j - self.h])

    def pos(self, index: np.ndarray) -> np.ndarray:
        """The stream position of the changes at ``index`` (none held)."""
        return self.rows.gather("pos", self.at[index - self.h])

    def build(self, index: np.ndarray) -> Versions:
        """The changes at ``index`` (ascending) as versions."""
        mine = index[index >= self.h] - self.h
        made = from_rows(self.rows, self.at[mine], self.ids[mine])
        if self.held is None:
            return made
        return concat([self.held.take(index[index < self.h]), made])
