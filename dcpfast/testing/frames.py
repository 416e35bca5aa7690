"""DCP frame builders: every frame kind written out byte by byte, for tests and benchmarks.

This is dcpfast's encoder and the test-suite's independent oracle for the decoder: every
layout is written out here with ``struct`` (big-endian) straight from the wire reference
instead of being derived from the decoder's tables, so a mistake in one is not silently
shared by the other. Only the opcode, magic and flag numbers come from ``protocol``.

Every request builder accepts the header keywords ``vbucket``, ``opaque``, ``cas``,
``stream_id`` and ``magic``; response builders accept ``status``, ``opaque``, ``cas``
and ``framing``.
"""

from __future__ import annotations

import struct
from typing import Any

import flatbuffers

from ..protocol import (
    Datatype,
    DurabilityLevel,
    Magic,
    Opcode,
    SnapshotFlag,
    Status,
    StreamEndStatus,
    SystemEventId,
)

__all__ = [
    "abort", "add_stream", "buffer_ack", "cache_transfer", "cache_transfer_end",
    "close_stream", "commit", "control", "create_collection", "create_scope", "deletion",
    "drop_collection", "drop_scope", "expiration", "failover_log_response", "frame",
    "frame_info", "get_failover_log", "hello", "hello_response", "leb128", "modify_collection",
    "mutation", "noop", "open", "oso_snapshot", "prepare", "response", "rollback_response",
    "seqno_acknowledged", "seqno_advanced", "set_vbucket_state", "snapshot_marker",
    "stream_end", "stream_request", "system_event", "xattr_blob", "xattr_value",
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
                      collection_id: int, max_ttl: int | None = None, version: int | None = None,
                      history: bool = False, default_collection_mvs: int = 0,
                      metered: bool = False, flush_uid: int = 0, force_defaults: bool = False,
                      **hdr) -> bytes:
    """Begin-collection event; key = collection name.

    Version 0: manifest u64, scope u32, collection u32; version 1 adds max_ttl u32;
    ``version`` None picks 0 or 1 by ``max_ttl``. Version 2: a FlatBuffers ``Collection``
    with the other keywords too (``force_defaults`` also writes fields at their default).
    """
    v2: dict[str, Any] = dict(history=history, default_collection_mvs=default_collection_mvs,
              metered=metered, flush_uid=flush_uid, force_defaults=force_defaults)
    if version is None:
        version = 0 if max_ttl is None else 1
    if version == 2:
        value = _collection_table(name, manifest_uid, scope_id, collection_id, max_ttl, **v2)
    elif version in (0, 1):
        if (max_ttl is not None) != (version == 1):
            raise ValueError("a version 1 create-collection event carries max_ttl, "
                             "version 0 does not")
        _no_v2(**v2)
        value = struct.pack(">QII", manifest_uid, scope_id, collection_id)
        if max_ttl is not None:
            value += struct.pack(">I", max_ttl)
    else:
        raise ValueError(f"create-collection event version {version} is not 0, 1 or 2")
    return system_event(SystemEventId.BEGIN_COLLECTION, by_seqno=by_seqno, version=version,
                        key=name, value=value, **hdr)


def modify_collection(name: bytes, *, by_seqno: int, manifest_uid: int, scope_id: int,
                      collection_id: int, max_ttl: int | None = None, history: bool = False,
                      default_collection_mvs: int = 0, metered: bool = False,
                      flush_uid: int = 0, force_defaults: bool = False, **hdr) -> bytes:
    """Modify-collection event (7.2+, version 2 only): a FlatBuffers ``Collection``."""
    value = _collection_table(name, manifest_uid, scope_id, collection_id, max_ttl,
                              history=history, default_collection_mvs=default_collection_mvs,
                              metered=metered, flush_uid=flush_uid,
                              force_defaults=force_defaults)
    return system_event(SystemEventId.MODIFY_COLLECTION, by_seqno=by_seqno, version=2,
                        key=name, value=value, **hdr)


