"""The change feed in the shapes its consumers read (``formatted``):

- ``debezium``: Debezium's change event envelope, a ``key`` (scope, collection, id) and a
  ``value`` (``before``, ``after``, ``op``, ``ts_ms``, ``source``); ``op`` is ``c``
  (created), ``u`` (changed), ``d`` (deleted, expired, cleared, or taken back by a
  rollback with nothing before it) or ``r`` (sent by a backfill from disk);
- ``couchbase-kafka``: the fields of the Couchbase Kafka connector's default record
  (``com.couchbase.DcpMessage``), its names and types, with the ``scope`` and
  ``collection`` its record headers carry;
- ``auto-cdc``: a table for Spark's Auto CDC: the keys, a ``sequence`` that orders each
  document's changes (across rollbacks too), a ``deleted`` flag and the document.

``changes`` is the feed as ``dcpfast.changes`` returns it. A document's content is JSON
where its datatype says so, else base64 (``content_encoding``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import __version__
from ..protocol import Datatype, SnapshotFlag
from .encoding import base64_text

FORMATS = ("changes", "debezium", "couchbase-kafka", "auto-cdc")
#: The Couchbase Kafka connector's record (``com.couchbase.DcpMessage``), and the record
#: headers dcpfast adds to it.
KAFKA_SCHEMA = pa.schema([
    pa.field("event", pa.string(), False), pa.field("partition", pa.int16(), False),
    pa.field("key", pa.string(), False), pa.field("cas", pa.int64(), False),
    pa.field("bySeqno", pa.int64(), False), pa.field("revSeqno", pa.int64(), False),
    ("expiration", pa.int32()), ("flags", pa.int32()), ("lockTime", pa.int32()),
    ("content", pa.binary()), ("bucket", pa.string()), ("vBucketUuid", pa.int64()),
    ("scope", pa.string()), ("collection", pa.string())])
#: A document in a Debezium event's ``before`` and ``after``.
DOCUMENT = pa.struct([("id", pa.string()), ("content", pa.string()),
                       ("content_encoding", pa.string()),
                       ("xattrs", pa.map_(pa.string(), pa.string())),
                       ("cas", pa.int64()), ("rev_seqno", pa.int64()),
                       ("expiration", pa.int32()), ("flags", pa.int32()),
                       ("datatype", pa.int16())])
_SOURCE = pa.struct([("connector", pa.string()), ("version", pa.string()),
                     ("bucket", pa.string()), ("scope", pa.string()),
                     ("collection", pa.string()), ("vbucket", pa.int32()),
                     ("vbucket_uuid", pa.int64()), ("seqno", pa.int64()),
                     ("epoch", pa.int32()), ("rev_seqno", pa.int64()), ("cas", pa.int64()),
                     ("ts_ms", pa.int64()), ("snapshot_start", pa.int64()),
                     ("snapshot_end", pa.int64()), ("snapshot", pa.string())])
DEBEZIUM_SCHEMA = pa.schema([
    ("key", pa.struct([("scope", pa.string()), ("collection", pa.string()),
                       ("id", pa.string())])),
    ("value", pa.struct([("before", DOCUMENT), ("after", DOCUMENT), ("op", pa.string()),
                         ("ts_ms", pa.int64()), ("source", _SOURCE)]))])


def formatted(table: pa.Table, format: str, *, bucket: str | None = None) -> pa.Table:
    """``table`` (of ``dcpfast.changes``; ``before=True`` for ``debezium``) in ``format``,
    one of ``FORMATS``; ``bucket`` names the bucket where the format has a field for it."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if format == "changes":
        return table
    if format == "couchbase-kafka":
        return _kafka(table, bucket)
    if format == "debezium":
        if "before" not in table.column_names:
            raise ValueError("the debezium format needs the changes with before=True")
        return _debezium(table, bucket)
    return _auto_cdc(table)


