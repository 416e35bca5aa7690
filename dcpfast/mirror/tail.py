"""Where a later run of a mirror reads on from, and the state of what it reads there.

A run records, with its commit, a ``Tail``: for each vbucket the stream offset of the
snapshot marker that opens its first frame not applied (the snapshot still arriving, or
the snapshot of a prepare still waiting for its commit), the vbuckets stopped by a loss,
the collection names known, whether keys carry a collection id, and the end of the
stream read. The next run reads the stream from the least of those offsets only, passes
over each vbucket's frames before its own offset, and builds the state of the rest with
the changes applied already fed as Seqno Advanced frames (the stream checks see every
seqno, the documents none of those changes): every document the new frames change, at
each vbucket's new consistent seqno, is that document's row in the table (a tombstone:
the row goes).

That holds where the new frames only go on from where the stream stood. A collection
dropped, flushed or created again in a vbucket's new frames empties it there: the run
deletes what the table holds of it too (``TailState.cleared``). A consumer that reconnects
where it stood goes on; a Rollback, or a stream restarted lower, builds its vbuckets anew
from the stream's start (``Rebuild``). Frames that add a stream, flush a bucket, carry
stream ids, hold damage or lose frames, or a stream that only now says its keys carry
collection ids: the run reads everything again (``tail_state`` gives None).
"""

from __future__ import annotations

import copy
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import protocol as P
from ..batch import FrameBatch
from ..documents.builder import StateBuilder
from ..documents.feeding import fed
from ..documents.output import consistency, metadata
from ..documents.rows import CLEARING_EVENTS
from ..events import Manifest, system_events
from ..io import DEFAULT_BATCH_BYTES
from ..io.dumps import scan

#: The columns the tail is told by.
COLUMNS = ["offset", "magic", "opcode", "vbucket", "status", "opaque", "body_len",
           "by_seqno", "prepared_seqno", "snap_end", "stream_id"]
#: A Seqno Advanced frame: the header, then the seqno.
_ADVANCE = struct.Struct(">BBHBBHIIQQ")
#: Frames after which the new frames cannot be applied alone: a stream added, a bucket
#: flushed, a cache transfer. (A Stream Request may not: ``_restarts``.)
_RESTARTS = np.zeros(256, bool)
_RESTARTS[[P.Opcode.ADD_STREAM, P.Opcode.FLUSH, P.Opcode.CACHE_TRANSFER,
           P.Opcode.CACHE_TRANSFER_END]] = True
#: System events that leave the documents there as they are (a scope's collections are
#: dropped by their own events).
_HARMLESS = {"create_scope", "drop_scope", "modify_collection"}
_REQUESTS = np.zeros(256, bool)
_REQUESTS[[P.Magic.CLIENT_REQUEST, P.Magic.ALT_CLIENT_REQUEST]] = True
#: The opcodes of a vbucket stream's own frames (the others: noops, buffer acks, controls,
#: are no stream's).
_STREAM = np.zeros(256, bool)
_STREAM[[P.Opcode.STREAM_END, P.Opcode.SNAPSHOT_MARKER, P.Opcode.MUTATION,
         P.Opcode.DELETION, P.Opcode.EXPIRATION, P.Opcode.SYSTEM_EVENT, P.Opcode.PREPARE,
         P.Opcode.COMMIT, P.Opcode.ABORT, P.Opcode.SEQNO_ADVANCED,
         P.Opcode.OSO_SNAPSHOT]] = True
_NONE = np.uint64(2**64 - 1)


