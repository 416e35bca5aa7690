"""Synthetic DCP conversations: realistic, deterministic streams with the record of what
each frame must decode to (the test-suite's and the benchmarks' corpora)."""

from __future__ import annotations

import json
import random
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cramjam

from ..protocol import (
    Datatype,
    DurabilityLevel,
    Magic,
    Opcode,
    OpenFlag,
    SnapshotFlag,
    StreamEndStatus,
    SystemEventId,
)
from .frames import (
    abort,
    buffer_ack,
    commit,
    control,
    create_collection,
    create_scope,
    deletion,
    expiration,
    failover_log_response,
    hello,
    hello_response,
    mutation,
    noop,
    prepare,
    response,
    seqno_advanced,
    snapshot_marker,
    stream_end,
    stream_request,
    xattr_blob,
    xattr_value,
)
from .frames import open as open_request

__all__ = [
    "SyntheticFrame", "synthetic_conversation", "synthetic_frames", "synthetic_manifest",
    "synthetic_stream",
]


@dataclass
class SyntheticFrame:
    """One generated frame and the values a decoder must report for it.

    ``fields`` holds only what this frame type carries: ``key`` is the logical key
    (document changes and system events), ``value`` the value section (document changes,
    system events, V2.x markers and responses), ``collection_id`` is set for document
    changes on collection streams and ``stream_id`` only when the frame has one.
    Document changes also record the document the value encodes: ``body`` (inflated,
    without xattrs) and ``xattrs`` (None when the value has no xattr section).
    """

    data: bytes
    fields: dict
    body: bytes | None = None
    xattrs: dict[str, str] | None = None


#: HELLO features a DCP client negotiates: TCP nodelay, xattr, xerror, select bucket,
#: snappy, JSON.
_BASE_FEATURES = (0x03, 0x06, 0x07, 0x08, 0x0A, 0x0B)
_FEATURE_ALT_REQUESTS = 0x10
_FEATURE_SYNC_REPLICATION = 0x11
_FEATURE_COLLECTIONS = 0x12
#: (manifest uid, scope id, name) of the scope every synthetic collection stream creates.
_SCOPE = (1, 8, b"inventory")
#: (manifest uid, scope id, collection id, name, max_ttl) of the collections it creates.
_COLLECTIONS = ((2, 8, 8, b"airline", None), (3, 8, 9, b"hotel", None),
                (4, 0, 10, b"route", 86400))
_MAX_TTL = {cid: ttl for _, _, cid, _, ttl in _COLLECTIONS if ttl}
_KEY_PREFIX = {0: b"doc", 8: b"airline", 9: b"hotel", 10: b"route"}
_WORDS = ("harbor", "river", "summit", "garden", "station", "market", "bridge", "valley",
          "airport", "museum", "castle", "forest", "island", "canyon", "meadow", "lagoon")
_CITIES = ("Oslo", "Lyon", "Porto", "Dublin", "Kyoto", "Austin", "Leeds", "Quito")
_JSON_FLAGS = 0x02000006        # SDK common flags: JSON document
_BINARY_FLAGS = 0x03000000      # SDK common flags: binary document
_PREPARE_RATIO = 0.1
_COMMIT_RATIO = 0.9
_NOOP_RATIO = 0.02
_ADVANCE_RATIO = 0.05
_CAS_EPOCH = 1_700_000_000 * 10**9
#: The client's connection name and flow-control buffer (it acknowledges every half).
_CONNECTION = b"dcpfast-replica"
_BUFFER_SIZE = 65536


@dataclass(frozen=True)
class _Mix:
    """The knobs of ``synthetic_frames`` that shape each vbucket's stream."""

    collections: bool
    marker_version: int | None
    delete_times: bool
    snapshot_size: int
    snappy_ratio: float
    xattr_ratio: float
    json_ratio: float
    deletion_ratio: float
    expiration_ratio: float
    sync_writes: bool
    value_size: int


