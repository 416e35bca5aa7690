"""The Parquet and Delta jobs: ``write_parquet`` and ``write_delta`` decode DCP dumps into
Parquet files in Spark's tasks, through Spark's own protocol for Python data source
writes.

The driver plans the pieces of the input (``io.ranges.plan``) and writes a small
DataFrame of them, one Spark partition per planned partition, to the ``dcp_parquet``
data source. Its writer (a ``DataSourceArrowWriter``) decodes a partition's pieces and
writes Parquet with pyarrow in the task (``parquet.TaskWriter``) and returns only what it
wrote. Spark's commit coordinator lets one attempt per partition commit; when every task
has, the writer's ``commit`` puts their files in place: the Parquet job moves them out of
the attempts' staging directories (``output``), the Delta job, whose tasks write in the
table's folders, adds them to the table in one transaction (``deltatable``). When one
fails for good, ``abort`` deletes them. No row of frames passes through Spark.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
from collections.abc import Sequence

from .. import protocol as P
from ..errors import checked_mode
from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, PARTITION_BYTES, Piece, plan
from . import deltatable, output
from .parquet import TaskWriter, partition_columns
from .schema import file_schema, spark_arrow_schema
from .source import check_inputs, filesystem, parallelism, splittable
from .workers import identity, registered, same_dcpfast

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
        """The sink of ``write_parquet`` and ``write_delta``: rows of planned pieces in,
        Parquet files out."""

        @classmethod
        def name(cls):
            return "dcp_parquet"

        def writer(self, schema, overwrite):
            return DcpParquetWriter(dict(self.options))

    class DcpParquetWriter(DataSourceArrowWriter):
        def __init__(self, options):
            self.out, self.job, self.mode = options["out"], options["job"], options["mode"]
            self.delta = options.get("layout") == "delta"
            self.columns = options["columns"].split(",")
            self.values = options["values"] == "true"
            self.partition_by = [c for c in options["partition_by"].split(",") if c]
            self.collections = None if options["collections"] == "auto" else \
                options["collections"] == "true"
            self.errors = options["errors"]
            self.sizes = {k: int(options[k]) for k in ("batch_bytes", "lead_in",
                                                       "max_frame_size")}
            self.app_id = options.get("app_id") or None
            self.app_version = int(options.get("app_version", 0))
            self.dcpfast = options.get("dcpfast")

        def schema(self):
            return file_schema(spark_arrow_schema(self.columns, self.values))

        def write(self, iterator):
            from pyspark import TaskContext

            same_dcpfast(self.dcpfast)
            task = TaskContext.get()
            pieces = sorted((Piece(r["uri"], r["lo"], r["hi"], r["size"])
                             for rb in iterator for r in rb.to_pylist()),
                            key=lambda p: (p.uri, p.lo))
            attempt = f"{task.partitionId():05d}-{task.attemptNumber()}-" \
                      f"{task.taskAttemptId()}"
            store, root = filesystem(self.out)
            if self.delta:           # straight into the table: the log says what is in it
                where, prefix = root, f"part-{task.partitionId():05d}-{self.job}-" \
                                      f"{task.attemptNumber()}-{task.taskAttemptId()}"
            else:
                where = f"{output.staging(self.out, self.job)}/{attempt}"
                prefix = f"part-{task.partitionId():05d}-{self.job}"
            writer = TaskWriter(store, where, prefix, self.schema(), self.partition_by,
                                collections=self.collections, errors=self.errors,
                                null_folder=deltatable.NULL_FOLDER if self.delta else None,
                                **self.sizes)
            for piece in pieces:
                writer.write(piece)
            return Written(attempt, dict(writer.result(), dcpfast=identity()))

        def commit(self, messages):
            if self.delta:
                deltatable.commit(self.out, self.job, self.mode, self.schema(),
                                  self.partition_by, [m.result for m in messages],
                                  app_id=self.app_id, app_version=self.app_version)
            else:
                output.commit(self.out, self.job, self.mode,
                              [(m.attempt, m.result) for m in messages])

        def abort(self, messages):
            if self.delta:
                deltatable.sweep(self.out, self.job, keep=())
            else:
                output.abort(self.out, self.job)

    return DcpParquetSink


@functools.cache
def parquet_sink():
    """The ``dcp_parquet`` data source class (for ``spark.dataSource.register``)."""
    return _sink_classes()


def _job(spark, inputs, out: str, *, columns, values: bool, partition_by,
         errors: str, partition_bytes: int):
    """What a job starts from: its schema, partition columns, output location, the
    inputs' files (the output never among them) and their planned partitions."""
    schema, partition_by = checked(columns, values, partition_by, errors)
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else \
        [os.fspath(p) for p in inputs]
    out = os.path.abspath(out) if "://" not in out else out
    files = check_inputs(paths, exclude=[out])
    parts = plan(files, partition_bytes, parallelism(spark), splittable=splittable)
    return schema, partition_by, out, parts


