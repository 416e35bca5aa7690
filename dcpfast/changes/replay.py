"""The change feed of a DCP stream (``feed``): every change of every document in stream
order, and the changes that undo what the stream itself took back, so that a consumer
that applies the feed in order, and nothing else, ends with ``dcpfast.state`` of it.

The state engine reads the stream as for ``state`` (durable writes paired, responses
placed on their streams, lost frames found) into a store that keeps every version it
sent (``Everything``); its restarts and collection clears come with their positions.
The feed then replays, per document:

- each version as its change (``mutation``, ``deletion``, ``expiration``; a durable
  write at its commit);
- at a collection drop or flush, a deletion (``clear``) for each of its documents that
  stood;
- at a restart (a Rollback, a stream restarted lower), for each document whose current
  version the restart discards, the version it makes current again, or a deletion where
  none is left (``rollback``). A clear above the restart point is undone with it.

Each change has an ``epoch`` (the restarts of its stream before it) and a ``seqno`` (a
version's own; a clear's; the restart point for what a restart undoes): ``(epoch, not a
rollback, seqno)`` orders a document's changes as the stream did, where ``by_seqno``
alone does not (the stream after a rollback uses the seqnos again; a backfill in key
order after a restart may send a seqno below its point). Documents whose stream never
restarts and whose collection is never cleared take the vectorised path; the others are
replayed one change at a time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .._core.contract import W_EXPIRATION
from ..documents import bodies
from ..documents.versions import Versions, concat, tombstones

#: What made a change: its index in the feed's ``change`` column.
CHANGES = ("mutation", "deletion", "expiration", "rollback", "clear")
_MUTATION, _DELETION, _EXPIRATION, _ROLLBACK, _CLEAR = range(len(CHANGES))
_NONE = -1


class Everything:
    """A store of the state engine that keeps every version the stream sent, in stream
    order: a restart or a clear discards none (the feed undoes them itself). The bodies of
    their values go to a spill file as they come (``bodies.SpillFile``): what it holds in
    memory grows with the versions, not with the bytes of the stream. Where no spill file
    can be made or written to, the bodies stay in memory."""

    def __init__(self):
        self.runs: list[Versions] = []
        self._spill: bodies.SpillFile | None = None
        self._spilled: dict[int, bodies.Chunk] = {}
        self._spilling = True

    def kill(self, barriers) -> None:
        """Nothing is discarded."""

    @staticmethod
    def select(group: np.ndarray, rel: np.ndarray) -> np.ndarray:
        """Every version of a stretch."""
        return np.arange(len(group))

    def add(self, versions: Versions, rel: np.ndarray, barriers) -> None:
        if len(versions):
            if versions.values and self._spilling:
                try:
                    if self._spill is None:
                        self._spill = bodies.SpillFile()
                    versions = versions.spilled(self._spill, self._spilled)
                except OSError:         # no temporary file, or no room left in it: the
                    self._spilling = False          # bodies stay where they are
            self.runs.append(versions)

    def result(self) -> Versions | None:
        runs, self.runs = self.runs, []
        return concat(runs) if runs else None


@dataclass
class Feed:
    """The feed's changes as arrays, in stream order: the stream (``unit``), document,
    collection id, what made it (``change``, index into ``CHANGES``), the version
    current after it (``after``) and before it (``before``), indices into ``versions``
    or ``-1`` (none), its epoch, seqno and position in the stream."""

    unit: np.ndarray
    doc: np.ndarray
    cid: np.ndarray
    change: np.ndarray
    after: np.ndarray
    before: np.ndarray
    epoch: np.ndarray
    seqno: np.ndarray
    pos: np.ndarray

    def __len__(self) -> int:
        return len(self.doc)

    def sliced(self, start: int, stop: int) -> Feed:
        """Changes ``start`` to ``stop`` (views, no copy)."""
        return Feed(*(getattr(self, f)[start:stop] for f in Feed.__dataclass_fields__))


def replay(versions: Versions | None, restarts: tuple, clears: tuple) -> Feed:
    """The feed of ``versions`` (every version the stream sent), ``restarts`` (unit,
    position, point) and ``clears`` (unit, collection id, position, seqno)."""
    return _replay(versions, restarts, clears)[0]


def final(versions: Versions | None, restarts: tuple,
          clears: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Each document and the version that stands for it once its feed is applied (a
    tombstone too; ``-1``: none, as after a collection drop), as ``replay`` replays
    them."""
    _, docs, ends = _replay(versions, restarts, clears, feed=False)
    return docs, ends


