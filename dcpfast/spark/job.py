"""The ``spark-decode`` job: a Spark session of its own (quiet, its output in a log file),
a progress bar of its tasks, the checks made before Spark starts, and one line for a
failed job."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from collections.abc import Sequence

from . import output
from .sink import checked, write_parquet
from .source import check_inputs


def session(master: str | None = None, app_name: str = "dcpfast", *,
            conf: dict | None = None, log: str | None = None):
    """A SparkSession: embedded ``local[*]`` by default, or on ``master``.

    On a local master the Python workers run this interpreter (``PYSPARK_PYTHON``), so
    they find the same dcpfast, and Spark's web UI stays off. When this call starts Spark
    (no session is running yet), Spark's own output goes to the file ``log`` if one is
    given: the JVM's messages, its log and what the Python workers print; else its log
    level is set to ERROR. A session already running is returned as it is.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    master = master or "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {"spark.master": master, "spark.app.name": app_name,
                "spark.ui.showConsoleProgress": "false"}
    if master.startswith("local"):
        settings["spark.ui.enabled"] = "false"
    settings.update(conf or {})
    if running_session() is not None:
        return SparkSession.builder.getOrCreate()
    if log is not None:
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf().setAll(list(settings.items()))
        with open(log, "ab") as sink:
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": sink,
                                                               "stderr": sink})
        SparkContext(conf=spark_conf, gateway=gateway)
        return SparkSession.builder.getOrCreate()
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def running_session():
    """The session this process runs, active in this thread or made in another one
    (``getActiveSession`` sees only this thread's), or None."""
    from pyspark.sql import SparkSession

    try:
        return SparkSession.active()
    except Exception:                       # PySparkRuntimeError: none
        return None


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
                      spark=None, log: str | None = None, progress: bool = True,
                      **options) -> dict:
    """``write_parquet`` on ``spark``, or on a session of its own (``session(master,
    log=log)``, stopped at the end); the inputs and the output are checked before Spark
    starts. ``options`` go to ``write_parquet``; the summary it returns gains
    ``startup_seconds``, the time it took Spark to start (about 0 where a session was
    running: it is used, and left running)."""

    checked(options.get("columns"), options.get("values", False),
            options.get("partition_by", ("vbucket",)), options.get("errors", "strict"))
    check_inputs(inputs)
    output.check(out, options.get("mode", "error"))
    began = time.perf_counter()
    own = spark is None and running_session() is None
    if spark is None:
        spark = session(master, "dcpfast spark-decode", log=log)
    started = time.perf_counter() - began
    try:
        with task_progress(spark, "decoding", enabled=progress):
            summary = write_parquet(spark, inputs, out, **options)
    finally:
        if own:
            spark.stop()
    summary["startup_seconds"] = started
    return summary


def spark_error(exc: BaseException) -> str:
    """A one-line account of a failed Spark job: the error a task raised (a malformed
    dump names the file, the byte range and the offset), else the first line."""
    message = str(exc)
    if "JAVA_GATEWAY_EXITED" in message or "Java gateway process exited" in message:
        return "Spark could not start: it needs Java 17 or later (on PATH, or JAVA_HOME)"
    lines = message.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith("Traceback (most recent call last):")]
    if starts:                          # the last traceback: the exception the task raised
        rest = [x for x in lines[starts[-1] + 1:] if x.strip()]
        raised = next((k for k, x in enumerate(rest) if not x[:1].isspace()), None)
        if raised is not None:
            kind, _, said = rest[raised].partition(": ")
            kind = kind.rsplit(".", 1)[-1]
            said = said if kind in ("DcpFormatError", "OSError") else f"{kind}: {said}"
            note = re.match(r"while decoding (.*)", rest[raised + 1]) \
                if raised + 1 < len(rest) else None
            return f"{note.group(1)}: {said}" if note else said
    found = [line for line in lines if line.strip()]
    return found[0] if found else type(exc).__name__