class _VBucketStream:
    """One vbucket's stream: snapshots of document changes in seqno order, then its end."""

    def __init__(self, rng: random.Random, mix: _Mix, vbucket: int, stream_id: int | None,
                 items: int):
        self.rng, self.mix = rng, mix
        self.vbucket, self.stream_id = vbucket, stream_id
        self.opaque = _stream_opaque(vbucket)
        self.hdr: dict[str, Any] = {"vbucket": vbucket, "opaque": self.opaque,
                                    "stream_id": stream_id}
        self.remaining = items
        self.seqno = 0
        self.cas = (_CAS_EPOCH + rng.randrange(10**15)) & ~0xFFFF
        self.visible = self.completed = self.prepared = 0
        self.revs: dict[tuple[int, bytes], int] = {}
        self.live: list[tuple[int, bytes]] = []
        self.live_index: dict[tuple[int, bytes], int] = {}
        self.in_flight: set[tuple[int, bytes]] = set()
        #: unresolved prepares: [frames until due, key, seqno, rev, deleted, committed]
        self.pending: list[list] = []
        self.events = _collection_events() if mix.collections else []
        self.collections = [0]
        self.frames: list[SyntheticFrame] = []

    def build(self) -> list[SyntheticFrame]:
        first = True
        while self.remaining or self.events or self.pending:
            self._snapshot(first)
            first = False
        self._emit(stream_end(StreamEndStatus.OK, **self.hdr), Opcode.STREAM_END,
                   end_status=StreamEndStatus.OK)
        return self.frames

    # -- framing helpers

    def _fields(self, opcode: int, *, cas: int = 0, datatype: int = 0, **extra) -> dict:
        sid = self.stream_id
        fields = {"opcode": int(opcode),
                  "magic": int(Magic.ALT_CLIENT_REQUEST if sid else Magic.CLIENT_REQUEST),
                  "vbucket": self.vbucket, "opaque": self.opaque, "cas": cas,
                  "datatype": int(datatype)}
        if sid:
            fields["stream_id"] = sid
        fields.update((k, int(v) if isinstance(v, int) else v) for k, v in extra.items())
        return fields

    def _emit(self, data: bytes, opcode: int, *, body: bytes | None = None,
              xattrs: dict[str, str] | None = None, **fields) -> None:
        self.frames.append(SyntheticFrame(data, self._fields(opcode, **fields), body, xattrs))

    def _next_seqno(self) -> int:
        self.seqno += 1 if self.rng.random() > 0.03 else self.rng.randint(2, 4)
        return self.seqno

    def _next_cas(self) -> int:
        self.cas += self.rng.randint(1, 50_000) << 16
        return self.cas

    def _doc(self, key: tuple[int, bytes]) -> dict:
        cid, name = key
        out: dict[str, Any] = {"key": name}
        if self.mix.collections:
            out["collection_id"] = cid
        return out

    # -- snapshots

    def _snapshot(self, first: bool) -> None:
        rng, size = self.rng, self.mix.snapshot_size
        budget = rng.randint(max(1, size // 2), max(1, size + size // 2))
        start = self.seqno + 1
        body_start = len(self.frames)
        while budget and (self.remaining or self.events or self.pending):
            self._step()
            budget -= 1
        if self.mix.collections and rng.random() < _ADVANCE_RATIO:
            self.seqno += rng.randint(1, 3)
            self._emit(seqno_advanced(self.seqno, **self.hdr), Opcode.SEQNO_ADVANCED,
                       by_seqno=self.seqno)
        body = self.frames[body_start:]
        del self.frames[body_start:]
        if first:
            flags = SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT
        elif rng.random() < 0.2:
            flags = SnapshotFlag.MEMORY | SnapshotFlag.CHECKPOINT
        else:
            flags = SnapshotFlag.MEMORY
        self._marker(start, self.seqno, flags, disk=first)
        self.frames.extend(body)

    def _marker(self, start: int, end: int, flags: int, *, disk: bool) -> None:
        version = self.mix.marker_version
        fields: dict[str, Any] = {"snap_start": start, "snap_end": end, "snap_flags": flags}
        if version is None:
            data = snapshot_marker(start, end, flags, **self.hdr)
            self._emit(data, Opcode.SNAPSHOT_MARKER, **fields)
            return
        v2: dict[str, Any] = {"max_visible_seqno": self.visible,
              "high_completed_seqno": self.completed if disk else 0}
        if version == 2:
            v2["purge_seqno"] = 0
            v2["high_prepared_seqno"] = self.prepared if disk else 0
        data = snapshot_marker(start, end, flags, version=version, **v2, **self.hdr)
        value_at = len(data) - {0: 36, 1: 44, 2: 52}[version]
        if not flags & SnapshotFlag.DISK:        # meaningless without the Disk flag: no column
            v2 = {k: None if k.startswith("high_") else v for k, v in v2.items()}
        self._emit(data, Opcode.SNAPSHOT_MARKER, marker_version=version,
                   value=data[value_at:], **fields, **v2)

    def _step(self) -> None:
        """Emit one frame: a due collection event, a due commit/abort or a document change."""
        rng, mix = self.rng, self.mix
        if self.events and (not self.remaining or rng.random() < 0.5):
            self._system_event(self.events.pop(0))
            return
        due = [p for p in self.pending if p[0] <= 0 or not self.remaining]
        if due:
            self.pending.remove(due[0])
            self._resolve(*due[0][1:])
            return
        self.remaining -= 1
        for p in self.pending:
            p[0] -= 1
        if mix.sync_writes and rng.random() < _PREPARE_RATIO:
            self._prepare()
            return
        r = rng.random()
        if r < mix.deletion_ratio + mix.expiration_ratio and self.live:
            key = self._pick_live()
            if key is not None:
                expiry = r >= mix.deletion_ratio and mix.delete_times
                self._tombstone(key, expiry)
                return
        self._mutation()

    # -- keys and values

    def _pick_key(self) -> tuple[int, bytes]:
        """An existing document about half the time, else a new key; never one with a
        prepare in flight."""
        if self.live and self.rng.random() < 0.5:
            key = self._pick_live()
            if key is not None:
                return key
        cid = self.rng.choice(self.collections)
        while True:
            key = cid, b"%s::%016x" % (_KEY_PREFIX[cid], self.rng.getrandbits(64))
            if key not in self.revs and key not in self.in_flight:
                return key

    def _pick_live(self) -> tuple[int, bytes] | None:
        key = self.live[self.rng.randrange(len(self.live))]
        return None if key in self.in_flight else key

    def _set_live(self, key: tuple[int, bytes], alive: bool) -> None:
        if alive and key not in self.live_index:
            self.live_index[key] = len(self.live)
            self.live.append(key)
        elif not alive and key in self.live_index:
            at = self.live_index.pop(key)
            last = self.live.pop()
            if at < len(self.live):
                self.live[at] = last
                self.live_index[last] = at

    def _body(self, cid: int) -> tuple[bytes, int, int]:
        """(body, datatype, flags): a JSON document or a binary blob near ``value_size``."""
        rng = self.rng
        size = max(16, round(rng.gauss(self.mix.value_size, self.mix.value_size / 4)))
        if rng.random() >= self.mix.json_ratio:
            return rng.randbytes(size), 0, _BINARY_FLAGS
        doc = {"type": _KEY_PREFIX[cid].decode(), "id": rng.randrange(10**6),
               "name": f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS).title()}",
               "city": rng.choice(_CITIES), "rating": round(rng.uniform(0, 5), 1),
               "notes": ""}
        need = size - len(json.dumps(doc, separators=(",", ":")))
        words, length = [], 0
        while length < need:
            words.append(rng.choice(_WORDS))
            length += len(words[-1]) + 1
        doc["notes"] = " ".join(words)[:max(need, 0)]
        return json.dumps(doc, separators=(",", ":")).encode(), Datatype.JSON, _JSON_FLAGS

    def _xattrs(self, rev: int, cas: int) -> dict[str, str]:
        pairs = {"_sync": json.dumps({"rev": f"{rev}-{cas & 0xFFFFFFFF:08x}",
                                      "cas": f"0x{cas:016x}"}, separators=(",", ":"))}
        if self.rng.random() < 0.5:
            pairs["meta"] = json.dumps({"author": self.rng.choice(_CITIES).lower()},
                                       separators=(",", ":"))
        return pairs

    def _encode(self, body: bytes, datatype: int, rev: int,
                cas: int) -> tuple[bytes, int, dict[str, str] | None]:
        """Maybe prefix xattrs, then maybe Snappy-compress the whole value; returns the
        value, its datatype and the xattrs."""
        value, pairs = body, None
        if self.rng.random() < self.mix.xattr_ratio:
            pairs = self._xattrs(rev, cas)
            value = xattr_value(pairs, body)
            datatype |= Datatype.XATTR
        if value and self.rng.random() < self.mix.snappy_ratio:
            value = bytes(cramjam.snappy.compress_raw(value))
            datatype |= Datatype.SNAPPY
        return value, datatype, pairs

    # -- document changes

    def _mutation(self) -> None:
        key = self._pick_key()
        cid, name = key
        seqno, cas = self._next_seqno(), self._next_cas()
        rev = self.revs[key] = self.revs.get(key, 0) + 1
        body, datatype, flags = self._body(cid)
        value, datatype, pairs = self._encode(body, datatype, rev, cas)
        ttl = _MAX_TTL.get(cid)
        if ttl is None and self.rng.random() < 0.05:
            ttl = self.rng.choice((3600, 86400))
        expiry = cas // 10**9 + ttl if ttl else 0
        data = mutation(name, value, by_seqno=seqno, rev_seqno=rev, flags=flags,
                        expiration=expiry, datatype=datatype, cas=cas,
                        collection_id=cid if self.mix.collections else None, **self.hdr)
        self._emit(data, Opcode.MUTATION, cas=cas, datatype=datatype, **self._doc(key),
                   value=value, by_seqno=seqno, rev_seqno=rev, flags=flags,
                   expiration=expiry, lock_time=0, body=body, xattrs=pairs)
        self._set_live(key, True)
        self.visible = seqno

    def _tombstone(self, key: tuple[int, bytes], expiry: bool) -> None:
        """A deletion (V2 with delete times, else V1) or an expiration; a share of them keep
        system xattrs as their value."""
        cid, name = key
        seqno, cas = self._next_seqno(), self._next_cas()
        rev = self.revs[key] = self.revs[key] + 1
        value, datatype, pairs = b"", 0, None
        if self.rng.random() < self.mix.xattr_ratio:
            pairs = {"_sync": json.dumps({"rev": f"{rev}-deleted"})}
            value = xattr_blob(pairs)
            datatype = Datatype.XATTR
            if self.rng.random() < self.mix.snappy_ratio:
                value = bytes(cramjam.snappy.compress_raw(value))
                datatype |= Datatype.SNAPPY
        meta = {"by_seqno": seqno, "rev_seqno": rev}
        common: dict[str, Any] = {"datatype": datatype, "cas": cas,
                                  "collection_id": cid if self.mix.collections else None}
        delete_time = cas // 10**9
        if expiry:
            data = expiration(name, value, delete_time=delete_time, **meta, **common,
                              **self.hdr)
            opcode, meta["delete_time"] = Opcode.EXPIRATION, delete_time
        elif self.mix.delete_times:
            data = deletion(name, value, delete_time=delete_time, **meta, **common, **self.hdr)
            opcode, meta["delete_time"] = Opcode.DELETION, delete_time
        else:
            data = deletion(name, value, **meta, **common, **self.hdr)
            opcode = Opcode.DELETION
        self._emit(data, opcode, cas=cas, datatype=datatype, **self._doc(key), value=value,
                   body=b"", xattrs=pairs, **meta)
        self._set_live(key, False)
        self.visible = seqno

    def _prepare(self) -> None:
        rng = self.rng
        key = self._pick_key()
        cid, name = key
        seqno, cas = self._next_seqno(), self._next_cas()
        rev = self.revs.get(key, 0) + 1
        deleted = key in self.live_index and rng.random() < 0.1
        if deleted:
            value, datatype, flags, body, pairs = b"", 0, 0, b"", None
        else:
            body, datatype, flags = self._body(cid)
            value, datatype, pairs = self._encode(body, datatype, rev, cas)
        level = rng.choices((DurabilityLevel.MAJORITY,
                             DurabilityLevel.MAJORITY_AND_PERSIST_ON_MASTER,
                             DurabilityLevel.PERSIST_TO_MAJORITY), (8, 1, 1))[0]
        data = prepare(name, value, by_seqno=seqno, rev_seqno=rev, flags=flags,
                       deleted=deleted, durability_level=level, datatype=datatype, cas=cas,
                       collection_id=cid if self.mix.collections else None, **self.hdr)
        self._emit(data, Opcode.PREPARE, cas=cas, datatype=datatype, **self._doc(key),
                   value=value, by_seqno=seqno, rev_seqno=rev, flags=flags, expiration=0,
                   lock_time=0, deleted=int(deleted), durability_level=level, body=body,
                   xattrs=pairs)
        self.in_flight.add(key)
        self.prepared = seqno
        self.pending.append([rng.randint(0, 4), key, seqno, rev, deleted,
                             rng.random() < _COMMIT_RATIO])

    def _resolve(self, key: tuple[int, bytes], prepared: int, rev: int, deleted: bool,
                 committed: bool) -> None:
        """The commit or abort of an earlier prepare."""
        cid, name = key
        seqno = self._next_seqno()
        collection_id = cid if self.mix.collections else None
        if committed:
            data = commit(name, prepared_seqno=prepared, commit_seqno=seqno,
                          collection_id=collection_id, **self.hdr)
            self.revs[key] = rev
            self._set_live(key, not deleted)
            self.visible = seqno
        else:
            data = abort(name, prepared_seqno=prepared, abort_seqno=seqno,
                         collection_id=collection_id, **self.hdr)
        self._emit(data, Opcode.COMMIT if committed else Opcode.ABORT, **self._doc(key),
                   prepared_seqno=prepared, by_seqno=seqno)
        self.in_flight.discard(key)
        self.completed = prepared

    def _system_event(self, event: tuple) -> None:
        builder, name, kwargs = event
        seqno = self._next_seqno()
        data = builder(name, by_seqno=seqno, **kwargs, **self.hdr)
        event_id = (SystemEventId.CREATE_SCOPE if builder is create_scope
                    else SystemEventId.BEGIN_COLLECTION)
        version = int(kwargs.get("max_ttl") is not None)
        value_len = 12 if builder is create_scope else 16 + 4 * version
        self._emit(data, Opcode.SYSTEM_EVENT, key=name, value=data[-value_len:],
                   by_seqno=seqno, event_id=event_id, event_version=version)
        if "collection_id" in kwargs:
            self.collections.append(kwargs["collection_id"])
        self.visible = seqno


