"""The rows Spark gets: output columns, their Arrow and Spark schemas, unsigned values.

Spark has no unsigned integers: uint8 columns become ``short``, uint16 ``int``, uint32
``long`` (values kept), and uint64 columns (CAS, seqnos, offsets) become ``long`` by
reinterpreting their 64 bits, so values of 2**63 and above read as negative numbers.
``unsigned`` turns such a column back into its unsigned value.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from .. import schema as S

_SPARK_INT = {"uint8": "int16", "uint16": "int32", "uint32": "int64", "uint64": "int64"}
#: Columns that are not scanner columns, in output order (``opcode_name`` follows
#: ``opcode``).
EXTRA = ("key", "key_str", "value", "source")
#: The name of each frame's opcode (``dcpfast.Opcode``), beside the number.
OPCODE_NAME = "opcode_name"
VALUE_COLUMNS = ("content", "xattrs")
#: The columns given when none are named: what an analysis of document changes reads
#: (the frame's place, kind, vbucket and collection, seqnos, the document's metadata,
#: snapshot ranges, key and value). ``columns="all"`` gives every column.
DEFAULT = ("offset", "opcode", "opcode_name", "datatype", "vbucket", "cas", "collection_id",
           "by_seqno", "rev_seqno", "prepared_seqno", "flags", "expiration", "delete_time",
           "durability_level", "snap_start", "snap_end", "key", "key_str", "value", "source")
#: Scanner columns that every frame carries, whatever the kind and the collections mode.
_ALWAYS = frozenset(n for n in S.NAMES if n not in S.WHERE_NONZERO and all(
    S.validity_table(n, c) is None for c in (False, True)))


def output_columns(columns: Sequence[str] | str | None = None, values: bool = False
                   ) -> tuple[str, ...]:
    """The output column names for a projection, in schema order.

    ``columns`` names any of the scanner columns, ``key``, ``key_str``, ``value``,
    ``source``, and with ``values`` ``content``/``xattrs``; None: ``DEFAULT`` (and
    ``content``/``xattrs`` with ``values``); ``"all"``: every column.
    """
    extra = VALUE_COLUMNS if values else ()
    everything = _everything(extra)
    if isinstance(columns, str):
        columns = [c.strip() for c in columns.split(",") if c.strip()]
    if columns is None:
        columns = DEFAULT + extra
    elif list(columns) == ["all"]:
        return everything
    unknown = [c for c in columns if c not in everything]
    if unknown:
        more = "" if values else " (content and xattrs need values=True)"
        raise ValueError(f"unknown column(s) {', '.join(map(repr, unknown))}{more}; "
                         f"known: {', '.join(everything)}")
    return tuple(c for c in everything if c in columns)


def _everything(extra) -> tuple[str, ...]:
    at = S.NAMES.index("opcode") + 1
    return S.NAMES[:at] + (OPCODE_NAME,) + S.NAMES[at:] + EXTRA + tuple(extra)


def spark_arrow_schema(columns: Sequence[str] | str | None = None, values: bool = False):
    """The Arrow schema of the batches handed to Spark (signed types). The header columns
    every frame carries are not nullable, which spares Spark a null check per value."""

    kinds = {"key": pa.binary(), "key_str": pa.string(), OPCODE_NAME: pa.string(),
             "value": pa.binary(), "source": pa.string(), "content": pa.binary(),
             "xattrs": pa.map_(pa.string(), pa.string())}
    fields = []
    for name in output_columns(columns, values):
        if name in S.DTYPES:
            kind = getattr(pa, _SPARK_INT.get(S.DTYPES[name].name, S.DTYPES[name].name))()
            fields.append(pa.field(name, kind, nullable=name not in _ALWAYS))
        else:
            fields.append(pa.field(name, kinds[name]))
    return pa.schema(fields)


def file_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of the job's Parquet files: ``schema`` (``spark_arrow_schema``'s) with
    ``opcode_name`` as the dictionary ``dcpfast.schema.opcode_names`` makes (Spark and
    Delta read it as string)."""
    if OPCODE_NAME not in schema.names:
        return schema
    i = schema.get_field_index(OPCODE_NAME)
    return schema.set(i, pa.field(OPCODE_NAME, pa.dictionary(pa.int16(), pa.string())))


def spark_schema(columns: Sequence[str] | str | None = None, values: bool = False):
    """The Spark ``StructType`` matching ``spark_arrow_schema`` exactly."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(spark_arrow_schema(columns, values))


def unsigned(column):
    """A uint64 column read back as its unsigned value (``decimal(20,0)``).

    ``column`` is a column name or a Spark ``Column``. Seqnos and CAS stay below 2**63
    in practice, so the ``long`` columns already sort and compare correctly; this
    matters for values such as a snapshot end of 0xffffffffffffffff (read as -1).
    On numpy data, ``array.view(numpy.uint64)`` does the same.
    """
    from pyspark.sql import functions as F

    col = F.col(column) if isinstance(column, str) else column
    wide = col.cast("decimal(20,0)")
    # 2**64 is beyond a long literal: written as a decimal, which holds it
    wrap = F.lit(str(2 ** 64)).cast("decimal(20,0)")
    return F.when(col < 0, wide + wrap).otherwise(wide).cast("decimal(20,0)")
