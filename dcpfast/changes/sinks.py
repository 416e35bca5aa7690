"""What a connector delivered, as an audit reads it (``read_sink``): of each record of its
sink (the Couchbase Kafka connector's records or Debezium change events, in an Arrow
table, JSON lines, Parquet or a Delta table) only the vbucket, key, CAS, seqno and bucket,
in delivery order. Files are read for those fields alone: JSON lines a block at a time,
Parquet and Delta only those columns of each file, so that the documents the records
carry are never held."""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import unquote

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.json as pj
import pyarrow.parquet as pq

from ..errors import optional

SINK_FORMATS = ("couchbase-kafka", "debezium")
#: The columns of the sink's messages (``read_sink``).
MESSAGE_SCHEMA = pa.schema([("vbucket", pa.int64()), ("key", pa.string()),
                            ("cas", pa.uint64()), ("seqno", pa.uint64()),
                            ("bucket", pa.string())])
#: Where each format keeps the fields of ``MESSAGE_SCHEMA`` (a path into the record), and
#: the type a JSON line's field is read as.
_FIELDS: dict[str, list[tuple[tuple[str, ...], pa.DataType]]] = {
    "couchbase-kafka": [(("partition",), pa.int64()), (("key",), pa.string()),
                        (("cas",), pa.int64()), (("bySeqno",), pa.int64()),
                        (("bucket",), pa.string())],
    "debezium": [(("value", "source", "vbucket"), pa.int64()), (("key", "id"), pa.string()),
                 (("value", "source", "cas"), pa.int64()),
                 (("value", "source", "seqno"), pa.int64()),
                 (("value", "source", "bucket"), pa.string())],
}
#: The folder that makes a folder a Delta table.
DELTA_LOG = "_delta_log"
#: Bytes of JSON lines parsed at a time, and records of lines read one by one.
_BLOCK_BYTES = 8 << 20
_RECORDS = 65536


def read_sink(sink, format: str | None = None) -> tuple[pa.Table, int]:
    """The messages of ``sink`` in delivery order (``MESSAGE_SCHEMA``: vbucket, key, CAS,
    seqno, bucket), and how many records of it could not be read (a line that does not
    parse: a file cut mid-line; a record without the format's fields). ``sink``: an
    Arrow table, a JSON lines file, a Parquet file, a folder of Parquet files (read in
    their names' order) or a Delta table (its files in the order its log added them);
    ``format`` one of ``SINK_FORMATS``, None to tell from the records (Debezium's have a
    ``value``)."""
    if format is not None and format not in SINK_FORMATS:
        raise ValueError(f"sink format must be one of {', '.join(SINK_FORMATS)}, "
                         f"not {format!r}")
    if isinstance(sink, pa.Table):
        format = format or _told(sink.schema.names)
        pieces: list[pa.Table | int] = [_messages(sink, format)]
        names, unreadable = sink.schema.names, 0
    else:
        path = os.fspath(sink)
        if os.path.isdir(os.path.join(path, DELTA_LOG)):
            names, pieces = _delta(path, format)
        elif os.path.isdir(path) or path.endswith((".parquet", ".pq")):
            names, pieces = _parquet(path, format)
        else:
            names, pieces = _json_lines(path, format)
        format = format or _told(names)
        unreadable = 0
    tables = [p for p in pieces if not isinstance(p, int)]
    messages = pa.concat_tables(tables) if tables else MESSAGE_SCHEMA.empty_table()
    unreadable += sum(p for p in pieces if isinstance(p, int))
    records = messages.num_rows + unreadable
    if records and messages["vbucket"].null_count == messages.num_rows:
        raise ValueError(f"none of the sink's {records:,} records is a {format} "
                         f"message (its fields: {', '.join(sorted(names))})")
    whole = pc.and_(pc.is_valid(messages["vbucket"]), pc.is_valid(messages["key"]))
    kept = messages.filter(whole)
    return kept, unreadable + (messages.num_rows - kept.num_rows)


def _told(names) -> str:
    """The format of records with the fields ``names``."""
    return "debezium" if "value" in names else "couchbase-kafka"