def _collection_events() -> list[tuple]:
    """(builder, name, keywords) of the scope and collection creations, in manifest order."""
    manifest, scope_id, scope_name = _SCOPE
    events: list[tuple[Callable[..., bytes], bytes, dict[str, Any]]] = [
        (create_scope, scope_name, {"manifest_uid": manifest, "scope_id": scope_id})]
    for manifest, scope_id, cid, name, max_ttl in _COLLECTIONS:
        events.append((create_collection, name, {"manifest_uid": manifest,
                                                 "scope_id": scope_id, "collection_id": cid,
                                                 "max_ttl": max_ttl}))
    return events


def _stream_opaque(vbucket: int) -> int:
    """The opaque a client picks for a vbucket's stream request (and its messages)."""
    return 0x10000 + vbucket


def _features(*, collections: bool, stream_ids: bool, sync_writes: bool) -> list[int]:
    """The HELLO features a client asks for (and the server grants)."""
    features = list(_BASE_FEATURES)
    if stream_ids:
        features.append(_FEATURE_ALT_REQUESTS)
    if sync_writes:
        features.append(_FEATURE_SYNC_REPLICATION)
    if collections:
        features.append(_FEATURE_COLLECTIONS)
    return features


def _controls(*, stream_ids: bool, sync_writes: bool, delete_times: bool,
              marker_version: int | None) -> list[tuple[bytes, bytes]]:
    """The DCP Controls a client sends, (key, value), in order."""
    controls = [(b"enable_noop", b"true"), (b"set_noop_interval", b"20"),
                (b"connection_buffer_size", str(_BUFFER_SIZE).encode())]
    if delete_times:
        controls.append((b"enable_expiry_opcode", b"true"))
    if stream_ids:
        controls.append((b"enable_stream_id", b"true"))
    if sync_writes:
        controls += [(b"enable_sync_writes", b"true"), (b"consumer_name", _CONNECTION)]
    if marker_version == 2:
        controls.append((b"max_marker_version", b"2.2"))
    return controls


