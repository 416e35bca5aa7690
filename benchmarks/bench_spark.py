"""Spark's read paths and the Parquet job against one process and against Spark's own
ceiling, on the same files in one run.

Writes a synthetic collection-enabled corpus (one generated stream, repeated within each
file), checks every path's frame count against a single-process scan, then times, each
measurement of a table taking turns with the others (one untimed round first, which also
warms Spark's JIT), best and median of ``--repeat``:

* reading into Spark (``noop`` sink, every row produced, nothing written), in one table
  for all columns, the default columns and six: the single-process decode into the
  batches Spark receives; the ``dcp`` data source; and Spark's ceiling, a Python data
  source that decodes nothing and replays the same record batches from an Arrow file, in
  as many partitions as the ``dcp`` source plans: no read path can take rows into Spark
  faster; for the default columns also the ``dcp`` source on the same bytes as one file
  split into byte ranges and ``binaryFile`` + ``mapInArrow`` / ``mapInPandas``;
* a filter on opcode and vbucket (a quarter of the frames) into ``noop``, with and
  without Python filter pushdown, and the ceiling filtered by Spark;
* Parquet partitioned by vbucket, for all columns, the default columns and six: the job
  (``write_parquet``: decoded and written in Spark's tasks), Spark's own
  ``read_dcp(...).write.partitionBy("vbucket").parquet``, Spark's ceiling into the same
  writer (replayed batches), one process doing the job's work (``parquet.TaskWriter``),
  and ``dcpfast convert`` in a process of its own (its own column set and types, one file,
  unpartitioned).

* Delta against Parquet (``--only delta``): ``write_delta`` and ``write_parquet`` on the
  same files, default columns: the cost of one Delta transaction against the renames;
* streaming (``--only stream``): the ``dcp`` stream reader with ``Trigger.AvailableNow``
  over the files into ``noop`` against the batch read of the same bytes, and the trigger
  latency of a small append (one stream of 200 changes) to a running query;
* the first job of a session (``--only cold``), each in a fresh process: Spark's own
  smallest write (``spark.range(1000).write.parquet``, the JVM's start included), the
  job's ``write_parquet`` on the same corpus, and one process doing the job's work:
  the target is a cold job within Spark's cold start plus twice the work plus 2 s.

The target, the job at >= 2.5x Spark's own partitioned write, is printed per
column set, from the medians.

    python benchmarks/bench_spark.py            # 16 files of 24 MB, local[2]
    python benchmarks/bench_spark.py --quick    # 2 files, one timed run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

import dcpfast
from dcpfast import spark as dspark
from dcpfast import testing
from dcpfast.io.ranges import BATCH_BYTES, Piece
from dcpfast.spark.convert import scanner_columns, to_record_batch
from dcpfast.spark.job import session
from dcpfast.spark.parquet import TaskWriter
from dcpfast.spark.schema import output_columns
from dcpfast.spark.source import list_files, read_piece

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite.common import machine, print_machine  # noqa: E402
from suite.timing import Timing, take_turns  # noqa: E402

PROJECTION = ["opcode", "vbucket", "cas", "by_seqno", "key", "value"]
COLUMN_SETS = (("all columns", "all"), ("default columns", None),
               (f"{len(PROJECTION)} columns", PROJECTION))
TARGET_JOB = 2.5
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def corpus(root: Path, files: int, copies: int, items: int) -> list[str]:
    root.mkdir(parents=True, exist_ok=True)
    stream = testing.synthetic_stream(items, seed=0, vbuckets=4, collections=True,
                                      sync_writes=True, value_size=205)
    paths = []
    for i in range(files):
        path = root / f"dump-{i}.dcp"
        with open(path, "wb") as f:
            for _ in range(copies):
                f.write(stream)
        paths.append(str(path))
    return paths


def single_process(paths, columns) -> int:
    schema = dspark.spark_arrow_schema(columns)
    frames = 0
    for path in paths:
        for batch in dcpfast.iter_batches(path, BATCH_BYTES,
                                          columns=scanner_columns(schema.names)):
            frames += to_record_batch(batch, path, schema).num_rows
    return frames


def one_process_job(paths, columns, out: Path) -> int:
    """The job's work in this process: every file through one ``TaskWriter``."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    writer = TaskWriter(pafs.LocalFileSystem(), str(out), "part",
                        dspark.spark_arrow_schema(columns), ("vbucket",),
                        collections=None, errors="strict")
    for uri, size in list_files(paths):
        writer.write(Piece(uri, 0, size, size))
    return writer.result()["frames"]


