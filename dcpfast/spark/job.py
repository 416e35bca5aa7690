"""The ``spark-decode`` job: a Spark session of its own (quiet, its output in a log file),
a progress bar of its tasks, the checks made before Spark starts, and one line for a
failed job."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Sequence

from . import deltatable, output
from .schema import file_schema
from .sink import RUNNING, cancel_running, checked, write_delta, write_parquet
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


class Ended(BaseException):
    """The process was asked to end (SIGINT, SIGTERM, SIGHUP) while a job ran; ``written``:
    the job had written its whole output by the time it could stop (the signal came as it
    ended), else it left nothing."""

    def __init__(self, signum: int, written: bool = False):
        super().__init__(signum)
        self.signum, self.written = signum, written


class _Signals:
    """What ``signals_end_the_job`` caught, and the function that takes SIGINT back."""

    def __init__(self, handler=None):
        self.caught: list[int] = []
        self.handler = handler

    def again(self) -> None:
        """Take SIGINT back (a SparkContext installs its own handler as it starts)."""
        if self.handler is not None and signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
            signal.signal(signal.SIGINT, self.handler)

    def ended(self) -> Ended | None:
        return Ended(self.caught[0]) if self.caught else None


@contextlib.contextmanager
def signals_end_the_job():
    """While the block runs, SIGINT, SIGTERM and SIGHUP (unless ignored, as SIGHUP under
    nohup) end the job: a Spark job under way is cancelled from the handler (it then fails
    as Spark's own way, its partial output removed, and ``ended()`` says why), else
    ``Ended`` is raised at once. The handlers before are back afterwards; outside the main
    thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield _Signals()
        return

    def end(signum, frame):
        if signals.caught:                        # a second signal waits for the cleanup
            return
        signals.caught.append(signum)
        if not RUNNING:                           # no Spark job to cancel: unwind now
            raise Ended(signum)
        # the main thread may be inside a py4j call (waiting for the job): a py4j call from
        # this handler would re-enter its connection and fail, so another thread cancels
        threading.Thread(target=cancel_running, name="dcpfast-cancel", daemon=True).start()

    signals = _Signals(end)
    ours = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    before = {s: signal.signal(s, end) for s in ours if signal.getsignal(s) != signal.SIG_IGN}
    try:
        yield signals
    finally:
        for s, handler in before.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


# long: the checks of both formats before Spark starts, the session's life and the signals
def decode_to_parquet(inputs: Sequence[str], out: str, *, master: str | None = None,
                      spark=None, log: str | None = None, progress: bool = True,
                      format: str = "parquet", signals: bool = False, **options) -> dict:
    """``write_parquet`` (``format="delta"``: ``write_delta``) on ``spark``, or on a session
    of its own (``session(master, log=log)``, stopped at the end); the inputs and the
    output are checked before Spark starts. ``options`` go to ``write_parquet`` or
    ``write_delta``; the summary it returns gains ``startup_seconds``, the time it took
    Spark to start (about 0 where a session was running: it is used, and left running).

    ``signals``: SIGINT, SIGTERM and SIGHUP end the job cleanly (``signals_end_the_job``)
    and raise ``Ended``, as ``dcpfast spark-decode`` wants.
    """
    if format not in ("parquet", "delta"):
        raise ValueError(f"format must be parquet or delta, not {format!r}")
    schema, partition_by = checked(options.get("columns"), options.get("values", False),
                                   options.get("partition_by", ("vbucket",)),
                                   options.get("errors", "strict"))
    absolute = os.path.abspath(out) if "://" not in out else out
    check_inputs(inputs, exclude=[absolute])
    if format == "delta":
        deltatable.check(out, options.get("mode", "append"), file_schema(schema),
                         partition_by, options.get("app_id"), options.get("app_version", 0))
    else:
        output.check(out, options.get("mode", "error"))
    with signals_end_the_job() if signals else contextlib.nullcontext(_Signals()) as caught:
        began = time.perf_counter()
        own = spark is None and running_session() is None
        try:
            if spark is None:
                spark = session(master, "dcpfast spark-decode", log=log)
            caught.again()
            started = time.perf_counter() - began
            with task_progress(spark, "decoding", enabled=progress):
                job = write_delta if format == "delta" else write_parquet
                summary = job(spark, inputs, out, **options)
        except BaseException as e:
            if own and spark is not None:
                with contextlib.suppress(Exception):
                    spark.stop()
            ended = caught.ended()
            if ended is not None and ended is not e:
                raise ended from None
            raise
        if own:
            spark.stop()
        if caught.caught:                         # it ended before the cancel could stop it
            raise Ended(caught.caught[0], written=True)
    summary["startup_seconds"] = started
    return summary


#: The errors whose message is the whole story (dcpfast words them; a stream reader's
#: refusals are ValueErrors, a file that is no longer the one read a FileChanged); others
#: keep their kind in front.
_OURS = ("DcpFormatError", "OSError", "FileNotFoundError", "ValueError", "FileChanged")


def spark_error(exc: BaseException) -> str:
    """A one-line account of a failed Spark job: the error a task raised (a malformed
    dump names the file, the byte range and the offset), else the first line."""
    message = str(exc)
    if "JAVA_GATEWAY_EXITED" in message or "Java gateway process exited" in message:
        return "Spark could not start: it needs Java 17 or later (on PATH, or JAVA_HOME)"
    lines = message.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.endswith("Traceback (most recent call last):")]
    if starts:                          # the last traceback: the exception the task raised
        rest = [x for x in lines[starts[-1] + 1:] if x.strip()]
        raised = next((k for k, x in enumerate(rest) if not x[:1].isspace()), None)
        if raised is not None:
            kind, _, said = rest[raised].partition(": ")
            kind = kind.rsplit(".", 1)[-1]
            said = said if kind in _OURS else f"{kind}: {said}"
            note = re.match(r"while decoding (.*)", rest[raised + 1]) \
                if raised + 1 < len(rest) else None
            return f"{note.group(1)}: {said}" if note else said
    found = [line for line in lines if line.strip()]
    return found[0] if found else type(exc).__name__