@dataclass(frozen=True)
class Tail:
    """Where a later run reads on from: ``offset`` (the least of ``starts``, or the end
    of the stream read), each vbucket's ``starts``, the vbuckets ``stopped`` by a loss,
    the collection names (a ``Manifest``'s), whether keys carry a collection id, and the
    ``end`` of the stream read (its frames before it at or below their vbucket's
    consistent seqno were applied)."""

    offset: int
    starts: dict[int, int]
    stopped: list[int]
    manifest: Manifest
    keyed: bool | None
    end: int

    def to_json(self) -> dict:
        m = self.manifest
        return {"offset": self.offset, "end": self.end,
                "starts": sorted(self.starts.items()),
                "stopped": self.stopped, "keyed": self.keyed,
                "manifest": {"uid": m.uid, "scopes": sorted(m.scopes.items()),
                             "collections": sorted(m.collections.items()),
                             "collection_scopes": sorted(m.collection_scopes.items())}}

    @classmethod
    def from_json(cls, data: dict) -> Tail:
        manifest, m = Manifest(), data["manifest"]
        manifest.uid = m["uid"]
        manifest.scopes = {int(k): v for k, v in m["scopes"]}
        manifest.collections = {int(k): v for k, v in m["collections"]}
        manifest.collection_scopes = {int(k): int(v) for k, v in m["collection_scopes"]}
        return cls(int(data["offset"]), {int(k): int(v) for k, v in data["starts"]},
                   [int(v) for v in data["stopped"]], manifest, data["keyed"],
                   int(data["end"]))


@dataclass(frozen=True)
class TailState:
    """What the new frames change: the documents ``written`` (their rows) and ``gone``
    (their identities' rows: tombstones), each vbucket's consistent seqno now, the
    ``Tail`` a later run reads on from, and where asked every new version (``versions``:
    ``state(history=True, include_deleted=True)``'s rows)."""

    written: pa.Table
    gone: pa.Table
    cut: dict[int, int]
    tail: Tail
    versions: pa.Table | None = None
    #: the vbuckets built from the stream's start (``Rebuild``): ``written`` and ``gone``
    #: hold all of their documents, live and tombstones
    rebuilt: frozenset[int] = frozenset()
    #: the collections the new frames empty, as (vbucket, collection id, the seqno of
    #: the first clear): every document of theirs the table holds goes, but those
    #: ``written`` or ``gone`` name; in the history, its current version ends there, but
    #: where a new version began before
    cleared: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class Rebuild:
    """The answer of ``tail_state`` where the new frames roll these ``vbuckets`` back
    (a Rollback, a stream restarted lower than what was applied): read the stream from
    its start and ask again with ``rebuild``, each of them then built anew."""

    vbuckets: frozenset[int]


def built(data, *, values: bool, errors: str, collections: bool | None,
          at_seqno=None, include_deleted: bool = False, history: bool = False,
          manifest: Manifest | None = None) -> tuple[pa.Table, Manifest]:
    """The state of ``data`` (``documents.state``'s rows) and the collection names the
    builder knew at its end (``manifest``: those known before it)."""
    builder = StateBuilder(at_seqno=at_seqno, include_deleted=include_deleted,
                           values=values, errors=errors, history=history)
    if manifest is not None:
        builder.manifest = manifest
    reading = {"collections": collections, "batch_bytes": DEFAULT_BATCH_BYTES,
               "threads": None}
    with fed(builder, data, errors, reading) as again:
        return builder.table(again), builder.manifest


def frames_of(data, collections: bool | None) -> FrameBatch:
    """The tail's columns of the frames of ``data`` (damage passed over)."""
    return scan(data, columns=COLUMNS, errors="skip", collections=collections)


