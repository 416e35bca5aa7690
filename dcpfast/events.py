"""System events (0x5f) as rows, and a ``Manifest`` that names scopes and collections.

Versions 0 and 1 of an event value are fixed big-endian layouts (manifest uid, scope id,
then collection id); version 2 is a FlatBuffers table, read here with the ``flatbuffers``
runtime after every offset in it has been checked against the value, because the runtime
itself trusts its input.
"""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
from flatbuffers import number_types as fbn
from flatbuffers.table import Table

from . import protocol as P
from .arrays import unique as distinct
from .batch import FrameBatch, kinds_of, require_columns, view_of
from .errors import SkippedRegion, checked, skipped_regions, text, with_skipped

__all__ = ["NEEDED", "Manifest", "event_schema", "system_events"]

_SYSTEM_EVENT_KIND = P.KIND_INDEX["system_event"]
#: Columns of the batch that ``system_events`` reads.
NEEDED = ("offset", "vbucket", "stream_id", "by_seqno", "event_id", "event_version",
          "key_offset", "key_len", "value_offset", "value_len")

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_FB_FLAGS = {"u64": fbn.Uint64Flags, "u32": fbn.Uint32Flags, "bool": fbn.BoolFlags}
_FB_WIDTH = {"u64": 8, "u32": 4, "bool": 1, "string": 4}
_FB_DEFAULT = {"u64": 0, "u32": 0, "bool": False, "string": None}
_FIXED = {key: struct.Struct(fmt) for key, fmt in P.SYSTEM_EVENT_FIXED.items()}
_COLLECTION_EVENTS = frozenset({P.SystemEventId.BEGIN_COLLECTION,
                                P.SystemEventId.END_COLLECTION,
                                P.SystemEventId.FLUSH_COLLECTION,
                                P.SystemEventId.MODIFY_COLLECTION})


def event_schema() -> pa.Schema:
    """Arrow schema of ``system_events``: one row per system event.

    ``index`` is the frame's row in the batch; ``collection_id`` is null for scope
    events, ``name`` where the event carries none, ``max_ttl`` where the collection has
    none. ``history``, ``default_collection_mvs``, ``metered`` and ``flush_uid`` come
    from version-2 collection events, ``system`` (a system collection or scope) from
    version-2 drops; they are null elsewhere.
    """
    return pa.schema([
        ("index", pa.int64()), ("offset", pa.uint64()), ("vbucket", pa.uint16()),
        ("stream_id", pa.uint16()), ("by_seqno", pa.uint64()), ("event", pa.string()),
        ("event_id", pa.uint32()), ("version", pa.uint8()), ("manifest_uid", pa.uint64()),
        ("scope_id", pa.uint32()), ("collection_id", pa.uint32()), ("name", pa.string()),
        ("max_ttl", pa.uint32()), ("history", pa.bool_()),
        ("default_collection_mvs", pa.uint64()), ("metered", pa.bool_()),
        ("flush_uid", pa.uint64()), ("system", pa.bool_()),
    ])


class MalformedEvent(ValueError):
    """A system-event payload that does not decode; carries the reason."""


def system_events(batch: FrameBatch) -> pa.Table:
    """One row per system-event frame of ``batch`` as a ``pyarrow.Table`` (``event_schema``).

    A payload that does not decode (a version 0/1 value of the wrong size, a FlatBuffers
    value with an offset outside it, a name that is not UTF-8, an unknown event id or
    version) follows ``batch.mode``: "strict" raises ``DcpFormatError`` at the frame's
    offset; "skip" leaves the row out and lists the frame in the table's metadata
    (``dcpfast.skipped_regions(table)``); the batch is left as it is. The batch must hold
    the columns in ``NEEDED``.
    """
    table, damaged = read_events(batch)
    return with_skipped(table, checked(batch.mode, damaged))


def read_events(batch: FrameBatch) -> tuple[pa.Table, list[SkippedRegion]]:
    """``system_events(batch)`` without its metadata, and the frames whose event did not
    decode (left out of the table), in stream order, whatever the batch's mode."""
    require_columns(batch, NEEDED, "system_events")
    schema = event_schema()
    rows: dict[str, list] = {name: [] for name in schema.names}
    index = np.flatnonzero(kinds_of(batch) == _SYSTEM_EVENT_KIND)
    columns = {name: batch[name][index].tolist() for name in NEEDED}
    columns["index"] = index.tolist()
    damaged = []
    for values in zip(*columns.values()):
        frame = dict(zip(columns, values))
        try:
            fields = _decode(batch, frame)
        except MalformedEvent as exc:
            offset = frame["offset"]
            damaged.append(SkippedRegion(
                offset, frame["value_offset"] + frame["value_len"] - offset, str(exc)))
            continue
        for name, column in rows.items():
            column.append(fields.get(name))
    return pa.table({name: pa.array(column, type=schema.field(name).type)
                     for name, column in rows.items()}, schema=schema), damaged


