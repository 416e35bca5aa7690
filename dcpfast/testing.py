"""DCP frame builders and synthetic DCP conversations, for tests and benchmarks.

This is dcpfast's encoder and the test-suite's independent oracle for the decoder: every
layout is written out here with ``struct`` (big-endian) straight from the wire reference
instead of being derived from the decoder's tables, so a mistake in one is not silently
shared by the other. Only the opcode, magic and flag numbers come from ``protocol``.

Every request builder accepts the header keywords ``vbucket``, ``opaque``, ``cas``,
``stream_id`` and ``magic``; response builders accept ``status``, ``opaque``, ``cas``
and ``framing``.
"""

from __future__ import annotations

import json
import random
import struct
from collections import deque
from dataclasses import dataclass

import cramjam

from .protocol import (Datatype, DurabilityLevel, Magic, Opcode, SnapshotFlag, Status,
                       StreamEndStatus, SystemEventId)

__all__ = [
    "SyntheticFrame", "abort", "add_stream", "buffer_ack", "cache_transfer",
    "cache_transfer_end", "close_stream", "commit", "control", "create_collection",
    "create_scope", "deletion", "drop_collection", "drop_scope", "expiration",
    "failover_log_response", "frame", "frame_info", "get_failover_log", "hello",
    "hello_response", "leb128", "mutation", "noop", "open", "oso_snapshot", "prepare",
    "response", "rollback_response", "seqno_acknowledged", "seqno_advanced",
    "set_vbucket_state", "snapshot_marker", "stream_end", "stream_request",
    "synthetic_frames", "synthetic_stream", "system_event", "xattr_blob", "xattr_value",
]

_CLASSIC_HEADER = struct.Struct(">BBHBBHIIQ")    # key length u16
_ALT_HEADER = struct.Struct(">BBBBBBHIIQ")       # framing-extras length u8, key length u8
_RESPONSE_MAGICS = frozenset({Magic.CLIENT_RESPONSE, Magic.ALT_CLIENT_RESPONSE,
                              Magic.SERVER_RESPONSE})
_ALT_MAGICS = frozenset({Magic.ALT_CLIENT_REQUEST, Magic.ALT_CLIENT_RESPONSE})
_STREAM_ID_INFO = 2
_FRAME_INFO_MAX = 15 + 0xFF


# -- low level ---------------------------------------------------------------------------


def leb128(cid: int) -> bytes:
    """Canonical unsigned LEB128 of a u32 collection id (the key prefix)."""
    if not 0 <= cid <= 0xFFFFFFFF:
        raise ValueError(f"collection id {cid} is not a u32")
    out = bytearray()
    while True:
        byte, cid = cid & 0x7F, cid >> 7
        out.append(byte | 0x80 if cid else byte)
        if not cid:
            return bytes(out)


def frame_info(id: int, data: bytes) -> bytes:
    """One framing-extras entry; an id or length of 15 or more takes an escape byte."""
    size = len(data)
    if not 0 <= id <= _FRAME_INFO_MAX or size > _FRAME_INFO_MAX:
        raise ValueError(f"frame info id {id} / length {size} beyond {_FRAME_INFO_MAX}")
    out = bytearray([min(id, 15) << 4 | min(size, 15)])
    if id >= 15:
        out.append(id - 15)
    if size >= 15:
        out.append(size - 15)
    return bytes(out) + data


