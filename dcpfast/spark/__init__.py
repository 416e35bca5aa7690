"""Decoding DCP dumps on Apache Spark: one schema, three read paths and a Parquet job.

Every path yields the same rows: one per frame, with the columns asked for (by default
``schema.DEFAULT``, those of document-change analysis; ``columns="all"`` for every column
of ``dcpfast.COLUMNS``) in Spark types, ``key`` (binary), ``key_str`` (the key as a
string where it is valid UTF-8, else null), ``value`` (binary), ``source`` (the file)
and, with ``values=True``, ``content`` (the document body, decompressed, without xattrs)
and ``xattrs``.

Spark has no unsigned integers: uint8 columns become ``short``, uint16 ``int``, uint32
``long`` (values kept), and uint64 columns (CAS, seqnos, offsets) become ``long`` by
reinterpreting their 64 bits, so values of 2**63 and above read as negative numbers.
``unsigned`` turns such a column back into its unsigned value.

* ``read_dcp(spark, path, method="datasource")``: the ``dcp`` Python data source reads
  the files itself (local paths or any pyarrow filesystem URI), packs small files into
  partitions and splits large ones into byte ranges (see ``dcpfast.io.ranges``).
* ``method="arrow"`` / ``"pandas"``: Spark's ``binaryFile`` source and ``mapInArrow``
  (``decode_arrow``) or ``mapInPandas`` (``decode_pandas``); files must be under 2 GiB.
* ``state(frames_df, ...)``: the documents of the decoded frames as of the end, a seqno or
  a time (``dcpfast.state`` on Spark); ``state_report`` its consistent seqnos and what
  skip mode passed over.

pyspark is imported only by the functions that need it; the decoding itself runs on the
executors, which need dcpfast installed.
"""

from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, PARTITION_BYTES, Piece, plan, range_batches
from .convert import decode_arrow, decode_pandas, to_record_batch
from .job import decode_to_parquet, session, spark_error, task_progress
from .schema import (
    DEFAULT,
    EXTRA,
    VALUE_COLUMNS,
    arrow_schema,
    output_columns,
    spark_schema,
    unsigned,
)
from .sink import parquet_sink, write_parquet
from .source import data_source, list_files, read_dcp, read_piece, register
from .state import state, state_report

__all__ = ["BATCH_BYTES", "DEFAULT", "EXTRA", "LEAD_IN_BYTES", "PARTITION_BYTES", "SCHEMA",
           "VALUE_COLUMNS", "Piece", "arrow_schema", "data_source", "decode_arrow",
           "decode_pandas", "decode_to_parquet", "list_files", "output_columns", "plan",
           "range_batches", "read_dcp", "read_piece", "parquet_sink", "register", "session",
           "spark_error", "spark_schema", "state", "state_report", "task_progress",
           "to_record_batch", "unsigned", "write_parquet"]


def __getattr__(name):
    if name == "SCHEMA":              # built on first use: pyspark is imported lazily
        return spark_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
