"""Throughput of the three Spark read paths against a single-process scan of the same files.

Writes a synthetic collection-enabled corpus (one generated stream, repeated within each
file), then, for every column set (all columns, and a projection of six), times best of
``--repeat`` after a warm-up run (the Spark paths take turns, after one untimed round that
warms Spark's JIT for all of them alike):

* single process: ``dcpfast.iter_batches`` over every file, each batch turned into the
  Arrow record batch Spark receives (``dcpfast.spark.to_record_batch``);
* each ``read_dcp`` method on ``local[N]`` into Spark's ``noop`` sink (every row is
  produced, nothing is written); the data source also on the same bytes as one file,
  split into byte ranges;
* Spark's ceiling: a Python data source that decodes nothing and hands Spark the same
  record batches, replayed from an Arrow file of one corpus file's batches, in as many
  partitions as the data source plans. It is what Spark itself costs to take those rows
  in, with the same task overhead.

Before timing, each path's frame count is checked against the single-process scan. The
issue's targets (data source >= 300 MB/s and >= 3x mapInPandas) are printed with the
measured figures for each column set.

    python benchmarks/bench_spark.py            # 16 files of 24 MB, local[2]
    python benchmarks/bench_spark.py --quick    # 2 files, one timed run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

import dcpfast
from dcpfast import spark as dspark
from dcpfast import testing

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:              # the suite package next to this script
    sys.path.insert(0, str(HERE))

from suite.common import machine, print_machine  # noqa: E402
from suite.timing import best  # noqa: E402

PROJECTION = ["opcode", "vbucket", "cas", "by_seqno", "key", "value"]
TARGET_MB_S, TARGET_RATIO = 300, 3.0


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
    schema = dspark.arrow_schema(columns)
    frames = 0
    for path in paths:
        for batch in dcpfast.iter_batches(path, dspark.BATCH_BYTES,
                                          columns=dspark.convert.scanner_columns(schema.names)):
            frames += dspark.to_record_batch(batch, path, schema).num_rows
    return frames


def write_batches(path: str, columns, out: Path) -> None:
    """The record batches the data source makes of one file, as an Arrow IPC file."""
    schema = dspark.arrow_schema(columns)
    size = os.path.getsize(path)
    piece = dspark.Piece(path, 0, size, size)
    with pa.OSFile(str(out), "wb") as sink, pa.ipc.new_file(sink, schema) as writer:
        for rb in dspark.read_piece(piece, schema, collections=None, errors="strict"):
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


def column_set(spark, label: str, columns, root: Path, paths: list[str], joined: Path,
               size: int, repeat: int) -> dict | None:
    """Check and time every path for one column set, print its table and targets; its
    part of the report, or None when a path's frame count differs from the scan's."""
    names = dspark.output_columns(columns)
    print(f"{label}: {', '.join(names)}")
    seconds = best(lambda: single_process(paths, columns), repeat)
    frames = single_process(paths, columns)
    rows = [("single process: iter_batches + Arrow", "single", seconds)]
    replay = root / f"replay-{len(names)}.arrow"
    write_batches(paths[0], columns, replay)
    runs = [("datasource", root / "files", f"{len(paths)} files"),
            ("datasource", joined, "one file in byte ranges"),
            ("arrow", root / "files", f"{len(paths)} files"),
            ("pandas", root / "files", f"{len(paths)} files"),
            ("ceiling", replay, "replayed record batches, no decoding")]
    planned = dspark.read_dcp(spark, str(root / "files"), "datasource",
                              columns=columns).rdd.getNumPartitions()
    frames_of = []
    for method, where, what in runs:
        if method == "ceiling":
            df = (spark.read.format("dcpfast_replay").option("batches", str(where))
                  .option("partitions", planned).option("times", len(paths)).load())
        else:
            df = dspark.read_dcp(spark, str(where), method, columns=columns)
        count = df.count()                      # the check
        if count != frames:
            print(f"FAILED: {method} ({what}) gave {count:,} frames, the scan {frames:,}")
            return None
        frames_of.append(df)
    # every path once more to warm Spark's JIT, then the paths take turns
    times = [[] for _ in runs]
    for turn in range(repeat + 1):
        for i, df in enumerate(frames_of):
            start = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            if turn:
                times[i].append(time.perf_counter() - start)
    for (method, _, what), taken in zip(runs, times):
        rows.append((f"spark {method}, {what}, noop sink", method, min(taken)))

    print(f"\n{frames:,} frames; the data source plans {planned} partitions for "
          f"{len(paths)} files")
    print("\n| path | seconds | MB/s | frames/s |\n|---|---|---|---|")
    for text, _, seconds in rows:
        print(f"| {text} | {seconds:.2f} | {size / 1e6 / seconds:,.0f} | "
              f"{frames / seconds / 1e6:,.2f} M |")
    first = {}
    for _, method, seconds in rows:
        first.setdefault(method, seconds)
    mb_s = size / 1e6 / first["datasource"]
    ratio = first["pandas"] / first["datasource"]
    ceiling = size / 1e6 / first["ceiling"]
    print(f"\ndata source {mb_s:,.0f} MB/s (target >= {TARGET_MB_S}: "
          f"{'MET' if mb_s >= TARGET_MB_S else 'NOT MET'}); "
          f"{ratio:.1f}x mapInPandas (target >= {TARGET_RATIO:.0f}x: "
          f"{'MET' if ratio >= TARGET_RATIO else 'NOT MET'}); "
          f"Spark's ceiling for these rows {ceiling:,.0f} MB/s, the data source "
          f"reaches {mb_s / ceiling:.0%} of it\n")
    return {"label": label, "columns": list(names), "frames": frames, "partitions": planned,
            "paths": [{"path": text, "seconds": s, "mb_per_s": size / 1e6 / s,
                       "frames_per_s": frames / s} for text, _, s in rows],
            "datasource_mb_per_s": mb_s, "datasource_over_pandas": ratio,
            "ceiling_mb_per_s": ceiling}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small corpus, one timed run")
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--copies", type=int, default=1, help="stream copies per file")
    parser.add_argument("--items", type=int, default=88_000, help="document changes per stream")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", help="write the corpus here (default: a temporary directory)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    if args.quick:
        args.files, args.copies, args.repeat = 2, 1, 1

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

    spark = dspark.session(args.master, "dcpfast-bench",
                           conf={"spark.sql.shuffle.partitions": "2",
                                 "spark.driver.memory": "3g"})
    spark.dataSource.register(ceiling_source())
    import pyspark
    print(f"pyspark {pyspark.__version__}, master {args.master}\n")
    report = {"machine": info, "files": len(paths), "bytes": size, "master": args.master,
              "repeat": args.repeat, "column_sets": []}
    try:
        for label, columns in (("all columns", None),
                               (f"{len(PROJECTION)} columns", PROJECTION)):
            part = column_set(spark, label, columns, root, paths, joined, size, args.repeat)
            if part is None:
                return 1
            report["column_sets"].append(part)
    finally:
        spark.stop()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