def frame(opcode: int, *, magic: int | None = None, extras: bytes = b"", key: bytes = b"",
          value: bytes = b"", framing: bytes = b"", datatype: int = 0, vbucket: int = 0,
          status: int | None = None, opaque: int = 0, cas: int = 0) -> bytes:
    """Any frame: the 24-byte header, then framing extras, extras, key and value.

    ``magic`` defaults to 0x80, or 0x08 when there are framing extras. Bytes 6-7 hold
    ``status`` for response magics and ``vbucket`` otherwise.
    """
    if magic is None:
        magic = Magic.ALT_CLIENT_REQUEST if framing else Magic.CLIENT_REQUEST
    if magic in _RESPONSE_MAGICS:
        if vbucket:
            raise ValueError("a response carries a status, not a vbucket")
        word = status or 0
    else:
        if status is not None:
            raise ValueError("only a response carries a status")
        word = vbucket
    if len(extras) > 0xFF:
        raise ValueError(f"extras of {len(extras)} bytes exceed 255")
    body = len(framing) + len(extras) + len(key) + len(value)
    if magic in _ALT_MAGICS:
        if len(key) > 0xFF:
            raise ValueError(f"key of {len(key)} bytes is too long for magic {magic:#04x}")
        if len(framing) > 0xFF:
            raise ValueError(f"framing extras of {len(framing)} bytes exceed 255")
        head = _ALT_HEADER.pack(magic, opcode, len(framing), len(key), len(extras), datatype,
                                word, body, opaque, cas)
    else:
        if framing:
            raise ValueError(f"magic {magic:#04x} cannot carry framing extras")
        if len(key) > 0xFFFF:
            raise ValueError(f"key of {len(key)} bytes is too long for magic {magic:#04x}")
        head = _CLASSIC_HEADER.pack(magic, opcode, len(key), len(extras), datatype, word,
                                    body, opaque, cas)
    return b"".join((head, framing, extras, key, value))


def response(opcode: int, *, status: int = 0, extras: bytes = b"", key: bytes = b"",
             value: bytes = b"", datatype: int = 0, opaque: int = 0, cas: int = 0,
             framing: bytes = b"") -> bytes:
    """A response: magic 0x81, or 0x18 when it carries framing extras."""
    magic = Magic.ALT_CLIENT_RESPONSE if framing else Magic.CLIENT_RESPONSE
    return frame(opcode, magic=magic, extras=extras, key=key, value=value, framing=framing,
                 datatype=datatype, status=status, opaque=opaque, cas=cas)


def _request(opcode: int, extras: bytes = b"", key: bytes = b"", value: bytes = b"",
             datatype: int = 0, *, vbucket: int = 0, opaque: int = 0, cas: int = 0,
             stream_id: int | None = None, magic: int | None = None) -> bytes:
    """A request; a stream id becomes the ``22 hh ll`` frame info of a 0x08 frame."""
    framing = b""
    if stream_id is not None:
        if not 1 <= stream_id <= 0xFFFF:
            raise ValueError(f"stream id {stream_id} outside 1..65535")
        framing = frame_info(_STREAM_ID_INFO, struct.pack(">H", stream_id))
    return frame(opcode, magic=magic, extras=extras, key=key, value=value, framing=framing,
                 datatype=datatype, vbucket=vbucket, opaque=opaque, cas=cas)


def _doc_key(key: bytes, collection_id: int | None) -> bytes:
    """The wire key: the logical key, behind a LEB128 collection id on collection streams."""
    return key if collection_id is None else leb128(collection_id) + key


# -- connection and stream control -------------------------------------------------------


def open(name: bytes, flags: int = 0, value: bytes = b"", **hdr) -> bytes:
    """0x50 DCP Open: reserved u32, flags u32; key = connection name, value JSON."""
    return _request(Opcode.OPEN, struct.pack(">II", 0, flags), name, value,
                    Datatype.JSON if value else 0, **hdr)


def add_stream(flags: int = 0, **hdr) -> bytes:
    """0x51 Add Stream: stream flags u32."""
    return _request(Opcode.ADD_STREAM, struct.pack(">I", flags), **hdr)


def close_stream(**hdr) -> bytes:
    """0x52 Close Stream: header only."""
    return _request(Opcode.CLOSE_STREAM, **hdr)


def get_failover_log(**hdr) -> bytes:
    """0x54 Get Failover Log: header only."""
    return _request(Opcode.GET_FAILOVER_LOG, **hdr)


def stream_request(*, flags: int = 0, start: int = 0, end: int = 0xFFFFFFFFFFFFFFFF,
                   vbucket_uuid: int = 0, snap_start: int | None = None,
                   snap_end: int | None = None, value: bytes = b"", **hdr) -> bytes:
    """0x53 Stream Request (48-byte extras); the snapshot range defaults to ``start``.

    The JSON value travels with datatype 0, as the server requires.
    """
    snap_start = start if snap_start is None else snap_start
    snap_end = start if snap_end is None else snap_end
    extras = struct.pack(">IIQQQQQ", flags, 0, start, end, vbucket_uuid, snap_start, snap_end)
    return _request(Opcode.STREAM_REQUEST, extras, value=value, **hdr)