def _signed(column: pa.ChunkedArray | pa.Array, kind: pa.DataType) -> pa.Array:
    """An unsigned column as the signed type of its width (bits kept: a CAS above 2**63
    is negative, as Java's long holds it); nulls kept."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = {pa.int64(): np.uint64, pa.int32(): np.uint32, pa.int16(): np.uint16}[kind]
    values = array.fill_null(0).to_numpy(zero_copy_only=False).astype(width, copy=False)
    return pa.array(values.view(kind.to_pandas_dtype()), kind, mask=array.is_null()
                    .to_numpy(zero_copy_only=False) if array.null_count else None)


def _text_keys(table: pa.Table) -> pa.Array:
    """The keys as text (a key that is not UTF-8 with its bytes replaced)."""
    key_str = table["key_str"].combine_chunks()
    if not key_str.null_count:
        return key_str
    keys = table["key"].to_pylist()
    return pa.array([k if k is not None else keys[i].decode("utf-8", "replace")
                     for i, k in enumerate(key_str.to_pylist())], pa.string())


def _kafka(table: pa.Table, bucket: str | None) -> pa.Table:
    change = table["change"]
    deleted = table["deleted"]
    event = pc.if_else(pc.equal(change, "expiration"), "expiration",
                       pc.if_else(deleted, "deletion", "mutation"))
    live = pc.invert(deleted)
    by_seqno = pc.coalesce(table["by_seqno"], table["seqno"])
    none_int32 = pa.scalar(None, pa.int32())
    columns = {
        "event": event, "partition": table["vbucket"].cast(pa.int16()),
        "key": _text_keys(table), "cas": _signed(pc.coalesce(table["cas"], 0), pa.int64()),
        "bySeqno": _signed(by_seqno, pa.int64()),
        "revSeqno": _signed(pc.coalesce(table["rev_seqno"], 0), pa.int64()),
        "expiration": pc.if_else(live, _signed(table["expiration"], pa.int32()), none_int32),
        "flags": pc.if_else(live, _signed(table["flags"], pa.int32()), none_int32),
        "lockTime": pa.nulls(table.num_rows, pa.int32()),
        "content": pc.if_else(live, table["body"], pa.scalar(None, pa.binary()))
        if "body" in table.column_names else pa.nulls(table.num_rows, pa.binary()),
        "bucket": pa.array([bucket] * table.num_rows, pa.string()),
        "vBucketUuid": _signed(table["vbucket_uuid"], pa.int64()),
        "scope": table["scope"], "collection": table["collection"]}
    return pa.table(columns, schema=KAFKA_SCHEMA)


def _content(body: pa.Array, datatype: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Each body as text: the JSON itself where the datatype says JSON (and it is UTF-8),
    else base64; and which (``content_encoding``: ``json``, ``base64``; null where there
    is no body). Both kinds are made column by column (``encoding.base64_text``)."""
    flags = pc.fill_null(pc.bit_wise_and(datatype.cast(pa.uint8()), int(Datatype.JSON)), 0)
    bodies = body.cast(pa.large_binary())
    json_like = pc.and_(pc.not_equal(flags, 0), pc.is_valid(bodies))
    while True:
        others = pc.and_(pc.invert(json_like), pc.is_valid(bodies))
        at = np.flatnonzero(others.to_numpy(zero_copy_only=False))
        place = np.full(len(bodies), -1, np.int64)
        place[at] = np.arange(len(at))
        encoded = base64_text(bodies.take(pa.array(at))).take(pa.array(place, mask=place < 0))
        text = pc.if_else(json_like, bodies.view(pa.large_string()), encoded)
        try:
            text.validate(full=True)
            break
        except pa.ArrowInvalid:             # a JSON-flagged body that is not UTF-8
            utf8 = [b is None or _utf8(b) for b in
                    pc.if_else(json_like, bodies, pa.scalar(None, bodies.type)).to_pylist()]
            json_like = pc.and_(json_like, pa.array(utf8))
    encoding = pc.if_else(json_like, "json", pc.if_else(others, "base64",
                                                        pa.scalar(None, pa.string())))
    return text.cast(pa.string()), encoding


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _documents(table: pa.Table, ids: pa.Array, fields: dict, absent: pa.Array) -> pa.Array:
    """A Debezium document struct from the feed's version ``fields`` (null where
    ``absent``)."""
    body = fields.get("body")
    content, encoding = _content(body, fields["datatype"]) if body is not None else (
        pa.nulls(table.num_rows, pa.string()), pa.nulls(table.num_rows, pa.string()))
    xattrs = fields.get("xattrs")
    arrays = [ids, content, encoding,
              xattrs if xattrs is not None else pa.nulls(table.num_rows, DOCUMENT[3].type),
              _signed(fields["cas"], pa.int64()), _signed(fields["rev_seqno"], pa.int64()),
              _signed(fields["expiration"], pa.int32()), _signed(fields["flags"], pa.int32()),
              fields["datatype"].cast(pa.int16())]
    return pa.StructArray.from_arrays(arrays, fields=list(DOCUMENT),
                                      mask=absent.combine_chunks()
                                      if isinstance(absent, pa.ChunkedArray) else absent)


