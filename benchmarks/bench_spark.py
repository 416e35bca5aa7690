"""Throughput of the three Spark read paths against a single-process scan of the same files.

Writes a synthetic collection-enabled corpus (one generated stream, repeated within each
file), then times, best of ``--repeat`` after a warm-up run:

* single process: ``dcpfast.iter_batches`` over every file, each batch turned into the
  Arrow record batch Spark receives (``dcpfast.spark.to_record_batch``);
* each ``read_dcp`` method on ``local[N]`` into Spark's ``noop`` sink (every row is
  produced, nothing is written).

Before timing, each path's frame count is checked against the single-process scan.

    python benchmarks/bench_spark.py            # 16 files of 24 MB, local[2]
    python benchmarks/bench_spark.py --quick    # 2 files

The data source is also timed on the same bytes as one file, split into byte ranges.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import dcpfast
from dcpfast import spark as dspark
from dcpfast import testing


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
                                          columns=dspark._scanner_columns(schema.names)):
            frames += dspark.to_record_batch(batch, path, schema).num_rows
    return frames


def best(fn, repeat: int) -> tuple[float, object]:
    result, times = None, []
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small corpus, one timed run")
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--copies", type=int, default=1, help="stream copies per file")
    parser.add_argument("--items", type=int, default=88_000, help="document changes per stream")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--columns", help="comma-separated projection (default: every column)")
    parser.add_argument("--dir", help="write the corpus here (default: a temporary directory)")
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
    print(f"corpus: {len(paths)} files, {size / 1e6:,.1f} MB in {root} "
          f"({time.perf_counter() - start:.1f} s); python {sys.version.split()[0]}, "
          f"dcpfast core {dcpfast.IMPLEMENTATION}")

    columns = args.columns.split(",") if args.columns else None
    print(f"columns: {', '.join(dspark.output_columns(columns))}")
    seconds, frames = best(lambda: single_process(paths, columns), args.repeat)
    rows = [("single process: iter_batches + Arrow", seconds)]

    spark = dspark.session(args.master, "dcpfast-bench",
                           conf={"spark.sql.shuffle.partitions": "2",
                                 "spark.driver.memory": "3g"})
    import pyspark
    print(f"pyspark {pyspark.__version__}, master {args.master}, {frames:,} frames")
    try:
        runs = [("datasource", root / "files", f"{len(paths)} files"),
                ("datasource", joined, "one file in byte ranges"),
                ("arrow", root / "files", f"{len(paths)} files"),
                ("pandas", root / "files", f"{len(paths)} files")]
        for method, where, what in runs:
            df = dspark.read_dcp(spark, str(where), method, columns=columns)
            count = df.count()                      # warm-up, and the check
            if count != frames:
                print(f"FAILED: {method} gave {count:,} frames, the scan {frames:,}")
                return 1
            seconds, _ = best(lambda: df.write.format("noop").mode("overwrite").save(),
                              args.repeat)
            rows.append((f"spark {method}, {what}, noop sink", seconds))
    finally:
        spark.stop()

    print(f"\n| path | seconds | MB/s | frames/s |\n|---|---|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.2f} | {size / 1e6 / seconds:,.0f} | "
              f"{frames / seconds / 1e6:,.2f} M |")
    rates = {label: size / s for label, s in rows}
    ds = rates[f"spark datasource, {len(paths)} files, noop sink"]
    pandas = rates[f"spark pandas, {len(paths)} files, noop sink"]
    print(f"\ndatasource / mapInPandas: {ds / pandas:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
