"""The one column definition; numpy dtypes, Arrow schemas and validity derive from it."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa

from . import protocol as p


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    doc: str


COLUMNS: tuple[Column, ...] = (
    Column("offset", "uint64", "frame start in the stream"),
    Column("magic", "uint8", "header byte 0"),
    Column("opcode", "uint8", "header byte 1"),
    Column("datatype", "uint8", "header byte 5: JSON 0x01, Snappy 0x02, XATTR 0x04"),
    Column("vbucket", "uint16", "requests (magic 0x80, 0x08)"),
    Column("status", "uint16", "responses (magic 0x81, 0x18)"),
    Column("opaque", "uint32", "read big-endian"),
    Column("cas", "uint64", "header CAS"),
    Column("body_len", "uint32", "total body length"),
    Column("framing_len", "uint8", "framing extras length"),
    Column("extras_len", "uint8", "extras length"),
    Column("key_offset", "uint64", "logical key start in the stream, after the collection prefix"),
    Column("key_len", "uint16", "logical key length"),
    Column("value_offset", "uint64", "value start in the stream"),
    Column("value_len", "uint32", "value length"),
    Column("collection_id", "uint32", "LEB128 key prefix on collection-enabled streams"),
    Column("stream_id", "uint16", "framing info id 2 on 0x08 frames"),
    Column("server_duration_us", "uint32",
           "framing info id 0 on 0x18 responses: the server's receive-to-send time in "
           "microseconds, as kv_engine decodes it (null where absent or under 1)"),
    Column("by_seqno", "uint64",
           "mutation, deletion, expiration, prepare, system event, seqno advanced, seqno ack; "
           "commit/abort: the commit/abort seqno"),
    Column("rev_seqno", "uint64", "mutation, deletion, expiration, prepare"),
    Column("prepared_seqno", "uint64", "commit, abort"),
    Column("flags", "uint32", "mutation, prepare: document flags"),
    Column("expiration", "uint32", "mutation, prepare"),
    Column("lock_time", "uint32", "mutation, prepare"),
    Column("nru", "uint8", "mutation, prepare: the item's not-recently-used byte"),
    Column("delete_time", "uint32", "deletion V2, expiration"),
    Column("deleted", "uint8", "prepare: 1 for a prepared deletion"),
    Column("durability_level", "uint8", "prepare"),
    Column("snap_start", "uint64", "snapshot marker"),
    Column("snap_end", "uint64", "snapshot marker"),
    Column("snap_flags", "uint32", "snapshot marker"),
    Column("marker_version", "uint8", "snapshot marker V2.x"),
    Column("max_visible_seqno", "uint64", "snapshot marker V2.x"),
    Column("high_completed_seqno", "uint64", "snapshot marker V2.x"),
    Column("purge_seqno", "uint64", "snapshot marker V2.2"),
    Column("high_prepared_seqno", "uint64", "snapshot marker V2.2 (52-byte value)"),
    Column("event_id", "uint32", "system event"),
    Column("event_version", "uint8", "system event"),
    Column("oso_flags", "uint32", "OSO snapshot"),
    Column("end_status", "uint32", "stream end"),
    Column("ack_bytes", "uint32", "buffer ack"),
    Column("vb_state", "uint8", "set vbucket state"),
)

NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
INDEX = {name: i for i, name in enumerate(NAMES)}
DTYPES = {c.name: np.dtype(c.dtype) for c in COLUMNS}
#: Arrow-only columns built from an offset/length pair.
BINARY = {"key": ("key_offset", "key_len"), "value": ("value_offset", "value_len")}
#: Columns whose values almost never repeat (stream positions, the hybrid logical clock):
#: Parquet writers give them no dictionary, which they would fill and then drop at a cost
#: in writing time (docs/benchmarks.md).
DISTINCT = frozenset({"offset", "key_offset", "value_offset", "cas"})


def dictionary_columns(names) -> list[str]:
    """Of ``names``, those worth a Parquet dictionary (all but ``DISTINCT``)."""
    return [n for n in names if n not in DISTINCT]


#: Framing-info columns: carried only by the frames whose framing extras hold them, which
#: their value tells (0 where absent); validity is ``column != 0``, not a per-kind table.
WHERE_NONZERO = frozenset({"stream_id", "server_duration_us"})

_HEADER = frozenset({"offset", "magic", "opcode", "datatype", "opaque", "cas", "body_len",
                     "framing_len", "extras_len"})

for _k in p.KINDS:                                        # the table and the schema agree
    for _f in _k.fields:
        assert DTYPES[_f.column].itemsize == _f.width, (_k.name, _f.column)


def resolve(columns) -> tuple[str, ...]:
    """Scanner columns for a projection; ``key``/``value`` pull in their offset and length."""
    if columns is None:
        return NAMES
    if isinstance(columns, str):
        columns = [columns]
    wanted: set[str] = set()
    for name in columns:
        if name in BINARY:
            wanted.update(BINARY[name])
        elif name in INDEX:
            wanted.add(name)
        else:
            known = NAMES + tuple(BINARY)
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"unknown column {name!r}{hint}; known: {', '.join(known)}")
    return tuple(n for n in NAMES if n in wanted)


def carried(kind: p.Kind, name: str, collections: bool) -> bool:
    """Whether frames of ``kind`` carry column ``name`` (else 0 in numpy, null in Arrow)."""
    if name in _HEADER:
        return True
    if name == "vbucket":
        return not kind.response and kind.opcode not in p.CONNECTION_REQUESTS
    if name == "status":
        return kind.response
    if name in ("key_offset", "key_len"):
        return kind.key[1] > 0
    if name in ("value_offset", "value_len"):
        return kind.value[1] > 0
    if name == "collection_id":
        return collections and kind.prefixed
    if name == "stream_id":
        return not kind.response   # and only where present (WHERE_NONZERO)
    if name == "server_duration_us":
        return kind.response       # likewise
    return name in kind.columns


@cache
def validity_table(name: str, collections: bool) -> np.ndarray | None:
    """Per-kind validity of a column as a bool lookup table, or None when always valid."""
    table = np.array([carried(k, name, collections) for k in p.KINDS], dtype=bool)
    table.flags.writeable = False
    return None if table.all() else table


#: The column ``convert`` and the Spark outputs add after ``opcode``: its name.
OPCODE_NAME = "opcode_name"


@cache
def _opcode_dictionary():
    names = []
    for op in range(256):
        try:
            names.append(p.Opcode(op).name.lower())
        except ValueError:
            names.append(f"0x{op:02x}")
    return pa.array(names, pa.string())


def opcode_names(opcodes: np.ndarray):
    """The names of ``opcodes`` (a uint8 column) as an Arrow dictionary column: the
    ``Opcode`` name in lower case (``mutation``), ``0x..`` for an opcode without one."""
    return pa.DictionaryArray.from_arrays(np.asarray(opcodes, np.int16), _opcode_dictionary())


def arrow_type(name: str):
    return pa.from_numpy_dtype(DTYPES[name])


def arrow_schema(columns=None, binary_type=None) -> pa.Schema:
    """Arrow schema of ``FrameBatch.to_arrow`` for a projection (``key``/``value`` last)."""
    names = resolve(columns)
    fields = [pa.field(n, arrow_type(n)) for n in names]
    for name, (off, length) in BINARY.items():
        if off in names and length in names:
            fields.append(pa.field(name, binary_type or pa.binary()))
    return pa.schema(fields)