def _handshake(rng: random.Random, vbuckets: list[int], counts: list[int], *,
               collections: bool, stream_ids: bool, sync_writes: bool, delete_times: bool,
               marker_version: int | None) -> list[SyntheticFrame]:
    """The server's replies to HELLO, DCP Open, the Controls and each Stream Request."""
    features = _features(collections=collections, stream_ids=stream_ids,
                         sync_writes=sync_writes)
    controls = _controls(stream_ids=stream_ids, sync_writes=sync_writes,
                         delete_times=delete_times, marker_version=marker_version)

    def reply(data: bytes, opcode: int, opaque: int, value: bytes = b"") -> SyntheticFrame:
        return SyntheticFrame(data, {"opcode": int(opcode),
                                     "magic": int(Magic.CLIENT_RESPONSE), "status": 0,
                                     "opaque": opaque, "cas": 0, "datatype": 0,
                                     "value": value})

    value = struct.pack(f">{len(features)}H", *features)
    out = [reply(hello_response(features, opaque=1), Opcode.HELLO, 1, value),
           reply(response(Opcode.OPEN, opaque=2), Opcode.OPEN, 2)]
    for opaque, _ in enumerate(controls, start=3):
        out.append(reply(response(Opcode.CONTROL, opaque=opaque), Opcode.CONTROL, opaque))
    for vbucket, count in zip(vbuckets, counts):
        entries = [(rng.getrandbits(64), 0)]
        for _ in range(rng.randint(0, 2)):
            entries.insert(0, (rng.getrandbits(64), rng.randint(entries[0][1], max(count, 1))))
        opaque = _stream_opaque(vbucket)
        data = failover_log_response(entries, opaque=opaque)
        out.append(reply(data, Opcode.STREAM_REQUEST, opaque, data[24:]))
    return out