def tail_after(frames: FrameBatch, base: int, end: int, cut: dict[int, int],
               stopped: list[int], manifest: Manifest, keyed: bool | None,
               before: dict[int, int] | None = None) -> Tail:
    """The ``Tail`` after a run applied ``frames`` (a stretch of the stream from its
    offset ``base``; ``end``: the stream's end read) up to ``cut``; ``before``: each
    vbucket's start in the stream before the stretch (a vbucket without a frame at or
    below its cut here keeps it)."""
    starts = dict(before or {})
    at = np.flatnonzero(_of_streams(frames))
    vbuckets = frames["vbucket"][at].astype(np.int64)
    offsets = frames["offset"][at].astype(np.int64) + base
    seqno = _filled(frames, "by_seqno")[at]
    opcode = frames["opcode"][at]
    ends = np.asarray(frames["snap_end"], np.uint64)[at]
    limit = _limits(cut)
    n = len(at)
    position = np.arange(n, dtype=np.int64)
    first = np.full(1 << 16, n, np.int64)
    np.minimum.at(first, vbuckets, position)
    done = (seqno != _NONE) & (seqno <= limit[vbuckets])
    last = np.full(1 << 16, -1, np.int64)          # each one's last frame applied
    np.maximum.at(last, vbuckets[done], position[done])
    other = opcode != P.Opcode.STREAM_END
    following = np.full(1 << 16, -1, np.int64)     # its last frame but a stream end
    np.maximum.at(following, vbuckets[other], position[other])
    waiting = _waiting_prepares(vbuckets, seqno, _filled(frames, "prepared_seqno")[at],
                                opcode, position <= last[vbuckets])
    order = np.argsort(frames["vbucket"][at], kind="stable")   # each one's, in order
    grouped = vbuckets[order]
    marker = opcode == P.Opcode.SNAPSHOT_MARKER
    for vb in np.flatnonzero(first < n).tolist():
        if vb in stopped:
            starts.pop(vb, None)
            continue
        mine = order[np.searchsorted(grouped, vb):np.searchsorted(grouped, vb, "right")]
        # a snapshot whose end is above the cut is open: read again from its marker
        marks = mine[marker[mine]]
        opened = int(offsets[marks[-1]]) if len(marks) and ends[marks[-1]] > limit[vb] \
            else end
        if following[vb] <= last[vb] and vb not in waiting:
            starts[vb] = opened               # nothing of it waits (its stream may end)
            continue
        # from the snapshot marker of its first frame not applied, or of a prepare
        # still waiting for its commit: a snapshot is read whole or not at all
        upto = min(last[vb] + 1, waiting.get(vb, n))
        nxt = mine[np.searchsorted(mine, upto)]
        if not marker[nxt]:
            before = mine[(mine < nxt) & marker[mine]]
            nxt = before[-1] if len(before) else mine[0]
        if last[vb] >= 0 or vb not in starts or vb in waiting:
            starts[vb] = min(int(offsets[nxt]), opened)
    offset = min([end, *starts.values()])
    return Tail(offset, starts, sorted(stopped), manifest, keyed, end)


def _waiting_prepares(vbuckets: np.ndarray, seqno: np.ndarray, prepared: np.ndarray,
                      opcode: np.ndarray, applied: np.ndarray) -> dict[int, int]:
    """Per vbucket, the position of its first prepare among the frames ``applied`` that
    no commit or abort among them resolves (the vbuckets without one left out)."""
    prepares = np.flatnonzero(applied & (opcode == P.Opcode.PREPARE))
    if not len(prepares):
        return {}
    ends = np.flatnonzero(applied & ((opcode == P.Opcode.COMMIT) |
                                     (opcode == P.Opcode.ABORT)))
    high = vbuckets.astype(np.uint64) << np.uint64(48)
    low = np.uint64(2**48 - 1)
    done = np.sort(high[ends] | (prepared[ends] & low))
    wanted = high[prepares] | (seqno[prepares] & low)
    found = np.minimum(np.searchsorted(done, wanted), max(len(done) - 1, 0))
    resolved = done[found] == wanted if len(done) else np.zeros(len(wanted), bool)
    waiting = prepares[~resolved]
    first = np.full(1 << 16, len(opcode), np.int64)
    np.minimum.at(first, vbuckets[waiting], waiting)
    return {vb: int(first[vb]) for vb in np.unique(vbuckets[waiting]).tolist()}


def _limits(cut: dict[int, int]) -> np.ndarray:
    """``cut`` as an array by vbucket id (0 where it names none)."""
    limit = np.zeros(1 << 16, np.uint64)
    for vb, c in cut.items():
        limit[vb] = c
    return limit


