"""Decoding DCP dumps on Apache Spark: one schema, three read paths, a Parquet job and the
documents' state.

Every path yields the same rows: one per frame, with the columns asked for (by default
``DEFAULT``, those of document-change analysis; ``columns="all"`` for every column of
``dcpfast.COLUMNS``) in Spark types, ``key`` (binary), ``key_str`` (the key as a string
where it is valid UTF-8, else null), ``value`` (binary), ``source`` (the file) and, with
``values=True``, ``content`` (the document body, decompressed, without xattrs) and
``xattrs``.

Spark has no unsigned integers: uint8 columns become ``short``, uint16 ``int``, uint32
``long`` (values kept), and uint64 columns (CAS, seqnos, offsets) become ``long`` by
reinterpreting their 64 bits, so values of 2**63 and above read as negative numbers.
``unsigned`` turns such a column back into its unsigned value.

* ``read_dcp(spark, path, method="datasource")``: the ``dcp`` Python data source
  (``register`` adds it to a session) reads the files itself (local paths or any pyarrow
  filesystem URI), packs small files into partitions and splits large ones into byte
  ranges (``dcpfast.io.ranges``).
* ``method="arrow"`` / ``"pandas"``: Spark's ``binaryFile`` source and ``mapInArrow``
  (``decode_arrow``) or ``mapInPandas`` (``decode_pandas``) with ``SCHEMA`` (or
  ``spark_schema(columns, values)``); files must be under 2 GiB.
* ``write_parquet(spark, inputs, out)``: the Parquet job, decoded and written in the
  tasks; ``decode_to_parquet`` runs it on a session of its own (``dcpfast spark-decode``).
* ``write_delta(spark, inputs, table)``: the same tasks, committed to a Delta table in one
  transaction (``dcpfast[delta]``), exactly once per ``app_id``.
* ``spark.readStream.format("dcp")``: dumps read as they grow (Structured Streaming).
* ``state(frames_df, ...)``: the documents of the decoded frames as of the end, a seqno or
  a time (``dcpfast.state`` on Spark); ``state_report`` its consistent seqnos and what
  skip mode passed over.
* ``mirror_stream(spark, inputs, table, checkpoint)``: ``dcpfast.mirror`` fed by the
  ``dcp`` stream source through ``foreachBatch``, exactly once across restarts;
  ``mirror(spark, inputs, table, checkpoint)`` runs it once (``Trigger.AvailableNow``).
* ``changes(frames_df, ...)``: the change feed of the decoded frames (``dcpfast.changes``
  on Spark).
* ``diff(spark, source, target, out)``: two buckets' dumps compared (``dcpfast.diff`` on
  Spark), the differences written as Parquet.
* ``report(spark, inputs)``: ``dcpfast.report`` with each input read in a Spark task and
  the partial aggregates merged on the driver.

pyspark is imported only by the functions that need it; the decoding itself runs on the
executors, which need dcpfast installed.
"""

from .changes import changes
from .compare import diff
from .convert import decode_arrow, decode_pandas
from .datasource import read_dcp, register
from .documents import state, state_report
from .job import decode_to_parquet
from .mirror import mirror, mirror_stream
from .report_job import report
from .schema import DEFAULT, spark_arrow_schema, spark_schema, unsigned
from .sink import write_delta, write_parquet

__all__ = ["DEFAULT", "SCHEMA", "changes", "decode_arrow", "decode_pandas",
           "decode_to_parquet", "diff", "mirror", "mirror_stream", "read_dcp", "register",
           "report", "spark_arrow_schema",
           "spark_schema", "state", "state_report", "unsigned", "write_delta", "write_parquet"]


def __getattr__(name):
    if name == "SCHEMA":              # built on first use: pyspark is imported lazily
        return spark_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