def convert(paths, columns, out: Path) -> None:
    """``dcpfast convert`` in a process of its own (the scanner columns of the set)."""
    names = [c for c in output_columns(columns)
             if c in dcpfast.schema.INDEX or c in ("key", "value")]
    subprocess.run([sys.executable, "-m", "dcpfast", "convert", *paths, "-o", str(out),
                    "-q", "--columns", ",".join(names)], check=True)


def write_batches(path: str, columns, out: Path) -> None:
    """The record batches the data source makes of one file, as an Arrow IPC file."""
    schema = dspark.spark_arrow_schema(columns)
    size = os.path.getsize(path)
    piece = Piece(path, 0, size, size)
    with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for rb in read_piece(piece, schema, collections=None, errors="strict"):
            writer.write_batch(rb)


def ceiling_source():
    """A data source replaying an Arrow file (option ``batches``) ``times`` times, spread
    over ``partitions`` partitions: Spark's own cost of taking in the rows, no decoding."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Replay(DataSource):
        @classmethod
        def name(cls):
            return "dcpfast_replay"

        def schema(self):
            from pyspark.sql.pandas.types import from_arrow_schema
            with pa.memory_map(self.options["batches"]) as source:
                return from_arrow_schema(pa.ipc.open_file(source).schema)

        def reader(self, schema):
            return Reader(self.options)

    class Reader(DataSourceReader):
        def __init__(self, options):
            self.path = options["batches"]
            self.count = int(options["partitions"])
            self.times = int(options["times"])

        def partitions(self):
            return [InputPartition(list(range(i, self.times, self.count)))
                    for i in range(self.count)]

        def read(self, partition):
            with pa.memory_map(self.path) as source:
                replay = pa.ipc.open_file(source)
                for _ in partition.value:
                    for i in range(replay.num_record_batches):
                        yield replay.get_batch(i)

    return Replay


class Table:
    """One table of measurements over the same bytes, taking turns."""

    def __init__(self, title: str, size: int, frames: int):
        self.title, self.size, self.frames = title, size, frames
        self.runs: list[tuple[Timing, object]] = []

    def add(self, label: str, fn, frames: int | None = None) -> None:
        self.runs.append((Timing(label, self.frames if frames is None else frames,
                                 self.size), fn))

    def run(self, repeat: int) -> list[dict]:
        take_turns(self.runs, repeat)
        print(f"\n{self.title}\n\n| path | best s | median s | MB/s (median) | "
              f"frames/s (median) |\n|---|---|---|---|---|")
        rows = []
        for timing, _ in self.runs:
            median = statistics.median(timing.times)
            print(f"| {timing.label} | {timing.best:.2f} | {median:.2f} | "
                  f"{self.size / 1e6 / median:,.0f} | {timing.frames / median / 1e6:,.2f} M |")
            rows.append({"path": timing.label, "times": timing.times, "median": median,
                         "mb_per_s": self.size / 1e6 / median})
        return rows


def _check(label: str, got: int, want: int) -> None:
    if got != want:
        raise SystemExit(f"FAILED: {label} gave {got:,} frames, the scan {want:,}")


def reading(spark, root, paths, joined, size, repeat) -> dict:
    """The read paths into the noop sink, each column set's data source and ceiling in
    one table (the default set also through byte ranges and the binaryFile paths)."""
    frames = single_process(paths, None)
    table = Table(f"Reading into Spark: {frames:,} frames", size, frames)
    spark_runs = {}
    for label, columns in COLUMN_SETS:
        n = len(output_columns(columns))
        table.add(f"one process: iter_batches + the batches Spark takes, {label} ({n})",
                  lambda columns=columns: single_process(paths, columns))
        replay = root / f"replay-{n}.arrow"
        write_batches(paths[0], columns, replay)
        planned = dspark.read_dcp(spark, str(root / "files"), columns=columns) \
            .rdd.getNumPartitions()
        spark_runs[f"dcp data source, {len(paths)} files, {label} ({n})"] = \
            dspark.read_dcp(spark, str(root / "files"), columns=columns)
        if columns is None:
            spark_runs[f"dcp data source, one file in byte ranges, {label} ({n})"] = \
                dspark.read_dcp(spark, str(joined), columns=columns)
            for method in ("arrow", "pandas"):
                spark_runs[f"binaryFile + mapIn{method.title()}, {len(paths)} files, "
                           f"{label} ({n})"] = dspark.read_dcp(spark, str(root / "files"),
                                                                method, columns=columns)
        spark_runs[f"Spark's ceiling: replayed batches, no decoding, {label} ({n}), "
                   f"{planned} partitions"] = _replay(spark, replay, planned, len(paths))
    for text, df in spark_runs.items():
        _check(text, df.count(), frames)
        table.add(text, lambda df=df: df.write.format("noop").mode("overwrite").save())
    return {"frames": frames, "rows": table.run(repeat)}


def _replay(spark, replay: Path, partitions: int, times: int):
    return (spark.read.format("dcpfast_replay").option("batches", str(replay))
            .option("partitions", partitions).option("times", times).load())


def pushdown(spark, root, paths, size, repeat) -> dict:
    """A filter on opcode and vbucket into noop, with and without pushdown."""
    from dcpfast import Opcode

    vbuckets = sorted({int(v) for v in dcpfast.read(paths[0]).only(Opcode.MUTATION)["vbucket"]})
    query = f"opcode = {int(Opcode.MUTATION)} and vbucket in ({vbuckets[0]}, {vbuckets[1]})"
    replay = root / "replay-default.arrow"
    write_batches(paths[0], None, replay)
    planned = dspark.read_dcp(spark, str(root / "files")).rdd.getNumPartitions()
    frames = dspark.read_dcp(spark, str(root / "files")).where(query).count()
    table = Table(f"A filter ({query}), default columns: {frames:,} frames kept", size,
                  frames)
    before = spark.conf.get(PUSHDOWN, "false")

    def run(enabled: bool, df_of):
        def go():
            spark.conf.set(PUSHDOWN, str(enabled).lower())
            try:
                df_of().where(query).write.format("noop").mode("overwrite").save()
            finally:
                spark.conf.set(PUSHDOWN, before)
        return go

    files = str(root / "files")
    table.add("dcp data source, Spark filters the rows", run(False, lambda: dspark.read_dcp(
        spark, files)))
    table.add("dcp data source, filters pushed to the scan", run(True, lambda: dspark.read_dcp(
        spark, files)))
    table.add("Spark's ceiling, Spark filters the rows", run(False, lambda: _replay(
        spark, replay, planned, len(paths))))
    return {"query": query, "frames": frames, "rows": table.run(repeat)}


def parquet(spark, label, columns, root, paths, size, repeat) -> dict:
    """The Parquet job against Spark's own writer, its ceiling and one process."""
    names = output_columns(columns)
    frames = single_process(paths, columns)
    replay = root / f"replay-{len(names)}.arrow"
    write_batches(paths[0], columns, replay)
    planned = dspark.read_dcp(spark, str(root / "files"), columns=columns) \
        .rdd.getNumPartitions()
    out = root / "out"
    table = Table(f"Parquet partitioned by vbucket, {label} ({len(names)})", size, frames)

    def job():
        shutil.rmtree(out / "job", ignore_errors=True)
        summary = dspark.write_parquet(spark, str(root / "files"), str(out / "job"),
                                       columns=columns)
        _check("write_parquet", summary["frames"], frames)

    def spark_writer(df_of, where):
        def go():
            df_of().write.mode("overwrite").partitionBy("vbucket").parquet(str(out / where))
        return go

    table.add("the job: write_parquet, decoded and written in the tasks", job)
    table.add("Spark's own: read_dcp(...).write.partitionBy(...).parquet", spark_writer(
        lambda: dspark.read_dcp(spark, str(root / "files"), columns=columns), "spark"))
    table.add("Spark's ceiling: replayed batches into its writer", spark_writer(
        lambda: _replay(spark, replay, planned, len(paths)), "ceiling"))
    table.add("one process: the job's work (TaskWriter)",
              lambda: _check("TaskWriter", one_process_job(paths, columns, out / "one"),
                             frames))
    table.add("dcpfast convert, one process, one file", lambda: convert(
        paths, columns, out / "convert.parquet"))
    rows = table.run(repeat)
    ratio = rows[1]["median"] / rows[0]["median"]
    print(f"\nthe job: {ratio:.1f}x Spark's own partitioned write (target >= {TARGET_JOB}x: "
          f"{'MET' if ratio >= TARGET_JOB else 'NOT MET'}); "
          f"{rows[2]['median'] / rows[0]['median']:.1f}x Spark's ceiling into Parquet")
    shutil.rmtree(out, ignore_errors=True)
    return {"label": label, "columns": list(names), "frames": frames, "rows": rows,
            "job_over_spark": ratio}


