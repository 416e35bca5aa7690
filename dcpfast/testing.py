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
import flatbuffers

from .protocol import (Datatype, DurabilityLevel, Magic, Opcode, SnapshotFlag, Status,
                       StreamEndStatus, SystemEventId)

__all__ = [
    "SyntheticFrame", "abort", "add_stream", "buffer_ack", "cache_transfer",
    "cache_transfer_end", "close_stream", "commit", "control", "create_collection",
    "create_scope", "deletion", "drop_collection", "drop_scope", "expiration",
    "failover_log_response", "frame", "frame_info", "get_failover_log", "hello",
    "hello_response", "leb128", "modify_collection", "mutation", "noop", "open",
    "oso_snapshot", "prepare", "response", "rollback_response", "seqno_acknowledged",
    "seqno_advanced", "set_vbucket_state", "snapshot_marker", "stream_end",
    "stream_request", "synthetic_frames", "synthetic_manifest", "synthetic_stream",
    "system_event", "xattr_blob", "xattr_value",
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
    v2 = dict(history=history, default_collection_mvs=default_collection_mvs,
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


# -- synthetic conversations -------------------------------------------------------------


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
                   lock_time=0, durability_level=level, body=body, xattrs=pairs)
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


def synthetic_manifest() -> dict:
    """The names behind ``synthetic_frames(collections=True)``: ``scopes`` maps scope id to
    name, ``collections`` collection id to (scope id, name, max_ttl), both with the default
    scope and collection (id 0, ``_default``); ``uid`` is the last manifest uid."""
    manifest, scope_id, scope_name = _SCOPE
    collections = {0: (0, b"_default", None)}
    for uid, sid, cid, name, max_ttl in _COLLECTIONS:
        collections[cid] = (sid, name, max_ttl)
        manifest = max(manifest, uid)
    return {"scopes": {0: b"_default", scope_id: scope_name}, "collections": collections,
            "uid": manifest}


# -- packet captures -----------------------------------------------------------------------
# TCP/IP packets and pcap/pcapng files written byte by byte from the format references, for
# the capture reader's tests and benchmark.

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_LINK_ETHERNET, _LINK_RAW, _LINK_LOOP, _LINK_SLL, _LINK_SLL2 = 1, 101, 108, 113, 276
_LINK_NULL, _LINK_IPV4, _LINK_IPV6 = 0, 228, 229
_VLAN_TPIDS = (0x8100, 0x88A8)


def _address(text: str) -> bytes:
    import ipaddress
    return ipaddress.ip_address(text).packed


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ip_packet(src: str, dst: str, payload: bytes, *, protocol: int = 6, ttl: int = 64,
              ident: int = 0, fragment: int = 0, ipv6_extensions: int = 0) -> bytes:
    """An IPv4 or IPv6 packet (by the address family) around ``payload``.

    ``fragment`` sets the IPv4 flags/fragment-offset word (IPv6: adds a fragment header
    when non-zero); ``ipv6_extensions`` puts that many hop-by-hop/destination option
    headers (8 bytes each) before the payload.
    """
    s, d = _address(src), _address(dst)
    if len(s) != len(d):
        raise ValueError("source and destination of different IP versions")
    if len(s) == 4:
        header = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, fragment,
                             ttl, protocol, 0, s, d)
        header = header[:10] + struct.pack(">H", _checksum(header)) + header[12:]
        return header + payload
    chain = []
    for i in range(ipv6_extensions):
        chain.append(0 if i == 0 else 60)              # hop-by-hop first, then dest options
    if fragment:
        chain.append(44)
    body, nxt = payload, protocol
    for kind in reversed(chain):
        if kind == 44:
            body = struct.pack(">BBHI", nxt, 0, fragment, ident) + body
        else:
            body = struct.pack(">BB", nxt, 0) + b"\x01\x04\0\0\0\0" + body     # PadN option
        nxt = kind
    return struct.pack(">IHBB16s16s", 0x60000000, len(body), nxt, ttl, s, d) + body


def tcp_packet(src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes = b"", *,
               flags: int = TCP_ACK | TCP_PSH, ack: int = 0, window: int = 65535,
               options: bytes = b"", **ip) -> bytes:
    """An IP packet holding one TCP segment (``options`` padded to 4 bytes)."""
    options += b"\x01" * (-len(options) % 4)           # NOP padding
    offset = (20 + len(options)) // 4
    header = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                         offset << 4, flags, window, 0, 0) + options
    return ip_packet(src, dst, header + payload, protocol=6, **ip)