def synthetic_frames(items: int, *, seed: int = 0, vbuckets: int = 4, collections: bool = True,
                     stream_ids: bool = False, handshake: bool = True, snapshot_size: int = 40,
                     marker_version: int | None = None, delete_times: bool = True,
                     snappy_ratio: float = 0.2, xattr_ratio: float = 0.1,
                     json_ratio: float = 0.6, deletion_ratio: float = 0.1,
                     expiration_ratio: float = 0.03, sync_writes: bool = False,
                     value_size: int = 150) -> list[SyntheticFrame]:
    """A realistic server-to-client DCP conversation, deterministic for a seed.

    ``items`` document changes (mutations, deletions, expirations, prepares) spread over
    ``vbuckets`` streams, each in snapshots of about ``snapshot_size`` frames, with the
    collection events, commits/aborts, seqno advances and stream ends around them; the
    streams are interleaved in random chunks with an occasional noop. Every frame comes
    with the fields a decoder must report for it.
    """
    if sync_writes and stream_ids:
        raise ValueError("sync writes cannot be combined with stream ids")
    if marker_version not in (None, 0, 1, 2):
        raise ValueError(f"snapshot marker version {marker_version} is not None, 0, 1 or 2")
    if not 1 <= vbuckets <= 1024:
        raise ValueError(f"{vbuckets} vbuckets outside 1..1024")
    rng = random.Random(seed)
    ids = sorted(rng.sample(range(1024), vbuckets))
    counts = [0] * vbuckets
    for _ in range(items):
        counts[rng.randrange(vbuckets)] += 1
    mix = _Mix(collections, marker_version, delete_times, max(1, snapshot_size), snappy_ratio,
               xattr_ratio, json_ratio, deletion_ratio, expiration_ratio, sync_writes,
               value_size)
    out = []
    if handshake:
        out += _handshake(rng, ids, counts, collections=collections, stream_ids=stream_ids,
                          sync_writes=sync_writes, delete_times=delete_times,
                          marker_version=marker_version)
    streams = deque(deque(_VBucketStream(rng, mix, vb, i + 1 if stream_ids else None,
                                         n).build())
                    for i, (vb, n) in enumerate(zip(ids, counts)))
    noop_opaque = 0x20000000
    while streams:
        stream = streams.popleft()
        for _ in range(min(len(stream), rng.randint(1, 2 * mix.snapshot_size))):
            out.append(stream.popleft())
        if stream:
            streams.append(stream)
        if rng.random() < _NOOP_RATIO:
            noop_opaque += 1
            out.append(SyntheticFrame(noop(opaque=noop_opaque), {
                "opcode": int(Opcode.NOOP), "magic": int(Magic.CLIENT_REQUEST),
                "opaque": noop_opaque, "cas": 0, "datatype": 0}))
    return out