def delta(spark, root, paths, size, repeat) -> dict:
    """The Delta job against the Parquet job (default columns)."""
    frames = single_process(paths, None)
    out = root / "out"
    table = Table("Delta against Parquet, default columns", size, frames)

    def job(kind):
        def go():
            shutil.rmtree(out / kind, ignore_errors=True)
            write = dspark.write_delta if kind == "delta" else dspark.write_parquet
            _check(kind, write(spark, str(root / "files"), str(out / kind))["frames"], frames)
        return go

    table.add("write_parquet (commit: renames)", job("parquet"))
    table.add("write_delta (commit: one Delta transaction)", job("delta"))
    rows = table.run(repeat)
    print(f"\nDelta's commit costs {rows[1]['median'] - rows[0]['median']:+.2f} s "
          f"({rows[1]['median'] / rows[0]['median']:.2f}x the Parquet job)")
    shutil.rmtree(out, ignore_errors=True)
    return {"rows": rows}


def streaming(spark, root, paths, size, repeat) -> dict:
    """The stream reader against the batch read of the same bytes, and the latency of a
    trigger after a small append."""
    frames = single_process(paths, None)
    table = Table("Streaming against batch, default columns, into noop", size, frames)
    dspark.register(spark)

    def stream():
        check = Path(tempfile.mkdtemp(prefix="ckpt-", dir=root))
        query = spark.readStream.format("dcp").load(str(root / "files")).writeStream \
            .format("noop").option("checkpointLocation", str(check)) \
            .trigger(availableNow=True).start()
        query.awaitTermination()
        _check("stream", sum(p["numInputRows"] for p in query.recentProgress), frames)
        shutil.rmtree(check)

    table.add("batch: read_dcp into noop", lambda: dspark.read_dcp(
        spark, str(root / "files")).write.format("noop").mode("overwrite").save())
    table.add("stream: readStream.format('dcp'), AvailableNow, into noop", stream)
    rows = table.run(repeat)
    return {"rows": rows, "latency": _latency(spark, root, repeat)}