def _messages(table: pa.Table, format: str) -> pa.Table:
    """The messages of records ``table`` of ``format`` (nulls where a record lacks a
    field, or holds it as another type)."""
    columns = []
    for (path, _), field in zip(_FIELDS[format], MESSAGE_SCHEMA):
        column = _column(table, *path)
        try:
            if pa.types.is_uint64(field.type):
                column = _unsigned(column)
            else:
                column = column.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            column = pa.nulls(table.num_rows, field.type)
        columns.append(column)
    return pa.table(columns, schema=MESSAGE_SCHEMA)


def _column(table: pa.Table, *path: str) -> pa.Array:
    """A column of ``table`` (a field of a struct column, by ``path``), null if absent."""
    if path[0] not in table.column_names:
        return pa.nulls(table.num_rows)
    array = table[path[0]].combine_chunks() if table.num_rows else pa.array(
        [], table.schema.field(path[0]).type)
    for name in path[1:]:
        if not pa.types.is_struct(array.type) or array.type.get_field_index(name) < 0:
            return pa.nulls(table.num_rows)
        array = pc.struct_field(array, name)
    return array


def _unsigned(array: pa.Array) -> pa.Array:
    """An integer column as uint64, its bits kept (a CAS above 2**63 written negative)."""
    if not len(array) or pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.uint64())
    values = array.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return pa.array(values.view(np.uint64), mask=array.is_null().to_numpy(
        zero_copy_only=False) if array.null_count else None)


def _leaves(schema: pa.Schema, format: str | None) -> tuple[str, list[tuple[str, ...]]]:
    """The format of a file of ``schema`` (``format``, or told from its fields) and the
    paths of its fields that format keeps a message's fields in."""
    format = format or _told(schema.names)
    found = []
    for path, _ in _FIELDS[format]:
        kind: pa.DataType | None = None
        for depth, name in enumerate(path):
            fields = schema if depth == 0 else kind
            if not isinstance(fields, (pa.Schema, pa.StructType)) \
                    or fields.get_field_index(name) < 0:
                break
            kind = fields.field(name).type
        else:
            found.append(path)
    return format, found


def _parquet(path: str, format: str | None) -> tuple[list[str], list[pa.Table | int]]:
    """The fields of a Parquet file or folder (its files in their paths' order, the
    values of their hive-style partitions included) and its messages."""
    dataset = ds.dataset(path, format="parquet", partitioning="hive")
    format, _ = _leaves(dataset.schema, format)
    fragments = sorted(dataset.get_fragments(), key=lambda fragment: fragment.path)
    return dataset.schema.names, [_fragment(f, format) for f in fragments]


def _delta(path: str, format: str | None) -> tuple[list[str], list[pa.Table | int]]:
    """The fields of the Delta table at ``path`` and its messages, its files in the order
    its log added them (those of a checkpoint first)."""
    deltalake = optional("deltalake", "delta", "an audit of a Delta sink")
    dataset = deltalake.DeltaTable(path).to_pyarrow_dataset()
    format, _ = _leaves(dataset.schema, format)
    added: dict[str, int] = {}
    log = os.path.join(path, DELTA_LOG)
    for name in sorted(n for n in os.listdir(log) if n.endswith(".json")):
        with open(os.path.join(log, name), "rb") as f:
            for line in f:
                action = orjson.loads(line) if line.strip() else {}
                if "add" in action:
                    added.setdefault(unquote(action["add"]["path"]), len(added))
    root = os.path.abspath(path).replace(os.sep, "/").rstrip("/") + "/"
    fragments = sorted(dataset.get_fragments(), key=lambda fragment: added.get(
        fragment.path.removeprefix(root), -1))
    return dataset.schema.names, [_fragment(f, format) for f in fragments]


def _fragment(fragment, format: str) -> pa.Table:
    """The messages of one Parquet file of a dataset: of its columns only the leaves
    ``format`` keeps a message's fields in (a dataset's scan would read whole structs,
    the documents in them), its partition's values added."""
    with fragment.filesystem.open_input_file(fragment.path) as f:
        parquet = pq.ParquetFile(f)
        _, paths = _leaves(parquet.schema_arrow, format)
        table = parquet.read(columns=[".".join(p) for p in paths]) if paths \
            else pa.table({"_": pa.nulls(parquet.metadata.num_rows)})
    for name, value in ds.get_partition_keys(fragment.partition_expression).items():
        if name not in table.column_names:
            table = table.append_column(name, pa.repeat(value, table.num_rows))
    return _messages(table, format)