def synthetic_stream(items: int, **kwargs) -> bytes:
    """The bytes of ``synthetic_frames(items, **kwargs)``, back to back."""
    return b"".join(f.data for f in synthetic_frames(items, **kwargs))


def synthetic_manifest() -> dict:
    """The names behind ``synthetic_frames(collections=True)``: ``scopes`` maps scope id to
    name, ``collections`` collection id to (scope id, name, max_ttl), both with the default
    scope and collection (id 0, ``_default``); ``uid`` is the last manifest uid."""
    manifest, scope_id, scope_name = _SCOPE
    collections: dict[int, tuple[int, bytes, int | None]] = {0: (0, b"_default", None)}
    for uid, sid, cid, name, max_ttl in _COLLECTIONS:
        collections[cid] = (sid, name, max_ttl)
        manifest = max(manifest, uid)
    return {"scopes": {0: b"_default", scope_id: scope_name}, "collections": collections,
            "uid": manifest}


def synthetic_conversation(items: int, **kwargs) -> tuple[list[SyntheticFrame],
                                                          list[SyntheticFrame]]:
    """Both directions of the conversation of ``synthetic_frames(items, **kwargs)``: the
    client's frames, then the server's (``synthetic_frames`` itself).

    The client sends HELLO, DCP Open, its Controls and a Stream Request per vbucket (the
    requests the server's handshake answers), then, while the stream arrives, a Noop
    response to each of the server's Noops and a Buffer Acknowledgement whenever half of
    its flow-control buffer has arrived.
    """
    options = {**(synthetic_frames.__kwdefaults__ or {}), **kwargs}
    if not options["handshake"]:
        raise ValueError("a conversation starts with the handshake")
    server = synthetic_frames(items, **kwargs)
    return _client_side(server, options), server