def _replay(versions: Versions | None, restarts: tuple, clears: tuple, *,
            feed: bool = True) -> tuple[Feed, np.ndarray, np.ndarray]:
    """``replay``'s feed (``feed``: made, else empty), and ``final``'s documents and
    versions."""
    if versions is None or not len(versions):
        empty = np.zeros(0, np.int64)
        return Feed(*(empty,) * 9), empty, empty
    unit, doc, cid = versions["unit"], versions["doc"], versions["cid"]
    gone = tombstones(versions)
    kind = np.where(versions["what"] == W_EXPIRATION, _EXPIRATION,
                    np.where(gone, _DELETION, _MUTATION)).astype(np.uint8)
    r_unit, r_pos, r_point = restarts
    c_unit, c_cid, c_pos, c_seqno = clears
    noisy = np.isin(unit, r_unit)
    if len(c_unit):
        cleared = {(int(u), int(c)) for u, c in zip(c_unit.tolist(), c_cid.tolist())}
        noisy |= np.array([(u, c) in cleared for u, c in zip(unit.tolist(), cid.tolist())],
                          bool)
    # a document is replayed one change at a time where any of its versions is noisy
    loud = np.zeros(int(doc.max()) + 1, bool)
    loud[doc[noisy]] = True
    noisy = loud[doc]
    quiet = np.flatnonzero(~noisy)
    # quiet documents: each version is a change; the one before it, the document's last
    order = quiet[np.lexsort((versions["gpos"][quiet], doc[quiet]))]
    before = np.full(len(order), _NONE, np.int64)
    same = np.zeros(len(order), bool)
    same[1:] = doc[order[1:]] == doc[order[:-1]]
    before[1:] = np.where(same[1:], order[:-1], _NONE)
    parts = [Feed(unit[order], doc[order], cid[order], kind[order], order.astype(np.int64),
                  before, np.zeros(len(order), np.int64), versions["seqno"][order],
                  versions["gpos"][order])] if feed else []
    last = np.ones(len(order), bool)
    last[:-1] = ~same[1:]
    docs, ends = [doc[order[last]]], [order[last].astype(np.int64)]
    if noisy.any():
        changes, current = _replayed(versions, np.flatnonzero(noisy), kind, gone, restarts,
                                     clears)
        parts.append(changes)
        docs.append(np.fromiter(current.keys(), np.int64, len(current)))
        ends.append(np.fromiter(current.values(), np.int64, len(current)))
    docs_at, ends_at = np.concatenate(docs).astype(np.int64), np.concatenate(ends)
    if not feed:
        empty = np.zeros(0, np.int64)
        return Feed(*(empty,) * 9), docs_at, ends_at
    joined = Feed(*(np.concatenate([getattr(p, f) for p in parts])
                    for f in Feed.__dataclass_fields__))
    at = np.argsort(joined.pos, kind="stable")
    return Feed(*(getattr(joined, f)[at] for f in Feed.__dataclass_fields__)), docs_at, ends_at