def unfinished(frames: FrameBatch) -> bool:
    """Whether a vbucket's stream in ``frames`` (``frames_of``) sent items of a snapshot
    whose end it has not sent."""
    stream = _of_streams(frames)
    marker = stream & (frames["opcode"] == P.Opcode.SNAPSHOT_MARKER)
    vbuckets = frames["vbucket"].astype(np.int64)
    position = np.arange(len(frames), dtype=np.int64)
    last = np.full(1 << 16, -1, np.int64)
    np.maximum.at(last, vbuckets[marker], position[marker])
    seqno = _filled(frames, "by_seqno")
    items = stream & (seqno != _NONE) & (position > last[vbuckets])
    if not items.any():
        return False
    top = np.zeros(1 << 16, np.uint64)
    np.maximum.at(top, vbuckets[items], seqno[items])
    ends = np.zeros(1 << 16, np.uint64)
    has = last >= 0
    ends[has] = frames["snap_end"][last[has]]
    seen = np.unique(vbuckets[items])
    return bool((top[seen] < ends[seen]).any())


def above(frames: FrameBatch, cut: dict[int, int], among: np.ndarray | None = None) -> bool:
    """Whether a vbucket's stream in ``frames`` (those ``among`` names, default all) sent
    a change with a seqno above its ``cut``."""
    seqno = _filled(frames, "by_seqno")
    sent = _of_streams(frames) & (seqno != _NONE)
    if among is not None:
        sent &= among
    return bool((seqno[sent] > _limits(cut)[frames["vbucket"][sent]]).any())


def tail_state(data: bytes | memoryview, base: int, tail: Tail, cut: dict[int, int], *,
               values: bool, errors: str, history: bool = False,
               rebuild: frozenset[int] = frozenset()) -> TailState | Rebuild | None:
    """What ``data`` (the stream from its offset ``base``, ``tail.offset``, to the end
    of its last whole frame) changes in the documents a run applied up to ``cut``; None
    where the new frames cannot be applied alone (a bucket flushed, stream ids, damage,
    lost frames: the run reads everything again); ``Rebuild`` where they roll some
    vbuckets back. ``rebuild``: vbuckets built anew from the stream's start
    (``data`` from offset 0 on), every frame of theirs read as it is. ``history``: their
    versions too, tombstones included (no vbucket rebuilt)."""
    frames = frames_of(data, tail.keyed)
    if frames.errors or (len(frames) and frames.consumed < len(data)) or \
            (tail.keyed is None and frames.collections):
        return None                     # damage, or the stream now says keys carry ids
    request = _of_streams(frames)
    offsets = frames["offset"].astype(np.int64) + base
    first = np.zeros(1 << 16, np.int64)
    for vb, at in tail.starts.items():
        first[vb] = at
    first[tail.stopped] = np.iinfo(np.int64).max
    anew = np.zeros(1 << 16, bool)
    anew[list(rebuild)] = True
    first[anew] = 0
    seqno = _filled(frames, "by_seqno")
    vbuckets = frames["vbucket"]
    opcode = frames["opcode"]
    # a stream's frames from its start, the changes applied already as seqno advances
    # (the stream checks see each seqno, the documents none of them; a prepare may wait
    # for a commit still to come); the other frames (responses, noops) from the end read
    feed = np.where(request, offsets >= first[vbuckets], offsets >= tail.end)
    # a restart from its vbucket's start (before it, the vbucket needs nothing it did)
    restarts = _restarts(frames, offsets, tail)
    if restarts is None or _RESTARTS[opcode].any() or (
            frames.validity("stream_id") is not None and (frames["stream_id"][feed] != 0).any()):
        return None
    owner, rolled = restarts
    told = owner >= 0
    feed[told] = offsets[told] >= first[owner[told]]
    mine = anew[vbuckets] & request                   # the frames of the vbuckets built anew
    # (a prepare, or a collection event that may clear one, read again as it is)
    applied = feed & request & ~mine & (seqno != _NONE) & (seqno <= _limits(cut)[vbuckets])
    advanced = applied & (offsets < tail.end) & (opcode != P.Opcode.PREPARE) & \
        (opcode != P.Opcode.SYSTEM_EVENT)
    # a stream restarted at or below what was applied sends it again
    lower = feed & request & ~mine & (offsets >= tail.end) & (seqno <= _limits(cut)[vbuckets])
    again = (rolled | set(np.unique(vbuckets[lower]).tolist())) - rebuild
    if again:
        return None if history or tail.stopped else Rebuild(rebuild | again)
    events = feed & ~mine & ~applied & (opcode == P.Opcode.SYSTEM_EVENT)
    clears = _clears(data, frames, events, tail) if events.any() else []
    if clears is None:
        return None
    undone = _undone(clears, owner, told & feed)     # by a restart: built anew
    if undone:
        return None if history or tail.stopped else Rebuild(rebuild | undone)
    kept = _kept(data, frames, feed, advanced)

    def state_of(at_seqno=None, versions: bool = False) -> tuple[pa.Table, Manifest]:
        return built(kept, manifest=copy.deepcopy(tail.manifest), values=values,
                     errors=errors, collections=bool(tail.keyed), include_deleted=True,
                     at_seqno=at_seqno, history=versions)
    rows, manifest = state_of()
    meta = metadata(rows)
    if meta.get("errors_total") or meta.get("lost"):
        return None
    now = {vb: s for vb, s in cut.items() if vb not in rebuild}
    for r in consistency(rows).to_pylist():
        now[r["vbucket"]] = max(now.get(r["vbucket"], 0), r["consistent_seqno"])
    if above(frames, now, feed):
        sent = feed & request & (seqno != _NONE)
        named = {vb: now.get(vb, 0) for vb in np.unique(vbuckets[sent]).tolist()}
        rows, manifest = state_of(named)
    every = None
    if history:
        every = state_of({vb: now.get(vb, 0) for vb in np.unique(
            vbuckets[feed & request]).tolist()}, versions=True)[0].replace_schema_metadata(None)
    rows = rows.replace_schema_metadata(None)
    dead = pc.fill_null(rows["deleted"], False)
    after = tail_after(frames.filter(feed), base, base + len(data), now, tail.stopped,
                       manifest, tail.keyed, tail.starts)
    return TailState(rows.filter(pc.invert(dead)), rows.filter(dead), now, after, every,
                     rebuild, _first_clears(clears, now))