def _client_side(server: list[SyntheticFrame], options: dict) -> list[SyntheticFrame]:
    """The client's frames answering ``server`` (made with ``options``)."""
    def request(data: bytes, opcode: int, opaque: int, **fields) -> SyntheticFrame:
        return SyntheticFrame(data, {"opcode": int(opcode),
                                     "magic": int(Magic.CLIENT_REQUEST), "opaque": opaque,
                                     "cas": 0, "datatype": 0, **fields})

    features = _features(collections=options["collections"],
                         stream_ids=options["stream_ids"], sync_writes=options["sync_writes"])
    flags = OpenFlag.PRODUCER | OpenFlag.INCLUDE_XATTRS
    if options["delete_times"]:
        flags |= OpenFlag.INCLUDE_DELETE_TIMES
    out = [request(hello(features, agent=_CONNECTION, opaque=1), Opcode.HELLO, 1),
           request(open_request(_CONNECTION, int(flags), opaque=2), Opcode.OPEN, 2)]
    controls = _controls(stream_ids=options["stream_ids"], sync_writes=options["sync_writes"],
                         delete_times=options["delete_times"],
                         marker_version=options["marker_version"])
    for opaque, (key, value) in enumerate(controls, start=3):
        out.append(request(control(key, value, opaque=opaque), Opcode.CONTROL, opaque))
    sids = {f.fields["vbucket"]: f.fields.get("stream_id") for f in server
            if f.fields.get("vbucket") is not None and "by_seqno" in f.fields}
    for reply in server:
        if reply.fields["opcode"] == Opcode.STREAM_REQUEST:
            opaque = reply.fields["opaque"]
            vbucket = opaque - _stream_opaque(0)
            sid = sids.get(vbucket)
            value = json.dumps({"sid": sid}).encode() if sid else b""
            out.append(request(stream_request(vbucket=vbucket, opaque=opaque, value=value),
                               Opcode.STREAM_REQUEST, opaque, vbucket=vbucket))
    unacknowledged = 0
    for frame in server:
        if frame.fields["magic"] == Magic.CLIENT_RESPONSE:      # the handshake's replies
            continue
        unacknowledged += len(frame.data)
        if frame.fields["opcode"] == Opcode.NOOP:
            opaque = frame.fields["opaque"]
            out.append(SyntheticFrame(response(Opcode.NOOP, opaque=opaque), {
                "opcode": int(Opcode.NOOP), "magic": int(Magic.CLIENT_RESPONSE), "status": 0,
                "opaque": opaque, "cas": 0, "datatype": 0}))
        if unacknowledged >= _BUFFER_SIZE // 2:
            out.append(request(buffer_ack(unacknowledged, opaque=0), Opcode.BUFFER_ACK, 0))
            unacknowledged = 0
    return out
