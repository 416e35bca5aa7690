"""The ``spark-decode`` job: an embedded or remote Spark session, a progress bar of its
tasks, and DCP dumps decoded into a Parquet dataset."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Sequence

from .source import list_files, read_dcp


def session(master: str | None = None, app_name: str = "dcpfast", *,
            conf: dict | None = None):
    """A SparkSession: embedded ``local[*]`` by default, or on ``master``.

    On a local master the Python workers run this interpreter (``PYSPARK_PYTHON``), so
    they find the same dcpfast, and Spark's web UI stays off.
    """
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local"):
        builder = builder.config("spark.ui.enabled", "false")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def task_progress(spark, desc: str, *, enabled: bool = True):
    """A tqdm bar of the finished tasks of the running Spark stages, polled twice a
    second while the block runs; on standard error, and only when that is a terminal."""
    from tqdm import tqdm

    if not (enabled and sys.stderr.isatty()):
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    bar = tqdm(desc=desc, unit="task")
    stop = threading.Event()

    def poll():
        while not stop.wait(0.5):
            stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
            stages = [st for st in stages if st is not None]
            if stages:
                bar.total = sum(st.numTasks for st in stages)
                bar.n = sum(st.numCompletedTasks for st in stages)
                bar.refresh()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        yield
    finally:
        stop.set()
        poller.join()
        bar.close()


def decode_to_parquet(inputs: Sequence[str], out: str, *, master: str | None = None,
                      method: str = "datasource", partition_by: Sequence[str] = ("vbucket",),
                      columns=None, values: bool = False, errors: str = "strict",
                      collections: bool | None = None, mode: str = "errorifexists",
                      progress: bool = True, spark=None) -> dict:
    """Decode DCP dumps into a Parquet dataset at ``out``, partitioned by ``partition_by``.

    Returns ``{"frames", "bytes", "seconds", "partitions"}``. Runs on ``spark`` if given,
    else on a session from ``session(master)``.
    """
    own = spark is None
    if own:
        spark = session(master, "dcpfast spark-decode")
    try:
        size = sum(s for _, s in list_files(inputs)) if method == "datasource" else None
        began = time.perf_counter()
        df = read_dcp(spark, list(inputs), method, columns=columns, values=values,
                      errors=errors, collections=collections)
        missing = [c for c in partition_by if c not in df.columns]
        if missing:
            raise ValueError(f"cannot partition by {missing}: not among the output columns")
        writer = df.write.mode(mode)
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        with task_progress(spark, "decoding", enabled=progress):
            writer.parquet(out)
        seconds = time.perf_counter() - began
        frames = spark.read.parquet(out).count()
        return {"frames": frames, "bytes": size, "seconds": seconds,
                "partitions": list(partition_by)}
    finally:
        if own:
            spark.stop()


def spark_error(exc: BaseException) -> str:
    """A one-line account of a failed Spark job: the decoding error inside it, if any."""
    text = str(exc)
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return "Spark could not start: it needs Java 17 or later (on PATH, or JAVA_HOME)"
    found = re.search(r"DcpFormatError: ([^\n]*)(?:\n(while decoding [^\n]*))?", text)
    if found:
        return found.group(1) + (f" ({found.group(2)})" if found.group(2) else "")
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
