"""The Parquet job (``dcpfast.spark.write_parquet``, ``dcpfast.spark.sink``): the tests marked
``spark`` run the job on the shared local[2] session and read its output back with Spark,
pandas, polars and DuckDB. Failed task attempts need a Spark of their own: they run in a
child process. A task's writing and the output directory's rules are tested in
test_parquet.py and test_output.py, the command in tests/cli/test_spark_decode.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dcpfast

dspark = pytest.importorskip("dcpfast.spark")
from dcpfast.io.ranges import Piece  # noqa: E402
from dcpfast.spark.convert import to_record_batch  # noqa: E402
from dcpfast.spark.job import spark_error  # noqa: E402
from dcpfast.spark.source import read_piece  # noqa: E402


def _reference(paths, columns=None, errors="strict") -> dict:
    """Rows by (source, offset) as ``read_dcp`` gives them: scan, then Spark's types."""
    rows = {}
    schema = dspark.spark_arrow_schema(columns)
    for path in paths:
        batch = dcpfast.scan(Path(path).read_bytes(), final=True, errors=errors)
        rb = to_record_batch(batch, "file:" + path, schema, errors=errors)
        for row in rb.to_pylist():
            rows[(row["source"], row["offset"])] = row
    return rows


def _rows(table: pa.Table) -> dict:
    """Rows of a table read back, by (source, offset), the partition column an int."""
    out = {}
    for row in table.to_pylist():
        if "vbucket" in row:
            vb = int(row["vbucket"])
            row["vbucket"] = None if vb == -1 else vb
        out[(row["source"], row["offset"])] = row
    return out


# -- the job on Spark ------------------------------------------------------------------------------


def _readers(out: str) -> dict:
    """The frame count every reader finds in the dataset at ``out``."""
    import duckdb
    import pandas as pd
    import polars as pl

    return {"pandas": len(pd.read_parquet(out)),
            "polars": pl.scan_parquet(out).select(pl.len()).collect().item(),
            "duckdb": duckdb.sql(f"select count(*) from read_parquet('{out}/**/*.parquet', "
                                 "hive_partitioning = true)").fetchall()[0][0],
            "pyarrow": pq.ParquetDataset(out).read().num_rows}


@pytest.mark.spark
def test_write_parquet_writes_the_rows_of_read_dcp(spark, dumps, tmp_path):
    root, paths = dumps
    out = str(tmp_path / "decoded")
    summary = dspark.write_parquet(spark, [str(root)], out, partition_bytes=30_000)
    want = _reference(paths)
    assert summary["frames"] == len(want) and summary["tasks"] > len(paths)
    assert summary["input_bytes"] == sum(os.path.getsize(p) for p in paths)
    assert summary["rows"]["vbucket=-1"] == sum(1 for r in want.values()
                                                if r["vbucket"] is None)
    assert sum(summary["rows"].values()) == len(want)
    assert sorted(os.listdir(out)) == ["_SUCCESS", *sorted(summary["rows"])]
    assert os.path.getsize(os.path.join(out, "_SUCCESS")) == 0
    files = [p for p in Path(out).rglob("*") if p.is_file() and p.name != "_SUCCESS"]
    assert len(files) == summary["files"] and all(p.suffix == ".parquet" for p in files)
    back = spark.read.parquet(out)
    assert _rows(back.toArrow()) == want
    assert dict(back.dtypes)["vbucket"] == "int"
    assert _readers(out) == dict.fromkeys(("pandas", "polars", "duckdb", "pyarrow"), len(want))