def stream_end(status: int = StreamEndStatus.OK, **hdr) -> bytes:
    """0x55 Stream End: end status u32."""
    return _request(Opcode.STREAM_END, struct.pack(">I", status), **hdr)


def snapshot_marker(start: int, end: int, flags: int = SnapshotFlag.MEMORY, *,
                    version: int | None = None, max_visible_seqno: int = 0,
                    high_completed_seqno: int = 0, purge_seqno: int = 0,
                    high_prepared_seqno: int | None = None, timestamp: int = 0,
                    **hdr) -> bytes:
    """0x56 Snapshot Marker.

    ``version`` None gives V1 (20-byte extras). Otherwise the extras are the version byte
    and the value is 36 bytes (0), 44 with the timestamp (1), or for 2: 44 with the purge
    seqno, or 52 when ``high_prepared_seqno`` is given too.
    """
    unused = {
        None: ("max_visible_seqno", "high_completed_seqno", "purge_seqno",
               "high_prepared_seqno", "timestamp"),
        0: ("purge_seqno", "high_prepared_seqno", "timestamp"),
        1: ("purge_seqno", "high_prepared_seqno"),
        2: ("timestamp",),
    }
    if version not in unused:
        raise ValueError(f"snapshot marker version {version} is not one of None, 0, 1, 2")
    given = {"max_visible_seqno": max_visible_seqno, "high_completed_seqno":
             high_completed_seqno, "purge_seqno": purge_seqno, "high_prepared_seqno":
             high_prepared_seqno or 0, "timestamp": timestamp}
    stray = [name for name in unused[version] if given[name]]
    if stray:
        raise ValueError(f"marker version {version} has no {', '.join(stray)}")
    if version is None:
        return _request(Opcode.SNAPSHOT_MARKER, struct.pack(">QQI", start, end, flags), **hdr)
    value = struct.pack(">QQIQQ", start, end, flags, max_visible_seqno, high_completed_seqno)
    if version == 1:
        value += struct.pack(">Q", timestamp)
    elif version == 2:
        value += struct.pack(">Q", purge_seqno)
        if high_prepared_seqno is not None:
            value += struct.pack(">Q", high_prepared_seqno)
    return _request(Opcode.SNAPSHOT_MARKER, struct.pack(">B", version), value=value, **hdr)


# -- document changes --------------------------------------------------------------------


def mutation(key: bytes, value: bytes = b"", *, by_seqno: int, rev_seqno: int = 1,
             flags: int = 0, expiration: int = 0, lock_time: int = 0, nru: int = 0,
             datatype: int = 0, collection_id: int | None = None, **hdr) -> bytes:
    """0x57 Mutation: by, rev u64; flags, expiration, lock u32; nmeta u16 (0); nru u8."""
    extras = struct.pack(">QQIIIHB", by_seqno, rev_seqno, flags, expiration, lock_time, 0, nru)
    return _request(Opcode.MUTATION, extras, _doc_key(key, collection_id), value, datatype,
                    **hdr)


def deletion(key: bytes, value: bytes = b"", *, by_seqno: int, rev_seqno: int = 1,
             delete_time: int | None = None, datatype: int = 0,
             collection_id: int | None = None, **hdr) -> bytes:
    """0x58 Deletion: V1 (by, rev, nmeta u16) or, with ``delete_time``, V2 (by, rev,
    delete_time u32, unused u8)."""
    if delete_time is None:
        extras = struct.pack(">QQH", by_seqno, rev_seqno, 0)
    else:
        extras = struct.pack(">QQIB", by_seqno, rev_seqno, delete_time, 0)
    return _request(Opcode.DELETION, extras, _doc_key(key, collection_id), value, datatype,
                    **hdr)