def _bytes(batch, start, length) -> bytes:
    start -= batch.base_offset
    return bytes(view_of(batch)[start:start + length])


def _decode(batch, frame) -> dict:
    """The row of one system-event frame (its scanned fields); raises ``MalformedEvent``."""
    row = {"index": frame["index"], "offset": frame["offset"], "vbucket": frame["vbucket"],
           "stream_id": frame["stream_id"] or None, "by_seqno": frame["by_seqno"]}
    row.update(event_fields(frame["event_id"], frame["event_version"],
                            _bytes(batch, frame["key_offset"], frame["key_len"]),
                            _bytes(batch, frame["value_offset"], frame["value_len"])))
    return row


def event_fields(event_id: int, version: int, key: bytes, value: bytes) -> dict:
    """The ``event_schema`` fields an event's id, version, key and value give (``event``,
    ``event_id``, ``version``, ``manifest_uid``, ``scope_id``, ``collection_id``, ``name``
    and those of version 2); raises ``MalformedEvent`` when they do not decode."""
    row: dict = {"event_id": event_id, "version": version}
    try:
        event = P.SystemEventId(event_id)
    except ValueError:
        raise MalformedEvent(text("event_id", id=event_id)) from None
    row["event"] = P.SYSTEM_EVENT_NAMES[event]
    if version == P.SYSTEM_EVENT_FLATBUFFERS and event in P.SYSTEM_EVENT_TABLES:
        row.update(_flatbuffers_fields(event, value))
    elif (event, version) in _FIXED:
        row.update(_fixed_fields(event, version, value))
    else:
        raise MalformedEvent(text("event_version", event=row["event"], version=version))
    if row.get("name") is None and key:
        row["name"] = key
    if row.get("name") is not None:
        try:
            row["name"] = row["name"].decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedEvent(text("event_name", event=row["event"])) from None
    return row


def _fixed_fields(event, version, value: bytes) -> dict:
    layout = _FIXED[event, version]
    if len(value) != layout.size:
        raise MalformedEvent(text("event_size", event=P.SYSTEM_EVENT_NAMES[event],
                              version=version, size=len(value), must=layout.size))
    values = layout.unpack(value)
    out = {"manifest_uid": values[0], "scope_id": values[1]}
    if event in _COLLECTION_EVENTS:
        out["collection_id"] = values[2]
    if len(values) == 4:
        out["max_ttl"] = values[3]
    return out


def _flatbuffers_fields(event, value: bytes) -> dict:
    t = _read_table(value, P.SYSTEM_EVENT_TABLES[event])
    out = {"manifest_uid": t["uid"], "scope_id": t["scopeId"], "name": t.get("name")}
    if "collectionId" in t:
        out["collection_id"] = t["collectionId"]
    if "systemCollection" in t or "systemScope" in t:
        out["system"] = t.get("systemCollection", t.get("systemScope"))
    if "ttlValid" in t:
        out.update(max_ttl=t["maxTtl"] if t["ttlValid"] else None, history=t["history"],
                   default_collection_mvs=t["defaultCollectionMVS"], metered=t["metered"],
                   flush_uid=t["flushUid"])
    return out


def _read_table(buf: bytes, fields) -> dict:
    """The fields of the root table of FlatBuffers ``buf``, every offset bounds-checked.

    Absent scalars read as their default (0, false), an absent string as None.
    """
    size = len(buf)
    if size < 8:
        raise MalformedEvent(text("fb_short", size=size))
    root = _U32.unpack_from(buf, 0)[0]
    if not 4 <= root <= size - 4:
        raise MalformedEvent(text("fb_root", root=root, size=size))
    vtable = root - _I32.unpack_from(buf, root)[0]
    if not 0 <= vtable <= size - 4:
        raise MalformedEvent(text("fb_vtable", vtable=vtable, size=size))
    vtable_size = _U16.unpack_from(buf, vtable)[0]
    table_size = _U16.unpack_from(buf, vtable + 2)[0]
    if vtable_size < 4 or vtable_size % 2 or vtable + vtable_size > size:
        raise MalformedEvent(text("fb_vtable_size", vtable_size=vtable_size, vtable=vtable,
                              size=size))
    if table_size < 4 or root + table_size > size:
        raise MalformedEvent(text("fb_table_size", table_size=table_size, root=root, size=size))
    table = Table(buf, root)
    out = {}
    for slot, (name, kind) in enumerate(fields):
        field = table.Offset(4 + 2 * slot)   # 0 when the vtable does not reach the slot
        if field == 0:
            out[name] = _FB_DEFAULT[kind]
            continue
        if field < 4 or field + _FB_WIDTH[kind] > table_size:
            raise MalformedEvent(text("fb_field", name=name, field=field, table_size=table_size))
        pos = root + field
        if kind == "string":
            start = pos + _U32.unpack_from(buf, pos)[0]
            if start > size - 4:
                raise MalformedEvent(text("fb_string_at", name=name, start=start, size=size))
            length = _U32.unpack_from(buf, start)[0]
            if length > size - start - 5 or buf[start + 4 + length] != 0:
                raise MalformedEvent(text("fb_string_overrun", name=name, length=length,
                                      start=start, size=size))
            out[name] = table.String(pos)
        else:
            out[name] = table.Get(_FB_FLAGS[kind], pos)
    return out