@pytest.mark.spark
def test_write_parquet_modes(spark, dumps, tmp_path):
    root, paths = dumps
    out = str(tmp_path / "decoded")
    first = dspark.write_parquet(spark, paths[1], out, columns=["offset", "vbucket", "source"])
    with pytest.raises(FileExistsError, match="already exists"):
        dspark.write_parquet(spark, paths[1], out)
    dspark.write_parquet(spark, paths[1], out, mode="append", columns=["offset", "vbucket",
                                                                     "source"])
    assert spark.read.parquet(out).count() == 2 * first["frames"]
    summary = dspark.write_parquet(spark, paths[2], out, mode="overwrite")
    back = spark.read.parquet(out)
    assert back.count() == summary["frames"] == len(_reference(paths[2:]))
    assert {r.source for r in back.select("source").distinct().collect()} == \
        {"file:" + paths[2]}
    (Path(out) / "mine.txt").write_text("not a dataset's")
    with pytest.raises(FileExistsError, match="mine.txt"):
        dspark.write_parquet(spark, paths[1], out, mode="overwrite")
    assert back.count() == summary["frames"]                       # left as it was


@pytest.mark.spark
def test_decode_to_parquet_uses_a_running_session_and_leaves_it(spark, tmp_path):
    out = tmp_path / "decoded"
    summary = dspark.decode_to_parquet([str(dcpfast.testing.SAMPLE)], str(out), progress=False)
    assert summary["frames"] == len(dcpfast.read(dcpfast.testing.SAMPLE))
    assert summary["startup_seconds"] >= 0 and spark.range(3).count() == 3
    with pytest.raises(FileExistsError):
        dspark.decode_to_parquet([str(dcpfast.testing.SAMPLE)], str(out), spark=spark)