def expiration(key: bytes, value: bytes = b"", *, by_seqno: int, rev_seqno: int = 1,
               delete_time: int = 0, datatype: int = 0, collection_id: int | None = None,
               **hdr) -> bytes:
    """0x59 Expiration: by, rev u64; delete_time u32."""
    extras = struct.pack(">QQI", by_seqno, rev_seqno, delete_time)
    return _request(Opcode.EXPIRATION, extras, _doc_key(key, collection_id), value, datatype,
                    **hdr)


def prepare(key: bytes, value: bytes = b"", *, by_seqno: int, rev_seqno: int = 1,
            flags: int = 0, expiration: int = 0, lock_time: int = 0, nru: int = 0,
            deleted: bool = False, durability_level: int = DurabilityLevel.MAJORITY,
            datatype: int = 0, collection_id: int | None = None, **hdr) -> bytes:
    """0x60 Prepare: as a mutation up to lock_time, then nru, deleted, durability (u8)."""
    extras = struct.pack(">QQIIIBBB", by_seqno, rev_seqno, flags, expiration, lock_time, nru,
                         int(deleted), durability_level)
    return _request(Opcode.PREPARE, extras, _doc_key(key, collection_id), value, datatype,
                    **hdr)


def commit(key: bytes, *, prepared_seqno: int, commit_seqno: int,
           collection_id: int | None = None, **hdr) -> bytes:
    """0x62 Commit: prepared seqno, commit seqno (u64)."""
    return _request(Opcode.COMMIT, struct.pack(">QQ", prepared_seqno, commit_seqno),
                    _doc_key(key, collection_id), **hdr)


def abort(key: bytes, *, prepared_seqno: int, abort_seqno: int,
          collection_id: int | None = None, **hdr) -> bytes:
    """0x63 Abort: prepared seqno, abort seqno (u64)."""
    return _request(Opcode.ABORT, struct.pack(">QQ", prepared_seqno, abort_seqno),
                    _doc_key(key, collection_id), **hdr)


# -- small fixed-extras messages ---------------------------------------------------------


def seqno_acknowledged(prepared_seqno: int, **hdr) -> bytes:
    """0x61 Seqno Acknowledged: prepared seqno u64."""
    return _request(Opcode.SEQNO_ACKNOWLEDGED, struct.pack(">Q", prepared_seqno), **hdr)


def seqno_advanced(seqno: int, **hdr) -> bytes:
    """0x64 Seqno Advanced: seqno u64."""
    return _request(Opcode.SEQNO_ADVANCED, struct.pack(">Q", seqno), **hdr)


def oso_snapshot(flags: int, **hdr) -> bytes:
    """0x65 OSO Snapshot: flags u32 (0x01 start, 0x02 end)."""
    return _request(Opcode.OSO_SNAPSHOT, struct.pack(">I", flags), **hdr)


def set_vbucket_state(state: int, **hdr) -> bytes:
    """0x5b Set VBucket State: state u8."""
    return _request(Opcode.SET_VBUCKET_STATE, struct.pack(">B", state), **hdr)


def noop(**hdr) -> bytes:
    """0x5c Noop: header only."""
    return _request(Opcode.NOOP, **hdr)


def buffer_ack(nbytes: int, **hdr) -> bytes:
    """0x5d Buffer Acknowledgement: acknowledged bytes u32."""
    return _request(Opcode.BUFFER_ACK, struct.pack(">I", nbytes), **hdr)


def control(key: bytes, value: bytes, **hdr) -> bytes:
    """0x5e Control: key = setting name, value = setting."""
    return _request(Opcode.CONTROL, key=key, value=value, **hdr)


# -- system events -----------------------------------------------------------------------


def system_event(event_id: int, *, by_seqno: int, version: int = 0, key: bytes = b"",
                 value: bytes = b"", **hdr) -> bytes:
    """0x5f System Event: by_seqno u64, event id u32, version u8; key is a name."""
    extras = struct.pack(">QIB", by_seqno, event_id, version)
    return _request(Opcode.SYSTEM_EVENT, extras, key, value, **hdr)


