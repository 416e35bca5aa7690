"""The Parquet job: ``write_parquet`` decodes DCP dumps into a Parquet dataset in Spark's
tasks, through Spark's own protocol for Python data source writes.

The driver plans the pieces of the input (``io.ranges.plan``) and writes a small
DataFrame of them, one Spark partition per planned partition, to the ``dcp_parquet``
data source. Its writer (a ``DataSourceArrowWriter``) decodes a partition's pieces and
writes Parquet with pyarrow in the task (``parquet.TaskWriter``), into a directory of the
task attempt's own, and returns only what it wrote. Spark's commit coordinator lets one
attempt per partition commit; when every task has, the writer's ``commit`` moves their
files into place (``output``); when one fails for good, ``abort`` deletes them. No row of
frames passes through Spark.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Sequence

from .. import protocol as P
from ..errors import checked_mode, text
from ..io.dumps import is_capture
from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, PARTITION_BYTES, Piece, plan
from . import output
from .parquet import TaskWriter, partition_columns
from .schema import spark_arrow_schema
from .source import compressed, filesystem, list_files, parallelism, registered

log = logging.getLogger("dcpfast.spark")

_PIECES = "part long, uri string, lo long, hi long, size long"


def _sink_classes():
    """The ``dcp_parquet`` data source classes (built on demand: they subclass pyspark's)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Written(WriterCommitMessage):
        """What one task attempt wrote: its staging directory and ``TaskWriter.result``."""

        def __init__(self, attempt: str, result: dict):
            self.attempt, self.result = attempt, result

    class DcpParquetSink(DataSource):
        """The sink of ``write_parquet``: rows of planned pieces in, Parquet files out."""

        @classmethod
        def name(cls):
            return "dcp_parquet"

        def writer(self, schema, overwrite):
            return DcpParquetWriter(dict(self.options))

    class DcpParquetWriter(DataSourceArrowWriter):
        def __init__(self, options):
            self.out, self.job, self.mode = options["out"], options["job"], options["mode"]
            self.columns = options["columns"].split(",")
            self.values = options["values"] == "true"
            self.partition_by = [c for c in options["partition_by"].split(",") if c]
            self.collections = None if options["collections"] == "auto" else \
                options["collections"] == "true"
            self.errors = options["errors"]
            self.sizes = {k: int(options[k]) for k in ("batch_bytes", "lead_in",
                                                       "max_frame_size")}

        def write(self, iterator):
            from pyspark import TaskContext

            task = TaskContext.get()
            pieces = sorted((Piece(r["uri"], r["lo"], r["hi"], r["size"])
                             for rb in iterator for r in rb.to_pylist()),
                            key=lambda p: (p.uri, p.lo))
            attempt = f"{task.partitionId():05d}-{task.attemptNumber()}-" \
                      f"{task.taskAttemptId()}"
            store, _ = filesystem(self.out)
            writer = TaskWriter(store, f"{output.staging(self.out, self.job)}/{attempt}",
                                f"part-{task.partitionId():05d}-{self.job}",
                                spark_arrow_schema(self.columns, self.values), self.partition_by,
                                collections=self.collections, errors=self.errors,
                                **self.sizes)
            for piece in pieces:
                writer.write(piece)
            return Written(attempt, writer.result())

        def commit(self, messages):
            output.commit(self.out, self.job, self.mode,
                          [(m.attempt, m.result) for m in messages])

        def abort(self, messages):
            output.abort(self.out, self.job)

    return DcpParquetSink


@functools.cache
def parquet_sink():
    """The ``dcp_parquet`` data source class (for ``spark.dataSource.register``)."""
    return _sink_classes()


def write_parquet(spark, inputs, out: str, *, partition_by: Sequence[str] = ("vbucket",),
                  columns=None, values: bool = False, collections: bool | None = None,
                  errors: str = "strict", mode: str = "error",
                  partition_bytes: int = PARTITION_BYTES, batch_bytes: int = BATCH_BYTES,
                  lead_in: int = LEAD_IN_BYTES,
                  max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> dict:
    """Decode DCP dumps (``inputs``: files, directories or URIs, as ``read_dcp`` takes)
    into a Parquet dataset at ``out``, partitioned Hive-style by ``partition_by``, in
    Spark's tasks; returns the summary of what was written.

    ``columns``, ``values``, ``collections`` and ``errors`` as for ``read_dcp`` (the same
    rows and types). ``mode``: ``"error"`` (``out`` must not exist or be empty),
    ``"overwrite"`` (replace the Parquet dataset at ``out``, and nothing else) or
    ``"append"``. Frames that do not carry a partition column (responses carry no
    vbucket) go into its value ``-1``. ``out`` is a local path or a URI that every
    executor reaches.

    The summary: ``frames``, ``input_bytes``, ``files``, ``output_bytes``, ``rows`` (per
    partition folder, e.g. ``"vbucket=12"``), ``skipped`` (per piece with damage
    stepped over in skip mode: ``where``, ``regions``, ``bytes``, ``first`` offset),
    ``tasks``, ``task_seconds`` (their time decoding and writing, summed) and
    ``seconds`` (the whole call). Each piece with damage skipped is also logged (a
    warning, logger ``dcpfast.spark``).
    """
    began = time.perf_counter()
    schema, partition_by = checked(columns, values, partition_by, errors)
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else \
        [os.fspath(p) for p in inputs]
    files = check_inputs(paths)
    out = os.path.abspath(out) if "://" not in out else out
    parts = plan(files, partition_bytes, parallelism(spark),
                 splittable=lambda uri: not compressed(uri))
    created = output.prepare(out, mode)
    job = output.start(out)
    committed = False
    try:
        if parts:
            _run(spark, parts, out=out, job=job, mode=mode, columns=",".join(schema.names),
                 values=str(bool(values)).lower(), partition_by=",".join(partition_by),
                 collections="auto" if collections is None else str(collections).lower(),
                 errors=errors, batch_bytes=batch_bytes, lead_in=lead_in,
                 max_frame_size=max_frame_size)
        else:
            output.commit(out, job, mode, [])
        committed = True
    finally:
        result = output.finish(out, job, created, committed)
    assert result is not None
    for s in result["skipped"]:
        log.warning("%s: skipped %d damaged region(s), %d bytes, the first at byte %d",
                    s["where"], s["regions"], s["bytes"], s["first"])
    result["seconds"] = time.perf_counter() - began
    return result


def check_inputs(inputs: Sequence[str]) -> list[tuple[str, int]]:
    """The files under ``inputs`` (``list_files``), each local one opened and looked at
    first, so that a missing or unreadable file or a packet capture fails at once, with
    its reason, before any Spark job (remote files are checked by the tasks)."""
    files = list_files(inputs)
    for uri, _ in files:
        store, where = filesystem(uri)
        if store.type_name != "local":
            continue
        try:
            with open(where, "rb") as f:
                head = f.read(4)
        except OSError as e:
            raise OSError(text("unreadable", source=uri, reason=e.strerror or e)) from None
        if is_capture(head):
            raise ValueError(f"{uri}: {text('capture_on_spark')}")
    return files


def checked(columns, values: bool, partition_by: Sequence[str], errors: str):
    """The schema and the partition columns of a job, its arguments checked."""
    checked_mode(errors)
    schema = spark_arrow_schema(columns, values)
    return schema, partition_columns(partition_by, schema.names)


def _run(spark, parts: list[list[Piece]], **options) -> None:
    """Write the planned partitions of pieces through the ``dcp_parquet`` sink."""
    from pyspark.sql import functions as F

    registered(spark, parquet_sink())
    pieces = spark.createDataFrame(
        [(k, p.uri, p.lo, p.hi, p.size) for k, part in enumerate(parts) for p in part],
        _PIECES)
    # one row per Spark partition, joined with its pieces: the partitions stay as planned
    planned = spark.range(0, len(parts), 1, len(parts)).withColumnRenamed("id", "part") \
        .join(F.broadcast(pieces), "part").select("uri", "lo", "hi", "size")
    writer = planned.write.format("dcp_parquet").mode("append")
    for key, value in options.items():
        writer = writer.option(key, str(value))
    writer.save()
