"""The Parquet and Delta jobs: ``write_parquet`` and ``write_delta`` decode DCP dumps into
Parquet files in Spark's tasks and commit them in the driver's process.

The driver plans the pieces of the input (``io.ranges.plan``) and runs one Spark task per
planned partition: ``spark.range(n)`` in ``n`` partitions, each task's id mapped
(``mapInArrow``) to ``run_task``, which decodes the partition's pieces and writes Parquet
with pyarrow (``parquet.TaskWriter``) and returns only what it wrote, as one row. The
driver collects one result per partition, that of the attempt Spark took (an attempt
that failed, or lost to a speculative twin, is never among them), and commits: the
Parquet job moves the files out of the attempts' staging directories (``output``), the
Delta job, whose tasks write in the table's folders, adds them to the table in one
transaction (``deltatable``); a failed job deletes them. No row of frames passes through
Spark, and no Python process starts but the tasks' workers: a data source write would
start one for its planning and one for its commit.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import time
from collections.abc import Sequence

import pyarrow as pa

from .. import protocol as P
from ..errors import checked_mode
from ..io.ranges import BATCH_BYTES, LEAD_IN_BYTES, PARTITION_BYTES, Piece
from . import deltatable, output
from .joined import planned
from .parquet import TaskWriter, partition_columns
from .schema import file_schema, spark_arrow_schema
from .source import check_inputs, checked_joined, filesystem, parallelism
from .workers import identity, same_dcpfast, worker_python

log = logging.getLogger("dcpfast.spark")

#: The one column of a task's result row: its ``TaskWriter.result`` as JSON.
RESULT = "result string"


def run_task(options: dict, batches):
    """``mapInArrow`` function of a job: for each partition id in ``batches`` (one, as the
    job plans), decode that partition's pieces and write their Parquet files; yields one
    row per id, what was written."""
    from pyspark import TaskContext

    same_dcpfast(options.get("dcpfast"))
    task = TaskContext.get()
    assert task is not None                      # in a Spark task
    parts = json.loads(options["parts"])
    out, job = options["out"], options["job"]
    store, root = filesystem(out)
    for rb in batches:
        for k in rb.column(0).to_pylist():
            attempt = f"{k:05d}-{task.attemptNumber()}-{task.taskAttemptId()}"
            if options["layout"] == "delta":     # straight into the table: the log decides
                where = root
                prefix = f"part-{k:05d}-{job}-{task.attemptNumber()}-{task.taskAttemptId()}"
            else:
                where = f"{output.staging(out, job)}/{attempt}"
                prefix = f"part-{k:05d}-{job}"
            writer = TaskWriter(store, where, prefix, file_schema(spark_arrow_schema(
                options["columns"].split(","), options["values"])),
                [c for c in options["partition_by"].split(",") if c],
                collections=options["collections"], errors=options["errors"],
                null_folder=deltatable.NULL_FOLDER if options["layout"] == "delta" else None,
                batch_bytes=options["batch_bytes"], lead_in=options["lead_in"],
                max_frame_size=options["max_frame_size"])
            for uri, lo, hi, size, files in parts[k]:
                writer.write(Piece(uri, lo, hi, size, tuple(map(tuple, files))))
            result = dict(writer.result(), attempt=attempt, dcpfast=identity())
            if options["layout"] == "delta" and not deltatable.settle(
                    out, job, [path for path, _, _ in result["files"]]):
                raise RuntimeError(f"job {job} ended before this attempt's files were "
                                   "written: they are deleted")
            yield pa.RecordBatch.from_pylist([{"result": json.dumps(result)}])


def _job(spark, inputs, out: str, *, columns, values: bool, partition_by,
         errors: str, partition_bytes: int, joined: str):
    """What a job starts from: its schema, partition columns, output location, the
    inputs' files (the output never among them) and their planned partitions, the
    streams ``joined`` as it says (``joined.planned``)."""
    schema, partition_by = checked(columns, values, partition_by, errors)
    checked_joined(joined)
    paths = [os.fspath(inputs)] if isinstance(inputs, (str, os.PathLike)) else \
        [os.fspath(p) for p in inputs]
    out = os.path.abspath(out) if "://" not in out else out
    check_inputs(paths, exclude=[out])
    parts = planned(paths, joined, partition_bytes, parallelism(spark), exclude=[out])
    return schema, partition_by, out, parts


def _options(schema, partition_by, *, values, collections, errors, batch_bytes, lead_in,
             max_frame_size) -> dict:
    """The options of ``run_task`` that every job passes."""
    return dict(columns=",".join(schema.names), values=bool(values),
                partition_by=",".join(partition_by), collections=collections, errors=errors,
                batch_bytes=batch_bytes, lead_in=lead_in, max_frame_size=max_frame_size,
                dcpfast=identity())


def write_parquet(spark, inputs, out: str, *, partition_by: Sequence[str] = ("vbucket",),
                  columns=None, values: bool = False, collections: bool | None = None,
                  errors: str = "strict", mode: str = "error",
                  partition_bytes: int = PARTITION_BYTES, batch_bytes: int = BATCH_BYTES,
                  lead_in: int = LEAD_IN_BYTES,
                  max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
                  joined: str = "files") -> dict:
    """Decode DCP dumps (``inputs``: files, directories or URIs, as ``read_dcp`` takes)
    into a Parquet dataset at ``out``, partitioned Hive-style by ``partition_by``, in
    Spark's tasks; returns the summary of what was written.

    ``columns``, ``values``, ``collections``, ``errors`` and ``joined`` as for
    ``read_dcp`` (the same rows and types). ``mode``: ``"error"`` (``out`` must not
    exist or be empty), ``"overwrite"`` (replace the Parquet dataset at ``out``, and
    nothing else) or ``"append"``. Frames that do not carry a partition column
    (responses carry no vbucket) go into its value ``-1``. ``out`` is a local path or a
    URI that every executor reaches.

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
                                            errors=errors, partition_bytes=partition_bytes,
                                            joined=joined)
    created = output.prepare(out, mode)
    job = output.start(out)
    committed = False
    try:
        results = _run(spark, parts, out=out, job=job, layout="parquet",
                       **_options(schema, partition_by, values=values, collections=collections,
                                  errors=errors, batch_bytes=batch_bytes, lead_in=lead_in,
                                  max_frame_size=max_frame_size))
        output.commit(out, job, mode, [(r["attempt"], r) for r in results])
        committed = True
    finally:
        output.finish(out, job, created, committed)
    result = output.summary(results)
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
                max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, joined: str = "files") -> dict:
    """Decode DCP dumps into the Delta table at ``table`` (a local path or a URI that
    every executor and ``deltalake`` reach), partitioned by ``partition_by``, in Spark's
    tasks, and commit every task's files in one Delta transaction (``deltalake``:
    ``pip install 'dcpfast[delta]'``); returns the summary of what was committed.

    ``columns``, ``values``, ``collections``, ``errors`` and ``joined`` as for
    ``read_dcp``, the rows those of ``write_parquet`` (frames without a partition value:
    null). ``mode``: ``"append"`` (the default; the table is created where there is none),
    ``"overwrite"`` (the table's contents replaced in the same one commit) or ``"error"``
    (no table there yet). A directory that is not a Delta table is written to only when
    it is empty or holds nothing but what dcpfast's jobs leave before their first commit
    (those of a job killed outright, which are deleted).

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
                                            errors=errors, partition_bytes=partition_bytes,
                                            joined=joined)
    schema = file_schema(schema)
    existed, done = deltatable.check(out, mode, schema, partition_by, app_id, app_version)
    if done is not None:
        return _nothing(done, began)
    store, root = filesystem(out)
    if not existed:
        deltatable.recover(out)
        store.create_dir(root, recursive=True)
    job = output.new_job()
    options = _options(schema, partition_by, values=values, collections=collections,
                       errors=errors, batch_bytes=batch_bytes, lead_in=lead_in,
                       max_frame_size=max_frame_size)
    try:
        with store.open_output_stream(deltatable.running(out, job)) as marker:
            marker.write(output.owner())
        results = _run(spark, parts, out=out, job=job, layout="delta", **options)
        result = deltatable.commit(out, job, mode, schema, partition_by, results,
                                   app_id=app_id, app_version=app_version)
    except BaseException:
        deltatable.sweep(out, job, keep=())
        if not existed:
            output.drop_if_empty(store, root)
        raise
    if result is None:                        # a concurrent run of app_id committed first
        return _nothing(deltatable.version(out), began)
    _logged(result)
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


def _run(spark, parts: list[list[Piece]], **options) -> list[dict]:
    """Run one task per planned partition (``run_task``) and return their results, one
    per partition, in partition order. The job is tagged, so that a signal cancels it
    (``cancel_running``)."""
    if not parts:
        return []
    options["parts"] = json.dumps([[[p.uri, p.lo, p.hi, p.size, p.files] for p in part]
                                   for part in parts])
    ids = spark.range(0, len(parts), 1, len(parts))
    with worker_python(spark):          # the tasks run this dcpfast: see workers
        tasks = ids.mapInArrow(functools.partial(run_task, options), RESULT)
    group = f"dcpfast-{options['job']}"
    context = spark.sparkContext
    before = {key: context.getLocalProperty(key) for key in _JOB_GROUP}
    context.setJobGroup(group, "dcpfast: decoding and writing", interruptOnCancel=True)
    RUNNING.append((spark, group))
    try:
        rows = tasks.collect()
    except BaseException:
        _ended(context, group)
        raise
    finally:
        RUNNING.remove((spark, group))
        with contextlib.suppress(Exception):
            for key, value in before.items():     # the thread's own group back, or none
                context.setLocalProperty(key, value)
    return [json.loads(row[0]) for row in rows]


#: How long a failed job waits for its tasks to end (Spark kills them: see ``_ended``).
ENDING_SECONDS = 60.0


def _ended(context, group: str, seconds: float = ENDING_SECONDS) -> None:
    """After the jobs of ``group`` failed or were cancelled: wait until none of their
    tasks runs any more. Spark reports a job's failure as soon as it is decided and kills
    the tasks still running after that; until each is gone it may still write files,
    which the job's clean-up must come after (or they stay)."""
    tracker = context.statusTracker()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            stages = [s for j in tracker.getJobIdsForGroup(group)
                      if (info := tracker.getJobInfo(j)) is not None for s in info.stageIds]
            if not any(getattr(tracker.getStageInfo(s), "numActiveTasks", 0)
                       for s in stages):
                return
        except Exception:                   # a stopped context: nothing of it runs
            return
        time.sleep(0.05)


#: The Spark jobs of ``_run`` under way, as ``(session, job group)``: what a signal
#: cancels before the job unwinds.
RUNNING: list = []
#: The thread's properties that make its job group (``SparkContext.setJobGroup``).
_JOB_GROUP = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def cancel_running() -> bool:
    """Cancel the Spark jobs under way (``RUNNING``), their tasks interrupted; whether
    there were any. (A job group, not a session's operation tag: a classic session's
    ``interruptTag`` stops no job.)"""
    for spark, group in list(RUNNING):
        with contextlib.suppress(Exception):
            spark.sparkContext.cancelJobGroup(group)
    return bool(RUNNING)