def _json_lines(path: str, format: str | None) -> tuple[list[str], list[pa.Table | int]]:
    """The fields of a JSON lines file's first record and its messages, a block of lines
    at a time (read one by one, as far as each parses, where the records differ in
    shape or a line is cut short)."""
    first = _first_record(path)
    format = format or _told(first)
    try:
        return list(first), list(_blocks(path, format))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return list(first), list(_lines(path, format))


def _first_record(path: str) -> dict:
    """The first line of a JSON lines file that is a JSON object ({} where none is)."""
    for block in _line_blocks(path):
        for line in block.splitlines():
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                return record
        break
    return {}


def _line_blocks(path: str) -> Iterator[bytes]:
    """A JSON lines file (decompressed where its name ends as a compressed file's does:
    ``.gz``, ``.bz2``, ``.zst``, ``.lz4``) in blocks of whole lines of about
    ``_BLOCK_BYTES`` (the last as it ends)."""
    with pa.input_stream(path) as f:
        rest = b""
        while block := f.read(_BLOCK_BYTES):
            data = rest + block
            end = data.rfind(b"\n") + 1
            rest = data[end:]
            if end:
                yield data[:end]
        if rest:
            yield rest


def _blocks(path: str, format: str) -> Iterator[pa.Table]:
    """The messages of a JSON lines file, read a block of whole lines at a time (what is
    held: a block and its messages) by Arrow, for the format's fields alone
    (``ArrowInvalid`` where a record does not fit them, or a line is cut short)."""
    tree: dict = {}
    for (fields, kind) in _FIELDS[format]:
        place = tree
        for name in fields[:-1]:
            place = place.setdefault(name, {})
        place[fields[-1]] = kind

    def typed(node) -> pa.DataType:
        return pa.struct([(n, typed(c)) for n, c in node.items()]) \
            if isinstance(node, dict) else node
    parsing = pj.ParseOptions(explicit_schema=pa.schema(
        [(name, typed(node)) for name, node in tree.items()]),
        unexpected_field_behavior="ignore")
    for block in _line_blocks(path):
        if block.strip():
            yield _messages(pj.read_json(pa.BufferReader(block), parse_options=parsing),
                            format)


def _lines(path: str, format: str) -> Iterator[pa.Table | int]:
    """The messages of a JSON lines file read line by line, a few at a time (a field of
    another type than the format's is null), and last the count of lines that do not
    parse or are no JSON object."""
    rows: list[list] = []
    unreadable = 0
    for block in _line_blocks(path):
        for line in block.splitlines():
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                unreadable += 1
                continue
            if not isinstance(record, dict):
                unreadable += 1
                continue
            rows.append(_picked(record, format))
            if len(rows) == _RECORDS:
                yield _table(rows)
                rows = []
    if rows:
        yield _table(rows)
    yield unreadable


def _picked(record: dict, format: str) -> list:
    """A record's fields of ``MESSAGE_SCHEMA`` (None where absent or of another type)."""
    out: list = []
    for (path, _), field in zip(_FIELDS[format], MESSAGE_SCHEMA):
        value: object = record
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        if pa.types.is_string(field.type):
            out.append(value if isinstance(value, str) else None)
        elif not isinstance(value, int) or isinstance(value, bool):
            out.append(None)
        elif pa.types.is_uint64(field.type):
            out.append(value & (2**64 - 1) if -2**63 <= value < 2**64 else None)
        else:
            out.append(value if -2**63 <= value < 2**63 else None)
    return out


def _table(rows: list[list]) -> pa.Table:
    """Messages from rows of ``MESSAGE_SCHEMA``'s fields."""
    return pa.table([pa.array(column, field.type) for column, field in
                     zip(zip(*rows), MESSAGE_SCHEMA)], schema=MESSAGE_SCHEMA)