def _debezium(table: pa.Table, bucket: str | None) -> pa.Table:
    n = table.num_rows
    ids = _text_keys(table)
    deleted = table["deleted"].combine_chunks()
    after = _documents(table, ids, {name: table[name].combine_chunks()
                                    for name in _DOCUMENT_FIELDS if name in
                                    table.column_names}, deleted)
    before = table["before"].combine_chunks()
    prior = {f.name: before.field(f.name) for f in before.type}
    had = before.is_null()                  # nothing stood before: created
    before_docs = _documents(table, ids, prior, had)
    disk = pc.not_equal(pc.bit_wise_and(pc.fill_null(table["snap_flags"], 0),
                                        int(SnapshotFlag.DISK)), 0)
    op = pc.if_else(deleted, "d", pc.if_else(
        pc.and_(disk, pc.equal(table["change"], "mutation")), "r",
        pc.if_else(had, "c", "u")))
    ts_ms = _milliseconds(table["cas"])
    snapshot = pc.if_else(pc.is_null(table["snap_flags"]), pa.scalar(None, pa.string()),
                          pc.if_else(disk, "disk", "memory"))
    source = pa.StructArray.from_arrays([
        pa.array(["dcpfast"] * n, pa.string()), pa.array([__version__] * n, pa.string()),
        pa.array([bucket] * n, pa.string()), table["scope"].combine_chunks(),
        table["collection"].combine_chunks(), table["vbucket"].cast(pa.int32())
        .combine_chunks(), _signed(table["vbucket_uuid"], pa.int64()),
        _signed(table["seqno"], pa.int64()), table["epoch"].cast(pa.int32()).combine_chunks(),
        _signed(table["rev_seqno"], pa.int64()), _signed(table["cas"], pa.int64()), ts_ms,
        _signed(table["snap_start"], pa.int64()), _signed(table["snap_end"], pa.int64()),
        snapshot.combine_chunks() if isinstance(snapshot, pa.ChunkedArray) else snapshot],
        fields=list(_SOURCE))
    key = pa.StructArray.from_arrays([table["scope"].combine_chunks(),
                                      table["collection"].combine_chunks(), ids],
                                     fields=list(DEBEZIUM_SCHEMA.field("key").type))
    value = pa.StructArray.from_arrays(
        [before_docs, after, op.combine_chunks() if isinstance(op, pa.ChunkedArray) else op,
         ts_ms, source], fields=list(DEBEZIUM_SCHEMA.field("value").type))
    return pa.table({"key": key, "value": value}, schema=DEBEZIUM_SCHEMA)


def _milliseconds(cas: pa.ChunkedArray) -> pa.Array:
    """The time of each CAS (its hybrid logical clock's whole ticks) in milliseconds since
    the epoch; null where there is no CAS."""
    array = cas.combine_chunks()
    ticks = array.fill_null(0).to_numpy(zero_copy_only=False) & np.uint64(~0xFFFF & (2**64 - 1))
    return pa.array((ticks // np.uint64(10**6)).astype(np.int64),
                    mask=array.is_null().to_numpy(zero_copy_only=False))


#: The feed's columns a Debezium document is made of.
_DOCUMENT_FIELDS = ("cas", "rev_seqno", "expiration", "flags", "datatype", "body", "xattrs")


def _auto_cdc(table: pa.Table) -> pa.Table:
    """Keys ``scope``, ``collection``, ``id`` (and ``vbucket``), ``sequence`` (struct of
    ``epoch``, ``step`` and ``seqno``: sort by it; ``step`` 0 for what a restart undoes,
    which comes before anything its new stream sends, even the items of a backfill in
    key order whose seqnos are lower), ``deleted``, and the document's fields, signed
    as Spark reads them."""
    undone = pc.equal(table["change"], "rollback").combine_chunks()
    sequence = pa.StructArray.from_arrays(
        [table["epoch"].cast(pa.int64()).combine_chunks(),
         pc.if_else(undone, 0, 1).cast(pa.int8()), _signed(table["seqno"], pa.int64())],
        names=["epoch", "step", "seqno"])
    columns = {"scope": table["scope"], "collection": table["collection"],
               "id": _text_keys(table), "vbucket": table["vbucket"].cast(pa.int32()),
               "sequence": sequence, "deleted": table["deleted"],
               "change": table["change"],
               "by_seqno": _signed(table["by_seqno"], pa.int64()),
               "rev_seqno": _signed(table["rev_seqno"], pa.int64()),
               "cas": _signed(table["cas"], pa.int64()),
               "flags": table["flags"].cast(pa.int64()),
               "expiration": table["expiration"].cast(pa.int64()),
               "datatype": table["datatype"].cast(pa.int32())}
    if "body" in table.column_names:
        columns["body"] = table["body"]
        columns["xattrs"] = table["xattrs"]
    return pa.table(columns)