def _latency(spark, root, repeat) -> list[float]:
    """Seconds from a small append to the end of the micro-batch that holds it, on a
    query that triggers as soon as it can."""
    grow = root / "grow"
    shutil.rmtree(grow, ignore_errors=True)
    grow.mkdir()
    piece = testing.synthetic_stream(200, seed=11)
    (grow / "g.dcp").write_bytes(piece)
    seen: list[float] = []

    def batch(df, batch_id):
        if df.count():
            seen.append(time.perf_counter())

    query = spark.readStream.format("dcp").option("columns", "offset").load(str(grow)) \
        .writeStream.foreachBatch(batch).option("checkpointLocation", str(root / "lck")) \
        .start()
    delays = []
    try:
        while not seen:
            time.sleep(0.05)
        for _ in range(max(repeat, 3)):
            before = len(seen)
            at = time.perf_counter()
            with open(grow / "g.dcp", "ab") as f:
                f.write(piece)
            while len(seen) == before:
                time.sleep(0.01)
            delays.append(seen[-1] - at)
    finally:
        query.stop()
    print(f"\ntrigger latency of a {len(piece):,}-byte append: median "
          f"{statistics.median(delays):.2f} s, best {min(delays):.2f} s ({len(delays)} appends)")
    return delays


_COLD = """
import sys, time
began = time.perf_counter()
from dcpfast.spark.job import session
spark = session("{master}", "cold", log=sys.argv[2])
started = time.perf_counter()
if sys.argv[1] == "spark":
    spark.range(1000).write.parquet(sys.argv[3])
else:
    from dcpfast.spark import write_parquet
    write_parquet(spark, sys.argv[4], sys.argv[3])
done = time.perf_counter()
spark.stop()
print(started - began, done - started)
"""