def create_collection(name: bytes, *, by_seqno: int, manifest_uid: int, scope_id: int,
                      collection_id: int, max_ttl: int | None = None, **hdr) -> bytes:
    """Begin-collection event: manifest u64, scope u32, collection u32 (version 0), plus
    max_ttl u32 (version 1)."""
    value = struct.pack(">QII", manifest_uid, scope_id, collection_id)
    if max_ttl is not None:
        value += struct.pack(">I", max_ttl)
    return system_event(SystemEventId.BEGIN_COLLECTION, by_seqno=by_seqno,
                        version=0 if max_ttl is None else 1, key=name, value=value, **hdr)


def drop_collection(*, by_seqno: int, manifest_uid: int, scope_id: int, collection_id: int,
                    **hdr) -> bytes:
    """End-collection event: manifest u64, scope u32, collection u32; no key."""
    return system_event(SystemEventId.END_COLLECTION, by_seqno=by_seqno,
                        value=struct.pack(">QII", manifest_uid, scope_id, collection_id), **hdr)


def create_scope(name: bytes, *, by_seqno: int, manifest_uid: int, scope_id: int,
                 **hdr) -> bytes:
    """Create-scope event: manifest u64, scope u32; key = scope name."""
    return system_event(SystemEventId.CREATE_SCOPE, by_seqno=by_seqno, key=name,
                        value=struct.pack(">QI", manifest_uid, scope_id), **hdr)


def drop_scope(*, by_seqno: int, manifest_uid: int, scope_id: int, **hdr) -> bytes:
    """Drop-scope event: manifest u64, scope u32; no key."""
    return system_event(SystemEventId.DROP_SCOPE, by_seqno=by_seqno,
                        value=struct.pack(">QI", manifest_uid, scope_id), **hdr)


# -- cache transfer ----------------------------------------------------------------------

_CACHE_RECORD_DEFAULTS = {"cas": 0, "rev_seqno": 1, "flags": 0, "expiration": 0,
                          "value": b"", "datatype": 0, "cache_hint": 0}


def cache_transfer(records: list[dict], **hdr) -> bytes:
    """0x66 Cache Transfer: back-to-back records in the value.

    A record is cas, by_seqno, rev_seqno u64; value_len, flags, expiration u32; key_len
    u16; datatype, cache_hint u8; key (the wire key, collection-prefixed); value. Each
    dict needs ``by_seqno`` and ``key``; the other fields default to 0 (rev_seqno 1).
    """
    out = []
    for record in records:
        unknown = set(record) - set(_CACHE_RECORD_DEFAULTS) - {"by_seqno", "key"}
        if unknown:
            raise ValueError(f"unknown cache-transfer record fields {sorted(unknown)}")
        r = {**_CACHE_RECORD_DEFAULTS, **record}
        out.append(struct.pack(">QQQIIIHBB", r["cas"], r["by_seqno"], r["rev_seqno"],
                               len(r["value"]), r["flags"], r["expiration"], len(r["key"]),
                               r["datatype"], r["cache_hint"]))
        out.append(r["key"])
        out.append(r["value"])
    return _request(Opcode.CACHE_TRANSFER, value=b"".join(out), **hdr)


def cache_transfer_end(**hdr) -> bytes:
    """0x67 Cache Transfer End: header only."""
    return _request(Opcode.CACHE_TRANSFER_END, **hdr)


# -- handshake and responses -------------------------------------------------------------


def hello(features: list[int], agent: bytes = b"dcpfast", **hdr) -> bytes:
    """0x1f HELLO request: key = agent name, value = requested features (u16 each)."""
    return _request(Opcode.HELLO, key=agent,
                    value=struct.pack(f">{len(features)}H", *features), **hdr)


def hello_response(features: list[int], **hdr) -> bytes:
    """0x1f HELLO response: value = accepted features (u16 each)."""
    return response(Opcode.HELLO, value=struct.pack(f">{len(features)}H", *features), **hdr)


def failover_log_response(entries: list[tuple[int, int]], *,
                          opcode: int = Opcode.STREAM_REQUEST, **hdr) -> bytes:
    """Failover log (u64 vbucket uuid, u64 seqno per entry, newest first) as the value of
    a Stream Request or Get Failover Log response."""
    value = b"".join(struct.pack(">QQ", uuid, seqno) for uuid, seqno in entries)
    return response(opcode, value=value, **hdr)