def drop_collection(*, by_seqno: int, manifest_uid: int, scope_id: int, collection_id: int,
                    version: int = 0, system: bool = False, force_defaults: bool = False,
                    **hdr) -> bytes:
    """End-collection event; no key. Version 0: manifest u64, scope u32, collection u32.
    Version 2: FlatBuffers ``DroppedCollection {uid, scopeId, collectionId,
    systemCollection}``."""
    if version == 0:
        _no_v2(system=system, force_defaults=force_defaults)
        value = struct.pack(">QII", manifest_uid, scope_id, collection_id)
    elif version == 2:
        b = _table_builder(force_defaults)
        b.StartObject(4)
        b.PrependUint64Slot(0, manifest_uid, 0)
        b.PrependUint32Slot(1, scope_id, 0)
        b.PrependUint32Slot(2, collection_id, 0)
        b.PrependBoolSlot(3, system, False)
        value = _finish(b)
    else:
        raise ValueError(f"drop-collection event version {version} is not 0 or 2")
    return system_event(SystemEventId.END_COLLECTION, by_seqno=by_seqno, version=version,
                        value=value, **hdr)


def create_scope(name: bytes, *, by_seqno: int, manifest_uid: int, scope_id: int,
                 version: int = 0, force_defaults: bool = False, **hdr) -> bytes:
    """Create-scope event; key = scope name. Version 0: manifest u64, scope u32.
    Version 2: FlatBuffers ``Scope {uid, scopeId, name}``."""
    if version == 0:
        _no_v2(force_defaults=force_defaults)
        value = struct.pack(">QI", manifest_uid, scope_id)
    elif version == 2:
        b = _table_builder(force_defaults)
        name_at = b.CreateString(name)
        b.StartObject(3)
        b.PrependUint64Slot(0, manifest_uid, 0)
        b.PrependUint32Slot(1, scope_id, 0)
        b.PrependUOffsetTRelativeSlot(2, name_at, 0)
        value = _finish(b)
    else:
        raise ValueError(f"create-scope event version {version} is not 0 or 2")
    return system_event(SystemEventId.CREATE_SCOPE, by_seqno=by_seqno, version=version,
                        key=name, value=value, **hdr)


def drop_scope(*, by_seqno: int, manifest_uid: int, scope_id: int, version: int = 0,
               system: bool = False, force_defaults: bool = False, **hdr) -> bytes:
    """Drop-scope event; no key. Version 0: manifest u64, scope u32. Version 2:
    FlatBuffers ``DroppedScope {uid, scopeId, systemScope}``."""
    if version == 0:
        _no_v2(system=system, force_defaults=force_defaults)
        value = struct.pack(">QI", manifest_uid, scope_id)
    elif version == 2:
        b = _table_builder(force_defaults)
        b.StartObject(3)
        b.PrependUint64Slot(0, manifest_uid, 0)
        b.PrependUint32Slot(1, scope_id, 0)
        b.PrependBoolSlot(2, system, False)
        value = _finish(b)
    else:
        raise ValueError(f"drop-scope event version {version} is not 0 or 2")
    return system_event(SystemEventId.DROP_SCOPE, by_seqno=by_seqno, version=version,
                        value=value, **hdr)


def _no_v2(**given) -> None:
    """Refuse version-2 keywords given to a version 0/1 event."""
    stray = [k for k, v in given.items() if v]
    if stray:
        raise ValueError(f"{', '.join(stray)} exist only in version-2 events")


def _table_builder(force_defaults: bool) -> flatbuffers.Builder:
    """A FlatBuffers builder; ``force_defaults`` writes fields that equal their default
    (the server leaves them out)."""
    b = flatbuffers.Builder(64)
    b.ForceDefaults(force_defaults)
    return b


def _finish(b: flatbuffers.Builder) -> bytes:
    b.Finish(b.EndObject())
    return bytes(b.Output())


def _collection_table(name: bytes, manifest_uid: int, scope_id: int, collection_id: int,
                      max_ttl: int | None, *, history: bool, default_collection_mvs: int,
                      metered: bool, flush_uid: int, force_defaults: bool) -> bytes:
    """FlatBuffers ``Collection {uid, scopeId, collectionId, ttlValid, maxTtl, name,
    history, defaultCollectionMVS, metered, flushUid}`` (field ids 0-9)."""
    b = _table_builder(force_defaults)
    name_at = b.CreateString(name)
    b.StartObject(10)
    b.PrependUint64Slot(0, manifest_uid, 0)
    b.PrependUint32Slot(1, scope_id, 0)
    b.PrependUint32Slot(2, collection_id, 0)
    b.PrependBoolSlot(3, max_ttl is not None, False)
    b.PrependUint32Slot(4, max_ttl or 0, 0)
    b.PrependUOffsetTRelativeSlot(5, name_at, 0)
    b.PrependBoolSlot(6, history, False)
    b.PrependUint64Slot(7, default_collection_mvs, 0)
    b.PrependBoolSlot(8, metered, False)
    b.PrependUint64Slot(9, flush_uid, 0)
    return _finish(b)


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