def worker_imports(repeat: int) -> dict:
    """CPU seconds of what a job's Python worker imports at its start (pyspark's worker
    and Arrow serializers, pyarrow, the job's module): with pyspark from the zip Spark
    puts first on a worker's path, and through ``workers.launcher``, which takes it off
    there; fresh processes, taking turns, median of ``repeat`` (at least 3)."""
    import resource

    import pyspark

    from dcpfast.spark.workers import launcher

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = os.pathsep.join(str(p) for p in sorted(lib.glob("*.zip")))
    env = dict(os.environ, PYTHONPATH=zips)
    code = "import pyspark.daemon, pyspark.worker, pyspark.sql.pandas.serializers, pyarrow, " \
           "dcpfast.spark.sink"
    cpu: dict[str, list] = {"zip": [], "launcher": []}
    for _ in range(max(repeat, 3)):
        for kind, python in (("zip", sys.executable), ("launcher", launcher())):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([python, "-c", code], env=env, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[kind].append(after.ru_utime + after.ru_stime - before.ru_utime -
                             before.ru_stime)
    zipped, launched = statistics.median(cpu["zip"]), statistics.median(cpu["launcher"])
    print(f"\na Python worker's imports: {zipped:.2f} s of CPU with pyspark from its zip, "
          f"{launched:.2f} s through the launcher ({zipped - launched:.2f} s less for each "
          f"Python process Spark starts)")
    return cpu


def cold(root, paths, size, repeat, master) -> dict:
    """The first job of a session, each in a fresh process, against Spark's own first
    smallest write and one process doing the work."""
    frames = single_process(paths, None)
    results: dict[str, list] = {"spark": [], "job": [], "plain": [], "work": []}
    # the same job with PYSPARK_PYTHON naming another path to this interpreter: its
    # workers run it as it is (no launcher taking pyspark's zip off their path)
    plain = dict(os.environ, PYSPARK_PYTHON=os.path.join(os.path.dirname(sys.executable),
                                                         "python3"))
    for _ in range(repeat):
        for kind in ("spark", "job", "plain"):
            out = root / f"cold-{kind}"
            shutil.rmtree(out, ignore_errors=True)
            began = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _COLD.format(master=master),
                                   "spark" if kind == "spark" else "job",
                                   str(root / "cold.log"), str(out), str(root / "files")],
                                  capture_output=True, text=True, check=True,
                                  env=plain if kind == "plain" else None)
            total = time.perf_counter() - began
            start, job = (float(x) for x in done.stdout.split())
            results[kind].append((total, start, job))
        began = time.perf_counter()
        _check("TaskWriter", one_process_job(paths, None, root / "one-cold"), frames)
        results["work"].append(time.perf_counter() - began)
    spark = min(t for t, _, _ in results["spark"])
    job = min(t for t, _, _ in results["job"])
    work = min(results["work"])
    print(f"\nthe first job of a session, fresh processes, best of {repeat} ({size / 1e6:,.1f} "
          f"MB, {master}):\n\n| what | whole process s | Spark's start s | the job s |\n"
          f"|---|---|---|---|")
    for label, kind in (("Spark's own smallest write", "spark"), ("write_parquet", "job"),
                        ("write_parquet, workers without the launcher", "plain")):
        best = min(results[kind])
        print(f"| {label} | {best[0]:.2f} | {best[1]:.2f} | {best[2]:.2f} |")
    print(f"| one process doing the job's work | {work:.2f} | | |")
    bound = spark + 2 * work + 2
    print(f"\ncold job {job:.2f} s against Spark's cold start + 2x the work + 2 s = "
          f"{bound:.2f} s: {'MET' if job <= bound else 'NOT MET'}")
    return {"runs": results, "bound": bound, "worker_imports": worker_imports(repeat)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small corpus, one timed run")
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--copies", type=int, default=1, help="stream copies per file")
    parser.add_argument("--items", type=int, default=88_000, help="document changes per stream")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--only", choices=["reading", "pushdown", "parquet", "delta", "stream",
                                           "cold"], action="append",
                        help="run only these tables (default: all)")
    parser.add_argument("--dir", help="write the corpus here (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.files, args.copies, args.repeat = 2, 1, 1
    only = set(args.only or ("reading", "pushdown", "parquet", "delta", "stream", "cold"))

    root = Path(args.dir or tempfile.mkdtemp(prefix="dcpfast-bench-spark-"))
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    paths = corpus(root / "files", args.files, args.copies, args.items)
    size = sum(os.path.getsize(p) for p in paths)
    joined = root / "one" / "dump.dcp"
    joined.parent.mkdir(exist_ok=True)
    with open(joined, "wb") as out:
        for path in paths:
            out.write(Path(path).read_bytes())
    info = machine()
    print_machine(info)
    print(f"corpus: {len(paths)} files, {size / 1e6:,.1f} MB in {root} "
          f"({time.perf_counter() - start:.1f} s)")
    report: dict = {"machine": info, "files": len(paths), "bytes": size,
                    "master": args.master, "repeat": args.repeat}

    if "cold" in only:                    # fresh processes, before this one starts Spark
        report["cold"] = cold(root, paths, size, args.repeat, args.master)
    spark = session(args.master, "dcpfast-bench",
                           conf={"spark.sql.shuffle.partitions": "2",
                                 "spark.driver.memory": "3g"}, log=str(root / "spark.log"))
    spark.dataSource.register(ceiling_source())
    import pyspark
    print(f"pyspark {pyspark.__version__}, master {args.master}, best and median of "
          f"{args.repeat} runs taking turns")
    try:
        if "reading" in only:
            report["reading"] = reading(spark, root, paths, joined, size, args.repeat)
        if "pushdown" in only:
            report["pushdown"] = pushdown(spark, root, paths, size, args.repeat)
        if "parquet" in only:
            report["parquet"] = [parquet(spark, label, columns, root, paths, size,
                                         args.repeat) for label, columns in COLUMN_SETS]
        if "delta" in only:
            report["delta"] = delta(spark, root, paths, size, args.repeat)
        if "stream" in only:
            report["stream"] = streaming(spark, root, paths, size, args.repeat)
    finally:
        spark.stop()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