def rollback_response(seqno: int, **hdr) -> bytes:
    """Stream Request response with status Rollback and the u64 rollback seqno."""
    return response(Opcode.STREAM_REQUEST, status=Status.ROLLBACK,
                    value=struct.pack(">Q", seqno), **hdr)


# -- values ------------------------------------------------------------------------------


def xattr_blob(pairs: dict[str, str]) -> bytes:
    """XATTR section: total u32, then per pair length u32, key NUL value NUL."""
    body = b""
    for key, value in pairs.items():
        pair = key.encode() + b"\0" + value.encode() + b"\0"
        body += struct.pack(">I", len(pair)) + pair
    return struct.pack(">I", len(body)) + body


def xattr_value(pairs: dict[str, str], body: bytes) -> bytes:
    """A value with datatype XATTR: the xattr section, then the document body."""
    return xattr_blob(pairs) + body


# -- synthetic conversations -------------------------------------------------------------


@dataclass
class SyntheticFrame:
    """One generated frame and the values a decoder must report for it.

    ``fields`` holds only what this frame type carries: ``key`` is the logical key
    (document changes and system events), ``value`` the value section (document changes,
    system events, V2.x markers and responses), ``collection_id`` is set for document
    changes on collection streams and ``stream_id`` only when the frame has one.
    """

    data: bytes
    fields: dict


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
        self.hdr = {"vbucket": vbucket, "opaque": self.opaque, "stream_id": stream_id}
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

    def _emit(self, data: bytes, opcode: int, **fields) -> None:
        self.frames.append(SyntheticFrame(data, self._fields(opcode, **fields)))

    def _next_seqno(self) -> int:
        self.seqno += 1 if self.rng.random() > 0.03 else self.rng.randint(2, 4)
        return self.seqno

    def _next_cas(self) -> int:
        self.cas += self.rng.randint(1, 50_000) << 16
        return self.cas

    def _doc(self, key: tuple[int, bytes]) -> dict:
        cid, name = key
        out = {"key": name}
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
        fields = {"snap_start": start, "snap_end": end, "snap_flags": flags}
        if version is None:
            data = snapshot_marker(start, end, flags, **self.hdr)
            self._emit(data, Opcode.SNAPSHOT_MARKER, **fields)
            return
        v2 = {"max_visible_seqno": self.visible,
              "high_completed_seqno": self.completed if disk else 0}
        if version == 2:
            v2["purge_seqno"] = 0
            v2["high_prepared_seqno"] = self.prepared if disk else 0
        data = snapshot_marker(start, end, flags, version=version, **v2, **self.hdr)
        value_at = len(data) - {0: 36, 1: 44, 2: 52}[version]
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

    def _encode(self, body: bytes, datatype: int, rev: int, cas: int) -> tuple[bytes, int]:
        """Maybe prefix xattrs, then maybe Snappy-compress the whole value."""
        value = body
        if self.rng.random() < self.mix.xattr_ratio:
            value = xattr_value(self._xattrs(rev, cas), body)
            datatype |= Datatype.XATTR
        if value and self.rng.random() < self.mix.snappy_ratio:
            value = bytes(cramjam.snappy.compress_raw(value))
            datatype |= Datatype.SNAPPY
        return value, datatype

    # -- document changes

    def _mutation(self) -> None:
        key = self._pick_key()
        cid, name = key
        seqno, cas = self._next_seqno(), self._next_cas()
        rev = self.revs[key] = self.revs.get(key, 0) + 1
        body, datatype, flags = self._body(cid)
        value, datatype = self._encode(body, datatype, rev, cas)
        ttl = _MAX_TTL.get(cid)
        if ttl is None and self.rng.random() < 0.05:
            ttl = self.rng.choice((3600, 86400))
        expiry = cas // 10**9 + ttl if ttl else 0
        data = mutation(name, value, by_seqno=seqno, rev_seqno=rev, flags=flags,
                        expiration=expiry, datatype=datatype, cas=cas,
                        collection_id=cid if self.mix.collections else None, **self.hdr)
        self._emit(data, Opcode.MUTATION, cas=cas, datatype=datatype, **self._doc(key),
                   value=value, by_seqno=seqno, rev_seqno=rev, flags=flags,
                   expiration=expiry, lock_time=0)
        self._set_live(key, True)
        self.visible = seqno

    def _tombstone(self, key: tuple[int, bytes], expiry: bool) -> None:
        """A deletion (V2 with delete times, else V1) or an expiration; a share of them keep
        system xattrs as their value."""
        cid, name = key
        seqno, cas = self._next_seqno(), self._next_cas()
        rev = self.revs[key] = self.revs[key] + 1
        value, datatype = b"", 0
        if self.rng.random() < self.mix.xattr_ratio:
            value = xattr_blob({"_sync": json.dumps({"rev": f"{rev}-deleted"})})
            datatype = Datatype.XATTR
            if self.rng.random() < self.mix.snappy_ratio:
                value = bytes(cramjam.snappy.compress_raw(value))
                datatype |= Datatype.SNAPPY
        meta = {"by_seqno": seqno, "rev_seqno": rev}
        common = {"datatype": datatype, "cas": cas,
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
                   **meta)
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
            value, datatype, flags = b"", 0, 0
        else:
            body, datatype, flags = self._body(cid)
            value, datatype = self._encode(body, datatype, rev, cas)
        level = rng.choices((DurabilityLevel.MAJORITY,
                             DurabilityLevel.MAJORITY_AND_PERSIST_ON_MASTER,
                             DurabilityLevel.PERSIST_TO_MAJORITY), (8, 1, 1))[0]
        data = prepare(name, value, by_seqno=seqno, rev_seqno=rev, flags=flags,
                       deleted=deleted, durability_level=level, datatype=datatype, cas=cas,
                       collection_id=cid if self.mix.collections else None, **self.hdr)
        self._emit(data, Opcode.PREPARE, cas=cas, datatype=datatype, **self._doc(key),
                   value=value, by_seqno=seqno, rev_seqno=rev, flags=flags, expiration=0,
                   lock_time=0, durability_level=level)
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
    events = [(create_scope, scope_name, {"manifest_uid": manifest, "scope_id": scope_id})]
    for manifest, scope_id, cid, name, max_ttl in _COLLECTIONS:
        events.append((create_collection, name, {"manifest_uid": manifest,
                                                 "scope_id": scope_id, "collection_id": cid,
                                                 "max_ttl": max_ttl}))
    return events