def _restarts(frames: FrameBatch, offsets: np.ndarray, tail: Tail
              ) -> tuple[np.ndarray, set[int]] | None:
    """The vbucket of each Stream Request and response among ``frames`` (at stream
    offsets ``offsets``; -1 for the other frames: a request names it, a response's is
    that of the stream messages of its opaque), and the vbuckets a Rollback among the
    new frames rolls back; None where they keep the run from going on alone: a new
    restart where a stream lost frames, or a restart read again, or a new Rollback,
    whose vbucket its opaque does not tell. A stream restarted where it stood (a
    consumer that reconnects) goes on: the new frames then show whether it sends again
    what was applied (a seqno at or below the vbucket's cut)."""
    owner = np.full(len(frames), -1, np.int64)
    asked = np.flatnonzero(frames["opcode"] == P.Opcode.STREAM_REQUEST)
    if not len(asked):
        return owner, set()
    magic, opaque = frames["magic"], frames["opaque"]
    new = asked[offsets[asked] >= tail.end]
    if len(new) and tail.stopped:
        return None
    vbuckets = frames["vbucket"]
    mine = asked[_REQUESTS[magic[asked]]]
    owner[mine] = vbuckets[mine]
    answers = asked[~_REQUESTS[magic[asked]]]
    # each opaque's stream messages: (opaque, vbucket) pairs, an opaque of one vbucket
    stream = _of_streams(frames)
    pairs = np.unique(opaque[stream].astype(np.uint64) << np.uint64(16) | vbuckets[stream])
    opaques, at, count = np.unique(pairs >> np.uint64(16), return_index=True,
                                   return_counts=True)
    k = np.minimum(np.searchsorted(opaques, opaque[answers]), max(len(opaques) - 1, 0))
    told = np.zeros(len(answers), bool) if not len(opaques) else \
        (opaques[k] == opaque[answers]) & (count[k] == 1)
    owner[answers[told]] = (pairs[at[k[told]]] & np.uint64(0xFFFF)).astype(np.int64)
    rolls = (offsets[answers] >= tail.end) & (frames["status"][answers] == P.Status.ROLLBACK)
    if (~told & ((offsets[answers] < tail.end) | rolls)).any():
        return None
    return owner, set(owner[answers[rolls]].tolist())