def link_frame(packet: bytes, link: int = _LINK_ETHERNET, *, vlans=(),
               loopback_order: str = "<") -> bytes:
    """``packet`` (an IP packet) framed for a pcap link type.

    Ethernet takes 802.1Q/802.1ad ``vlans`` (ids, outermost first); SLL and SLL2 are
    Linux cooked captures; NULL writes the address family in ``loopback_order``.
    """
    version = packet[0] >> 4
    ethertype = 0x0800 if version == 4 else 0x86DD
    if link == _LINK_ETHERNET:
        tags = b"".join(struct.pack(">HH", _VLAN_TPIDS[0] if i == len(vlans) - 1
                                    else _VLAN_TPIDS[1], vid)
                        for i, vid in enumerate(vlans))
        return (b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + tags
                + struct.pack(">H", ethertype) + packet)
    if vlans:
        raise ValueError("VLAN tags are written on Ethernet frames only")
    if link == _LINK_SLL:
        return struct.pack(">HHH8sH", 0, 1, 6, b"\x02\0\0\0\0\x01\0\0", ethertype) + packet
    if link == _LINK_SLL2:
        return struct.pack(">HHIHBB8s", ethertype, 0, 2, 1, 0, 6,
                           b"\x02\0\0\0\0\x01\0\0") + packet
    if link == _LINK_NULL:
        return struct.pack(loopback_order + "I", 2 if version == 4 else 30) + packet
    if link == _LINK_LOOP:
        return struct.pack(">I", 2 if version == 4 else 24) + packet
    if link in (_LINK_RAW, _LINK_IPV4, _LINK_IPV6):
        return packet
    raise ValueError(f"no writer for link type {link}")


def pcap_file(packets, *, link: int = _LINK_ETHERNET, nanoseconds: bool = False,
              big_endian: bool = False, snaplen: int = 262144) -> bytes:
    """A classic pcap file of ``(timestamp_ns, frame)`` packets.

    Frames longer than ``snaplen`` are cut to it (their original length is kept).
    """
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link)]
    for ts, frame in packets:
        sec, ns = divmod(ts, 10**9)
        captured = frame[:snaplen]
        out.append(struct.pack(order + "IIII", sec, ns if nanoseconds else ns // 1000,
                               len(captured), len(frame)))
        out.append(captured)
    return b"".join(out)