def _options(schema, partition_by, *, values, collections, errors, batch_bytes, lead_in,
             max_frame_size) -> dict:
    """The sink's options every job passes."""
    return dict(columns=",".join(schema.names), values=str(bool(values)).lower(),
                partition_by=",".join(partition_by),
                collections="auto" if collections is None else str(collections).lower(),
                errors=errors, batch_bytes=batch_bytes, lead_in=lead_in,
                max_frame_size=max_frame_size, dcpfast=identity())


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
    schema, partition_by, out, parts = _job(spark, inputs, out, columns=columns,
                                            values=values, partition_by=partition_by,
                                            errors=errors, partition_bytes=partition_bytes)
    created = output.prepare(out, mode)
    job = output.start(out)
    committed = False
    try:
        if parts:
            _run(spark, parts, out=out, job=job, mode=mode,
                 **_options(schema, partition_by, values=values, collections=collections,
                            errors=errors, batch_bytes=batch_bytes, lead_in=lead_in,
                            max_frame_size=max_frame_size))
        else:
            output.commit(out, job, mode, [])
        committed = True
    finally:
        result = output.finish(out, job, created, committed)
    assert result is not None
    _logged(result)
    result["seconds"] = time.perf_counter() - began
    return result


def _logged(result: dict) -> None:
    for s in result["skipped"]:
        log.warning("%s: skipped %d damaged region(s), %d bytes, the first at byte %d",
                    s["where"], s["regions"], s["bytes"], s["first"])


def write_delta(spark, inputs, table: str, *, partition_by: Sequence[str] = ("vbucket",),
                columns=None, values: bool = False, collections: bool | None = None,
                errors: str = "strict", mode: str = "append", app_id: str | None = None,
                app_version: int = 0, partition_bytes: int = PARTITION_BYTES,
                batch_bytes: int = BATCH_BYTES, lead_in: int = LEAD_IN_BYTES,
                max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> dict:
    """Decode DCP dumps into the Delta table at ``table`` (a local path or a URI that
    every executor and ``deltalake`` reach), partitioned by ``partition_by``, in Spark's
    tasks, and commit every task's files in one Delta transaction (``deltalake``:
    ``pip install 'dcpfast[delta]'``); returns the summary of what was committed.

    ``columns``, ``values``, ``collections`` and ``errors`` as for ``read_dcp``, the rows
    those of ``write_parquet`` (frames without a partition value: null). ``mode``:
    ``"append"`` (the default; the table is created where there is none),
    ``"overwrite"`` (the table's contents replaced in the same one commit) or ``"error"``
    (no table there yet). A directory that is not a Delta table and not empty is never
    written to.

    A failed job commits nothing: the table keeps its version and references no file of
    the job, whose files are deleted. ``app_id``: a name for this load; when the table
    already holds a commit of ``app_id`` at ``app_version`` or later (Delta's application
    transaction), nothing runs and nothing is committed: a re-run of the same load
    commits once (give a higher ``app_version`` for the next load of the same
    ``app_id``).

    The summary: that of ``write_parquet`` (``rows`` per partition folder, ``null`` for
    frames without a value), plus ``version`` (the table's version after the job) and
    ``committed`` (False when ``app_id`` had committed already).
    """
    began = time.perf_counter()
    schema, partition_by, out, parts = _job(spark, inputs, table, columns=columns,
                                            values=values, partition_by=partition_by,
                                            errors=errors, partition_bytes=partition_bytes)
    schema = file_schema(schema)
    existed, done = deltatable.check(out, mode, schema, partition_by, app_id, app_version)
    if done is not None:
        return _nothing(done, began)
    store, root = filesystem(out)
    if not existed:
        store.create_dir(root, recursive=True)
    job = output.new_job()
    options = _options(schema, partition_by, values=values, collections=collections,
                       errors=errors, batch_bytes=batch_bytes, lead_in=lead_in,
                       max_frame_size=max_frame_size)
    try:
        if parts:
            _run(spark, parts, out=out, job=job, mode=mode, layout="delta",
                 app_id=app_id or "", app_version=app_version, **options)
        else:
            deltatable.commit(out, job, mode, schema, partition_by, [], app_id=app_id,
                              app_version=app_version)
    except BaseException:
        deltatable.sweep(out, job, keep=())
        if not existed:
            output.drop_if_empty(store, root)
        raise
    result = deltatable.committed(out, job)
    if result is None:                        # a concurrent run of app_id committed first
        return _nothing(deltatable.version(out), began)
    _logged(result)
    result.pop("job", None)
    result.update(committed=True, seconds=time.perf_counter() - began)
    return result


def _nothing(version: int, began: float) -> dict:
    """The summary of a Delta job that had nothing to commit (its ``app_id`` had)."""
    return {"committed": False, "version": version, "frames": 0, "input_bytes": 0,
            "files": 0, "output_bytes": 0, "rows": {}, "skipped": [], "tasks": 0,
            "task_seconds": 0.0, "seconds": time.perf_counter() - began}


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
    tag = f"dcpfast-{options['job']}"
    spark.addTag(tag)                  # so that an interrupted job cancels its Spark job
    RUNNING.append((spark, tag))
    try:
        writer.save()
    finally:
        RUNNING.remove((spark, tag))
        with contextlib.suppress(Exception):
            spark.removeTag(tag)


#: The Spark jobs of ``_run`` under way, as ``(session, tag)``: what a signal cancels
#: (``spark.interruptTag``) before the job unwinds.
RUNNING: list = []


def cancel_running() -> bool:
    """Cancel the Spark jobs under way (``RUNNING``); whether there were any."""
    for spark, tag in list(RUNNING):
        with contextlib.suppress(Exception):
            spark.interruptTag(tag)
    return bool(RUNNING)