def _kept(data: bytes | memoryview, frames: FrameBatch, feed: np.ndarray,
          advanced: np.ndarray) -> bytes | memoryview:
    """The frames ``feed`` names, back to back, those ``advanced`` names as Seqno
    Advanced frames of their vbucket, opaque and seqno."""
    if feed.all() and not advanced.any():
        return data
    kind = feed.astype(np.int8) + advanced
    starts = frames["offset"].astype(np.int64)
    ends = starts + P.HEADER_SIZE + frames["body_len"].astype(np.int64)
    seqno, vbuckets, opaque = frames["by_seqno"], frames["vbucket"], frames["opaque"]
    edges = np.flatnonzero(np.diff(kind, prepend=np.int8(-1), append=np.int8(-1)))
    view, pieces = memoryview(data), list[bytes | memoryview]()
    for a, b in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        if kind[a] == 1:
            pieces.append(view[starts[a]:ends[b - 1]])
        elif kind[a] == 2:
            pieces += [_ADVANCE.pack(P.Magic.CLIENT_REQUEST, P.Opcode.SEQNO_ADVANCED, 0, 8, 0,
                                     int(vbuckets[i]), 8, int(opaque[i]), 0, int(seqno[i]))
                       for i in range(a, b)]
    return b"".join(pieces)


def _clears(data: bytes | memoryview, frames: FrameBatch, events: np.ndarray, tail: Tail
            ) -> list[tuple[int, int, int, int]] | None:
    """The collections the system events among ``frames`` that ``events`` names empty
    where the table may hold documents of theirs (a drop, a flush, a collection known
    before created again), each as its vbucket, collection id, the event's seqno and its
    frame's position; None where an event is none of these and not harmless either."""
    at = np.flatnonzero(events)
    found = system_events(scan(_kept(data, frames, events, np.zeros_like(events)),
                               errors="skip", collections=tail.keyed))
    known = set(tail.manifest.collections)
    out = []
    for row in found.select(["index", "vbucket", "by_seqno", "event",
                             "collection_id"]).to_pylist():
        cid = row["collection_id"]
        if row["event"] in CLEARING_EVENTS and cid is not None:
            if row["event"] != "create_collection" or cid in known:
                out.append((row["vbucket"], cid, row["by_seqno"], int(at[row["index"]])))
            known.add(cid)
        elif row["event"] not in _HARMLESS:
            return None
    return out


def _undone(clears: list[tuple[int, int, int, int]], owner: np.ndarray,
            restarts: np.ndarray) -> set[int]:
    """The vbuckets of ``clears`` (``_clears``) that a restart after the clear may have
    discarded it in (``restarts``: the frames that restart a stream, ``owner``: the
    vbucket of each)."""
    last = np.full(1 << 16, -1, np.int64)
    np.maximum.at(last, owner[restarts], np.flatnonzero(restarts))
    return {vb for vb, _, _, at in clears if last[vb] > at}


def _first_clears(clears: list[tuple[int, int, int, int]], cut: dict[int, int]
                  ) -> tuple[tuple[int, int, int], ...]:
    """Of ``clears`` (``_clears``) those at or below their vbucket's ``cut``: the first
    of each collection on each vbucket, as (vbucket, collection id, seqno)."""
    first: dict[tuple[int, int], int] = {}
    for vb, cid, seqno, _ in clears:
        if seqno <= cut.get(vb, 0):
            first[vb, cid] = min(seqno, first.get((vb, cid), seqno))
    return tuple(sorted((vb, cid, seqno) for (vb, cid), seqno in first.items()))


def _of_streams(frames: FrameBatch) -> np.ndarray:
    """Which of ``frames`` are a vbucket stream's own (a request of a stream opcode)."""
    return _REQUESTS[frames["magic"]] & _STREAM[frames["opcode"]]


def _filled(frames: FrameBatch, name: str) -> np.ndarray:
    """Column ``name`` with its nulls as 2**64 - 1."""
    values = np.asarray(frames[name], np.uint64).copy()
    valid = frames.validity(name)
    if valid is not None:
        values[~valid] = _NONE
    return values