def _block(order: str, kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    size = 12 + len(body)
    return struct.pack(order + "II", kind, size) + body + struct.pack(order + "I", size)


def _option(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def pcapng_section(packets, *, links=(_LINK_ETHERNET,), big_endian: bool = False,
                   tsresol: int | None = None, tsoffset: int = 0,
                   extra_blocks: bool = False, simple: bool = False) -> bytes:
    """One pcapng section: a header, an interface per link type, then the packets.

    ``packets`` are ``(timestamp_ns, frame)`` or ``(timestamp_ns, frame, interface)``.
    ``tsresol`` is the if_tsresol option byte (None: the 10**-6 default, no option);
    ``tsoffset`` the if_tsoffset seconds subtracted from every timestamp written.
    ``extra_blocks`` adds a name resolution block, interface statistics and a custom
    block between packets; ``simple`` writes Simple Packet Blocks (no timestamps).
    """
    order = ">" if big_endian else "<"
    out = [_block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
                  + _option(order, 3, b"dcpfast.testing") + _option(order, 0, b""))]
    code = 6 if tsresol is None else tsresol
    for link in links:
        options = b""
        if tsresol is not None:
            options += _option(order, 9, bytes([tsresol]))
        if tsoffset:
            options += _option(order, 14, struct.pack(order + "q", tsoffset))
        options += _option(order, 2, b"eth0") + _option(order, 0, b"")
        out.append(_block(order, 1, struct.pack(order + "HHI", link, 0, 262144) + options))
    for i, packet in enumerate(packets):
        ts, frame, iface = packet if len(packet) == 3 else (*packet, 0)
        ts -= tsoffset * 10**9
        if code & 0x80:
            units = (ts << (code & 0x7F)) // 10**9
        else:
            units = ts * 10**code // 10**9
        units &= 2**64 - 1                             # as a 64-bit field wraps
        if simple:
            out.append(_block(order, 3, struct.pack(order + "I", len(frame)) + frame))
        else:
            out.append(_block(order, 6, struct.pack(order + "IIIII", iface, units >> 32,
                                                    units & 0xFFFFFFFF, len(frame),
                                                    len(frame)) + frame
                              + _option(order, 1, b"packet comment") + _option(order, 0, b"")))
        if extra_blocks and i % 3 == 0:
            out.append(_block(order, 4, struct.pack(order + "HH4s", 1, 4 + 9, b"\x0a\0\0\x02")
                              + b"couchbase" + b"\0" * 3 + struct.pack(order + "HH", 0, 0)))
            out.append(_block(order, 5, struct.pack(order + "III", 0, 0, 0)
                              + _option(order, 0, b"")))
            out.append(_block(order, 0x00000BAD, struct.pack(order + "I", 32473) + b"opaque"))
    return b"".join(out)


def pcapng_file(packets, **kwargs) -> bytes:
    """A pcapng file of one section (see ``pcapng_section``); join sections for more."""
    return pcapng_section(packets, **kwargs)


@dataclass
class TcpSegment:
    """One TCP segment of a test conversation: who sent it, where its payload sits in
    that direction's byte stream (0 = the first byte after the SYN), and its flags."""

    client: bool
    offset: int
    payload: bytes = b""
    flags: int = TCP_ACK | TCP_PSH


def tcp_segments(data: bytes, sizes=(1448,), *, client: bool = True, start: int = 0):
    """Cut ``data`` into segments of the given sizes (repeated cyclically)."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        size = max(1, sizes[i % len(sizes)])
        out.append(TcpSegment(client, start + pos, data[pos:pos + size]))
        pos += size
        i += 1
    return out


def tcp_conversation(client_bytes: bytes, server_bytes: bytes, *, sizes=(1448,),
                     handshake: bool = True, fin: bool = True, reorder: float = 0.0,
                     retransmit: float = 0.0, drop=(), seed: int = 0):
    """The segments of one TCP connection carrying ``client_bytes`` and ``server_bytes``.

    Each direction is cut by ``sizes``; the two directions interleave at random. The
    handshake's SYNs and the closing FINs come first and last. ``reorder``: chance that a
    data segment is sent after up to three later ones; ``retransmit``: chance that a
    segment is sent again later, cut differently (overlapping its neighbours);
    ``drop``: ``(client, index)`` pairs of data segments that never reach the capture.
    """
    rng = random.Random(seed)
    queues = [tcp_segments(client_bytes, sizes, client=True),
              tcp_segments(server_bytes, sizes, client=False)]
    dropped = set(drop)
    flows = [[(seg, (seg.client, i) in dropped) for i, seg in enumerate(q)] for q in queues]
    data, streams = [], {True: client_bytes, False: server_bytes}
    while flows[0] or flows[1]:
        side = flows[0] if flows[0] and (not flows[1] or rng.random() < 0.5) else flows[1]
        for _ in range(rng.randint(1, 4)):
            if side:
                data.append(side.pop(0))
    out, later = [], []
    for seg, lost in data:
        if not lost:
            out.append(seg)
        later = [(wait - 1, copy) for wait, copy in later]
        out += [copy for wait, copy in later if wait <= 0]
        later = [(wait, copy) for wait, copy in later if wait > 0]
        if retransmit and rng.random() < retransmit:
            stream = streams[seg.client]
            lo = max(0, seg.offset - rng.randint(0, 300))
            hi = min(len(stream), seg.offset + len(seg.payload) + rng.randint(0, 300))
            later.append((rng.randint(0, 3), TcpSegment(seg.client, lo, stream[lo:hi])))
    out += [copy for _, copy in later]
    if reorder:
        for i in range(len(out) - 1):
            if rng.random() < reorder:
                j = min(len(out) - 1, i + rng.randint(1, 3))
                out[i], out[j] = out[j], out[i]
    head = [TcpSegment(True, -1, b"", TCP_SYN), TcpSegment(False, -1, b"", TCP_SYN | TCP_ACK),
            TcpSegment(True, 0, b"", TCP_ACK)] if handshake else []
    tail = [TcpSegment(True, len(client_bytes), b"", TCP_FIN | TCP_ACK),
            TcpSegment(False, len(server_bytes), b"", TCP_FIN | TCP_ACK)] if fin else []
    return head + out + tail


def tcp_packets(segments, *, client=("10.0.0.1", 50123), server=("10.0.0.2", 11210),
                isn=(0xFFFFF000, 1000), link: int = _LINK_ETHERNET, vlans=(),
                start_ns: int = 1_700_000_000 * 10**9, step_ns: int = 1000, **ip):
    """``(timestamp_ns, frame)`` packets of ``segments`` between two endpoints.

    Sequence numbers are ``isn + 1 + offset`` (the client's default ISN makes them wrap
    past 2**32 after 4 KiB); timestamps advance by ``step_ns`` per packet.
    """
    out = []
    for i, seg in enumerate(segments):
        (src, sport), (dst, dport) = (client, server) if seg.client else (server, client)
        seq = isn[0 if seg.client else 1] + 1 + seg.offset
        ack = isn[1 if seg.client else 0] + 1
        packet = tcp_packet(src, dst, sport, dport, seq, seg.payload, flags=seg.flags, ack=ack,
                            **ip)
        out.append((start_ns + i * step_ns, link_frame(packet, link, vlans=vlans)))
    return out


__all__ += ["TCP_ACK", "TCP_FIN", "TCP_PSH", "TCP_RST", "TCP_SYN", "TcpSegment", "ip_packet",
            "link_frame", "pcap_file", "pcapng_file", "pcapng_section", "tcp_conversation",
            "tcp_packet", "tcp_packets", "tcp_segments"]