class Manifest:
    """Scope and collection names of a bucket, learnt from system events in stream order.

    Starts with the default scope and collection (id 0, ``_default``). Collection ids are
    never reused, so names stay known after a drop. One manifest serves every vbucket
    and every batch of a stream (``iter_batches``); it pickles.
    """

    def __init__(self):
        #: scope id -> scope name
        self.scopes: dict[int, str] = {P.DEFAULT_SCOPE_ID: P.DEFAULT_NAME}
        #: collection id -> collection name
        self.collections: dict[int, str] = {P.DEFAULT_COLLECTION_ID: P.DEFAULT_NAME}
        #: collection id -> id of its scope
        self.collection_scopes: dict[int, int] = {P.DEFAULT_COLLECTION_ID: P.DEFAULT_SCOPE_ID}
        #: highest manifest uid seen in an event
        self.uid = 0

    def __repr__(self):
        return (f"<Manifest uid={self.uid} {len(self.scopes)} scopes, "
                f"{len(self.collections)} collections>")

    def __eq__(self, other):
        if not isinstance(other, Manifest):
            return NotImplemented
        return vars(self) == vars(other)

    def update(self, source: FrameBatch | pa.Table) -> Manifest:
        """Learn names from a ``FrameBatch`` or a ``system_events`` table; returns self."""
        events = system_events(source) if isinstance(source, FrameBatch) else source
        for row in events.select(["event", "manifest_uid", "scope_id", "collection_id",
                                  "name"]).to_pylist():
            self.uid = max(self.uid, row["manifest_uid"])
            name, cid = row["name"], row["collection_id"]
            if cid is not None and row["event"] != "drop_collection":
                self.collection_scopes[cid] = row["scope_id"]
                if name is not None:
                    self.collections[cid] = name
            elif row["event"] == "create_scope" and name is not None:
                self.scopes[row["scope_id"]] = name
        return self

    def label(self, batch: FrameBatch) -> pa.Table:
        """``batch.to_arrow()`` plus ``scope`` and ``collection`` name columns.

        Learns from the batch's own events first, so a one-pass loop over
        ``iter_batches`` names every document that follows its collection's creation
        (and, ids never being reused, one that precedes it in the same batch). Frames
        that are not document changes get nulls, and so do collection ids the manifest
        has not seen. On streams without collections every document is in the default
        collection. An event that does not decode follows ``batch.mode`` as in
        ``system_events``: in skip mode the table's metadata lists it.
        """
        events = system_events(batch)
        self.update(events)
        if batch.collections and "collection_id" not in batch:
            raise ValueError("with_names needs the collection_id column")
        documents = P.DOCUMENT_CHANGE_KINDS[kinds_of(batch)]
        if batch.collections:
            ids = batch["collection_id"][documents]
        else:
            ids = np.full(int(documents.sum()), P.DEFAULT_COLLECTION_ID, np.uint32)
        unique, inverse = distinct(ids, inverse=True)
        picks = np.zeros(len(batch), np.int64)
        picks[documents] = inverse
        picks = pa.array(picks, mask=~documents)
        scope_ids = [self.collection_scopes.get(c) for c in unique.tolist()]
        collections = pa.array([self.collections.get(c) for c in unique.tolist()], pa.string())
        scopes = pa.array([None if s is None else self.scopes.get(s) for s in scope_ids],
                          pa.string())
        table = batch.to_arrow()
        table = table.append_column("scope", scopes.take(picks))
        return with_skipped(table.append_column("collection", collections.take(picks)),
                            skipped_regions(events))