def _damaged(path: Path) -> bytes:
    """A dump with two frames' magic bytes overwritten."""
    data = bytearray(path.read_bytes())
    offsets = dcpfast.scan(bytes(data), final=True)["offset"]
    for i in (len(offsets) // 3, 2 * len(offsets) // 3):
        data[int(offsets[i])] = 0xEE
    return bytes(data)


@pytest.mark.spark
def test_damage_fails_the_job_in_one_line_or_is_skipped_per_piece(spark, dumps, tmp_path,
                                                                  caplog):
    root, paths = dumps
    bad = tmp_path / "in" / "bad.dcp"
    bad.parent.mkdir()
    bad.write_bytes(_damaged(Path(paths[2])))
    out = tmp_path / "decoded"
    with pytest.raises(Exception) as failure:
        dspark.write_parquet(spark, str(bad), str(out), partition_bytes=40_000)
    line = spark_error(failure.value)
    regions = dcpfast.scan(bad.read_bytes(), final=True, errors="skip").errors
    assert line.startswith(f"{bad} (bytes ") and "\n" not in line
    assert any(line.endswith(f": at byte {r.offset}: unknown magic 0xee") for r in regions)
    assert not out.exists()                                # nothing left behind
    with caplog.at_level("WARNING", logger="dcpfast.spark"):
        summary = dspark.write_parquet(spark, str(bad), str(out), errors="skip",
                                       partition_bytes=40_000)
    assert summary["frames"] == len(_reference([str(bad)], errors="skip"))
    assert [(s["regions"], s["bytes"], s["first"]) for s in summary["skipped"]] == \
        [(1, r.length, r.offset) for r in regions]
    assert all(s["where"].startswith(f"{bad} (bytes ") for s in summary["skipped"])
    assert [r.getMessage() for r in caplog.records] == [
        f"{s['where']}: skipped 1 damaged region(s), {s['bytes']} bytes, the first at byte "
        f"{s['first']}" for s in summary["skipped"]]
    assert not (out / "_temporary").exists()


@pytest.mark.spark
def test_captures_and_unreadable_files_fail_in_both_modes(spark, dumps, tmp_path):
    """Local inputs are looked at before any Spark job; a task looks again (remote files
    are looked at only there)."""
    from dcpfast.errors import DcpFormatError
    from dcpfast.testing import capture

    root, paths = dumps
    pcap = tmp_path / "dcp.pcap"
    pcap.write_bytes(capture.pcap_file([]) + bytes(100))
    size = pcap.stat().st_size
    out = tmp_path / "out"
    for errors in ("strict", "skip"):
        with pytest.raises(ValueError) as failure:
            dspark.write_parquet(spark, str(pcap), str(out), errors=errors)
        assert str(failure.value) == f"{pcap}: a packet capture (pcap or pcapng), not a DCP " \
            "dump: decode it with dcpfast convert or dcpfast.pcap.read_pcap"
        for piece in (Piece(str(pcap), 0, size, size),
                      Piece(str(pcap), 0, size // 2, size)):
            with pytest.raises(DcpFormatError, match="^at byte 0: a packet capture"):
                list(read_piece(piece, dspark.spark_arrow_schema(), collections=None,
                                       errors=errors))
    assert not out.exists()


# -- failed attempts, in a process of their own ------------------------------------------------

_ATTEMPTS = """
import os, sys
import dcpfast
from dcpfast import spark as dspark
from dcpfast.spark import sink
from dcpfast.spark.job import session, spark_error

out, log, dumps = sys.argv[1], sys.argv[2], sys.argv[3:]
spark = session("local[2,3]", log=log)      # up to 3 attempts per task
original = sink.run_task


def flaky(failing):
    # the job's task, but the attempts listed fail once they have staged their files
    def task(options, batches):
        from pyspark import TaskContext

        written = list(original(options, batches))
        task = TaskContext.get()
        if (task.partitionId(), task.attemptNumber()) in failing:
            raise RuntimeError("injected failure")
        yield from written
    return task


dspark.register(spark)
dspark.read_dcp(spark, dumps)
print("read", dspark.read_dcp(spark, dumps, columns="all").count())
dspark.write_parquet(spark, dumps[1], out + "/clean")
sink.run_task = flaky({(0, 0), (2, 0), (2, 1)})
retried = dspark.write_parquet(spark, dumps, out + "/retried", partition_bytes=100_000)
print("retried", retried["frames"], spark.read.parquet(out + "/retried").count(),
      retried["tasks"])
sink.run_task = flaky({(1, 0), (1, 1), (1, 2)})
try:
    dspark.write_parquet(spark, dumps, out + "/failed", partition_bytes=100_000)
except Exception as e:
    print("failed", spark_error(e), os.path.exists(out + "/failed"))
os.makedirs(out + "/kept")
sink.run_task = original
dspark.write_parquet(spark, dumps[0], out + "/kept", mode="append")
before = sorted(os.listdir(out + "/kept"))
sink.run_task = flaky({(1, 0), (1, 1), (1, 2)})
try:
    dspark.write_parquet(spark, dumps, out + "/kept", mode="append", partition_bytes=100_000)
except Exception as e:
    print("kept", sorted(os.listdir(out + "/kept")) == before)


def on_disk(table):
    return {os.path.relpath(os.path.join(d, f), table) for d, _, names in os.walk(table)
            for f in names if f.endswith(".parquet")}


try:
    from deltalake import DeltaTable
except ImportError:
    DeltaTable = None
if DeltaTable is not None:
    table = out + "/delta"
    sink.run_task = flaky({(0, 0), (2, 0), (2, 1)})
    done = dspark.write_delta(spark, dumps, table, partition_bytes=100_000)
    rows = DeltaTable(table).to_pyarrow_table(columns=["source", "offset"]).to_pylist()
    once = len({(r["source"], r["offset"]) for r in rows}) == len(rows)
    referenced = {os.path.relpath(u, table) for u in DeltaTable(table).file_uris()}
    print("delta retried", done["frames"], len(rows), once, on_disk(table) == referenced)
    sink.run_task = flaky({(1, 0), (1, 1), (1, 2)})
    try:
        dspark.write_delta(spark, dumps, table, partition_bytes=100_000)
    except Exception as e:
        after = DeltaTable(table)
        print("delta failed", spark_error(e), after.version(),
              {os.path.relpath(u, table) for u in after.file_uris()} == referenced,
              on_disk(table) == referenced)
    try:
        dspark.write_delta(spark, dumps, out + "/new-delta", partition_bytes=100_000)
    except Exception as e:
        print("delta new", os.path.exists(out + "/new-delta"))
else:
    frames = dspark.read_dcp(spark, dumps).count()
    print("delta retried", frames, frames, True, True)
    print("delta failed RuntimeError: injected failure 0 True True")
    print("delta new False")
spark.stop()
"""


def _child_env():
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


@pytest.mark.spark
def test_failed_attempts_leave_exactly_the_committed_files(can_spark, dumps, tmp_path):
    """A task attempt that fails after staging its files is retried and its files never
    show; a task that fails on every attempt fails the job and leaves nothing (a new
    output is removed, an existing one keeps what it held). The same for the Delta job:
    retried attempts commit each frame once and leave no file the table does not name; a
    job that fails keeps the table's version and files, and a new table is not made.
    Also: the dcp data source registered once per session (Spark warns each time one is
    replaced)."""
    root, paths = dumps
    log = tmp_path / "spark.log"
    done = subprocess.run([sys.executable, "-c", _ATTEMPTS, str(tmp_path / "out"), str(log),
                           *paths], capture_output=True, text=True, timeout=600,
                          env=_child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    frames = len(_reference(paths))
    assert lines == [f"read {frames}", f"retried {frames} {frames} 4",
                     "failed RuntimeError: injected failure False", "kept True",
                     f"delta retried {frames} {frames} True True",
                     "delta failed RuntimeError: injected failure 0 True True",
                     "delta new False"]
    assert done.stderr == ""                         # Spark's output went to the log
    text = log.read_text()
    assert "injected failure" in text
    assert "replaced a previously registered data source" not in text   # once per session
    assert not list((tmp_path / "out").rglob("_temporary"))


_LATE = """
import os, sys, time
from dcpfast import spark as dspark
from dcpfast.spark import deltatable, sink
from dcpfast.spark.job import session, spark_error

out, log, dumps = sys.argv[1], sys.argv[2], sys.argv[3:]
spark = session("local[2,1]", log=log)          # one attempt per task
original = sink.run_task


def late(options, batches):
    # partition 0 fails at once; partition 1 writes its files after the job has failed,
    # then hangs before it reports them (as a task killed there would): Spark kills it
    from pyspark import TaskContext

    task = TaskContext.get().partitionId()
    if task == 0:
        raise RuntimeError("injected failure")
    if task == 1:
        time.sleep(1.5)
        deltatable.settle = lambda *args: time.sleep(600)
        written = list(original(options, batches))
        time.sleep(600)
        yield from written
    else:
        yield from original(options, batches)


sink.run_task = late
for layout, write in (("delta", dspark.write_delta), ("parquet", dspark.write_parquet)):
    try:
        write(spark, dumps, out + "/" + layout, partition_bytes=100_000)
    except Exception as e:
        time.sleep(4)               # time enough for a task the job did not wait for
        print(layout, spark_error(e), os.path.exists(out + "/" + layout))
spark.stop()
"""


@pytest.mark.spark
def test_a_task_still_writing_after_the_job_failed_leaves_nothing(can_spark, dumps, tmp_path):
    """Spark reports a job's failure before it has killed the job's other tasks: one that
    writes its files after that (and is killed before it reports them) must find the
    job's clean-up still to come, for a new Delta table and a new Parquet output alike."""
    root, paths = dumps
    done = subprocess.run([sys.executable, "-c", _LATE, str(tmp_path / "out"),
                           str(tmp_path / "spark.log"), *paths], capture_output=True,
                          text=True, timeout=600, env=_child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["delta RuntimeError: injected failure False",
                                        "parquet RuntimeError: injected failure False"]


@pytest.mark.spark
def test_an_output_inside_the_input_is_never_read_back(spark, tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    shutil.copy(dcpfast.testing.SAMPLE, root / "a.dcp")
    frames = len(dcpfast.read(dcpfast.testing.SAMPLE))
    first = dspark.write_parquet(spark, str(root), str(root / "decoded"))
    again = dspark.write_parquet(spark, str(root), str(root / "decoded"), mode="overwrite")
    assert first["frames"] == again["frames"] == frames
    assert dspark.read_dcp(spark, str(root)).count() == frames