def _replayed(versions: Versions, index: np.ndarray, kind: np.ndarray, gone: np.ndarray,
              restarts: tuple, clears: tuple) -> tuple[Feed, dict[int, int]]:
    """The changes of the versions at ``index`` (every version of their documents), the
    clears and the restarts, one at a time in stream order."""
    unit = versions["unit"].tolist()
    doc = versions["doc"].tolist()
    cid = versions["cid"].tolist()
    seqno = versions["seqno"].tolist()
    gpos = versions["gpos"].tolist()
    events = [(gpos[v], 0, v) for v in index.tolist()]
    r_unit, r_pos, r_point = (a.tolist() for a in restarts)
    events += [(p, 1, k) for k, p in enumerate(r_pos)]
    c_unit, c_cid, c_pos, c_seqno = (a.tolist() for a in clears)
    events += [(p, 2, k) for k, p in enumerate(c_pos)]
    events.sort()
    stacks: dict[int, list[int]] = defaultdict(list)     # a document's versions that stand
    current: dict[int, int] = {}
    of_unit: dict[int, dict[int, None]] = defaultdict(dict)   # documents in first-seen order
    of_collection: dict[tuple[int, int], dict[int, None]] = defaultdict(dict)
    standing_clears: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    collection: dict[int, int] = {}
    epoch: dict[int, int] = defaultdict(int)
    out: list[tuple[int, ...]] = []            # unit, doc, cid, change, after, before, ...

    def absent(v: int) -> bool:                # nothing stands, or a tombstone
        return v == _NONE or bool(gone[v])

    for pos, what, k in events:
        if what == 0:
            d, u = doc[k], unit[k]
            of_unit[u][d] = None
            of_collection[u, cid[k]][d] = None
            collection[d] = cid[k]
            stacks[d].append(k)
            out.append((u, d, cid[k], int(kind[k]), k, current.get(d, _NONE), epoch[u],
                        seqno[k], pos))
            current[d] = k
        elif what == 2:
            u, c = c_unit[k], c_cid[k]
            standing_clears[u, c].append((pos, c_seqno[k]))
            for d in of_collection.get((u, c), ()):
                was = current.get(d, _NONE)
                if not absent(was):
                    out.append((u, d, c, _CLEAR, _NONE, was, epoch[u], c_seqno[k], pos))
                current[d] = _NONE
        else:
            u, point = r_unit[k], r_point[k]
            epoch[u] += 1
            for key in [key for key in standing_clears if key[0] == u]:
                standing_clears[key] = [(p, s) for p, s in standing_clears[key] if s <= point]
            for d in of_unit.get(u, ()):
                stack = [v for v in stacks[d] if seqno[v] <= point]
                stacks[d] = stack
                now = stack[-1] if stack else _NONE
                if now != _NONE and any(p > gpos[now] for p, _ in
                                        standing_clears.get((u, cid[now]), ())):
                    now = _NONE
                was = current.get(d, _NONE)
                if now != was and not (absent(now) and absent(was)):
                    out.append((u, d, collection[d], _ROLLBACK, now, was, epoch[u], point,
                                pos))
                current[d] = now
    columns = list(zip(*out)) if out else [()] * 9
    dtypes = (np.uint32, np.int64, np.uint32, np.uint8, np.int64, np.int64, np.int64,
              np.uint64, np.int64)
    return Feed(*(np.array(col, dtype) for col, dtype in zip(columns, dtypes))), current


def standing(versions: Versions, restarts: tuple) -> np.ndarray:
    """Whether each version stands: no restart of its stream after it went below it."""
    out = np.ones(len(versions), bool)
    r_unit, r_pos, r_point = restarts
    if not len(r_unit) or not len(versions):
        return out
    unit, gpos, seqno = versions["unit"], versions["gpos"], versions["seqno"]
    for u in np.unique(r_unit).tolist():
        mine = r_unit == u
        order = np.argsort(r_pos[mine], kind="stable")
        pos, point = r_pos[mine][order], r_point[mine][order]
        lowest = np.minimum.accumulate(point[::-1])[::-1]      # the lowest point from here on
        at = np.flatnonzero(unit == u)
        after = np.searchsorted(pos, gpos[at], "right")       # the first restart after it
        later = after < len(pos)
        below = np.zeros(len(at), bool)
        below[later] = lowest[after[later]] < seqno[at][later]
        out[at] = ~below
    return out