def _stream_opaque(vbucket: int) -> int:
    """The opaque a client picks for a vbucket's stream request (and its messages)."""
    return 0x10000 + vbucket


def _handshake(rng: random.Random, vbuckets: list[int], counts: list[int], *,
               collections: bool, stream_ids: bool, sync_writes: bool, delete_times: bool,
               marker_version: int | None) -> list[SyntheticFrame]:
    """The server's replies to HELLO, DCP Open, the Controls and each Stream Request."""
    features = list(_BASE_FEATURES)
    if stream_ids:
        features.append(_FEATURE_ALT_REQUESTS)
    if sync_writes:
        features.append(_FEATURE_SYNC_REPLICATION)
    if collections:
        features.append(_FEATURE_COLLECTIONS)
    controls = ["enable_noop", "set_noop_interval", "connection_buffer_size"]
    if delete_times:
        controls.append("enable_expiry_opcode")
    if stream_ids:
        controls.append("enable_stream_id")
    if sync_writes:
        controls += ["enable_sync_writes", "consumer_name"]
    if marker_version == 2:
        controls.append("max_marker_version")

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
                "opcode": int(Opcode.NOOP), "magic": int(Magic.CLIENT_REQUEST), "vbucket": 0,
                "opaque": noop_opaque, "cas": 0, "datatype": 0}))
    return out


def synthetic_stream(items: int, **kwargs) -> bytes:
    """The bytes of ``synthetic_frames(items, **kwargs)``, back to back."""
    return b"".join(f.data for f in synthetic_frames(items, **kwargs))
