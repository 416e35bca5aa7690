"""The Parquet job (``dcpfast.spark.write_parquet``) and ``dcpfast spark-decode``.

A task's writing (``TaskWriter``) and the output directory's rules (``output``) run
without a JVM; the tests marked ``spark`` run the job on the shared local[2] session and
read its output back with Spark, pandas, polars and DuckDB. Failed task attempts and the
command itself need a Spark of their own: they run in a child process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import dcpfast
from dcpfast import testing as T

dspark = pytest.importorskip("dcpfast.spark")
from dcpfast.io.ranges import Piece  # noqa: E402
from dcpfast.spark import output, parquet  # noqa: E402
from dcpfast.spark.convert import to_record_batch  # noqa: E402
from dcpfast.spark.job import spark_error  # noqa: E402
from dcpfast.spark.source import list_files, read_piece  # noqa: E402

# -- without a JVM -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Three dumps (one with durable writes), as the Spark tests use."""
    root = tmp_path_factory.mktemp("job-dumps")
    paths = []
    for i, items in enumerate((300, 40, 900)):
        path = root / f"d{i}.dcp"
        path.write_bytes(T.synthetic_stream(items, seed=20 + i, sync_writes=i == 2))
        paths.append(str(path))
    return root, paths


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


def _task(tmp_path, paths, *, partition_by=("vbucket",), flush_bytes=parquet.FLUSH_BYTES,
          errors="strict", columns=None):
    store = pafs.LocalFileSystem()
    tmp_path.mkdir(exist_ok=True)
    collections = dcpfast.read(paths[0]).collections     # known: batches of 8 kB each
    writer = parquet.TaskWriter(store, str(tmp_path / "task"), "part-00000-job",
                                dspark.spark_arrow_schema(columns), partition_by,
                                collections=collections, errors=errors,
                                flush_bytes=flush_bytes, batch_bytes=8192)
    for uri, size in list_files(paths):
        writer.write(Piece(uri, 0, size, size))
    return writer.result()


@pytest.mark.parametrize("flush_bytes", [parquet.FLUSH_BYTES, 50_000])
def test_a_task_writes_every_frame_once_by_vbucket(tmp_path, dumps, flush_bytes):
    root, paths = dumps
    result = _task(tmp_path, paths, flush_bytes=flush_bytes)
    want = _reference(paths)
    assert result["frames"] == len(want) == sum(result["rows"].values())
    folders = {f.split("/")[0] for f, _, _ in result["files"]}
    assert folders == set(result["rows"]) and "vbucket=-1" in folders     # the responses
    if flush_bytes < parquet.FLUSH_BYTES:
        assert len(result["files"]) > 2 * len(folders)
    else:
        assert len(result["files"]) == len(folders)
    for relative, rows, size in result["files"]:
        path = tmp_path / "task" / relative
        assert pq.read_metadata(path).num_rows == rows and path.stat().st_size == size
        offsets = pq.read_table(path, columns=["source", "offset"]).to_pylist()
        assert offsets == sorted(offsets, key=lambda r: (r["source"], r["offset"]))
    back = pq.read_table(tmp_path / "task", partitioning="hive")
    assert _rows(back) == want


def test_a_task_without_partitions_and_with_two(tmp_path, dumps):
    root, paths = dumps
    result = _task(tmp_path / "none", paths, partition_by=())
    assert [f for f, _, _ in result["files"]] == ["part-00000-job-0.parquet"]
    result = _task(tmp_path / "two", paths, partition_by=("opcode", "vbucket"))
    opcodes = {int(r["opcode"]) for r in _reference(paths).values()}
    assert {f.split("/")[0] for f, _, _ in result["files"]} == {f"opcode={o}" for o in opcodes}
    back = pq.read_table(tmp_path / "two" / "task", partitioning="hive")
    assert back.num_rows == len(_reference(paths))


def test_a_task_never_makes_its_parents(tmp_path, dumps):
    """An attempt still running after its job ended (the staging directory deleted)
    fails instead of staging files again where nothing would delete them."""
    root, paths = dumps
    writer = parquet.TaskWriter(pafs.LocalFileSystem(), str(tmp_path / "job" / "attempt"),
                                "p", dspark.spark_arrow_schema(), ("vbucket",),
                                collections=None, errors="strict")
    writer.write(Piece(paths[1], 0, os.path.getsize(paths[1]),
                              os.path.getsize(paths[1])))
    with pytest.raises(FileNotFoundError):
        writer.result()
    assert list(tmp_path.iterdir()) == []


def test_partition_columns_are_checked():
    names = dspark.spark_arrow_schema().names
    assert parquet.partition_columns(["vbucket", "opcode"], names) == ("vbucket", "opcode")
    for bad, why in ((["by_seqno"], "up to 32 bits"), (["key_str"], "up to 32 bits"),
                     (["status"], "not among"), (["vbucket", "vbucket"], "must differ")):
        with pytest.raises(ValueError, match=why):
            parquet.partition_columns(bad, names)


def test_the_output_directory_rules(tmp_path):
    out = tmp_path / "out"
    assert output.check(str(out), "error") is False
    out.mkdir()
    assert output.check(str(out), "error") is True                   # empty: allowed
    (out / "vbucket=3").mkdir()
    (out / "vbucket=3" / "part-00003-0123456789abcdef-0.parquet").write_bytes(b"x")
    (out / "_SUCCESS").write_bytes(b"")
    with pytest.raises(FileExistsError, match="already exists"):
        output.check(str(out), "error")
    assert output.check(str(out), "overwrite") and output.check(str(out), "append")
    # a Parquet file dcpfast did not write (Spark's, or the user's own) is never replaced
    for theirs in ("part-00000-1b2c.c000.snappy.parquet", "mine.parquet"):
        (out / "vbucket=3" / theirs).write_bytes(b"x")
        with pytest.raises(FileExistsError, match=f"vbucket=3/{theirs}, which dcpfast did "
                                                  "not write: not replacing it"):
            output.check(str(out), "overwrite")
        (out / "vbucket=3" / theirs).unlink()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.txt, which is not part of a Parquet"):
        output.check(str(out), "overwrite")
    (out / "notes.txt").unlink()
    (out / "vbucket=3" / "dump.dcp").write_bytes(b"")
    with pytest.raises(FileExistsError, match="vbucket=3/dump.dcp"):
        output.check(str(out), "overwrite")
    with pytest.raises(ValueError, match="mode must be"):
        output.check(str(out), "ignore")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    for mode in ("error", "overwrite", "append"):
        with pytest.raises(FileExistsError, match=f"^{link}: a symbolic link to "
                                                  f"{tmp_path / 'nowhere'}, which does not"):
            output.check(str(link), mode)


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


_UNREADABLE = """
import sys
import pyarrow.fs as pafs
from dcpfast import spark as dspark
from dcpfast.io.ranges import Piece
from dcpfast.spark.parquet import TaskWriter
from dcpfast.spark.source import check_inputs

path, staging = sys.argv[1:]
try:
    check_inputs([path])
except OSError as e:
    print("driver:", e)
writer = TaskWriter(pafs.LocalFileSystem(), staging, "p", dspark.spark_arrow_schema(), ("vbucket",),
                    collections=None, errors="skip")
try:
    writer.write(Piece(path, 0, 100, 100))
except OSError as e:
    print("task:", e)
"""


def test_an_unreadable_file_fails_with_the_reason_in_skip_mode(tmp_path):
    """A file of mode 000 (read by an unprivileged user: root reads it), checked by the
    driver before the job and, for files the driver cannot see, by the task."""
    root = os.geteuid() == 0
    if root and not shutil.which("setpriv"):
        pytest.skip("running as root, without setpriv to drop the privilege")
    drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] if root else []
    reach = subprocess.run([*drop, sys.executable, "-c", "import pyarrow, dcpfast.spark"],
                           capture_output=True, env=_child_env(), timeout=120)
    if reach.returncode:
        pytest.skip("the unprivileged user cannot read this environment (a private checkout)")
    with tempfile.TemporaryDirectory() as where:        # a place the other user reaches
        os.chmod(where, 0o777)
        locked = Path(where) / "locked.dcp"
        shutil.copy(dcpfast.testing.SAMPLE, locked)
        locked.chmod(0)
        command = [*drop, sys.executable, "-c", _UNREADABLE, str(locked), where]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                              env=_child_env())
    assert done.returncode == 0, done.stderr
    driver, task = done.stdout.splitlines()
    assert driver == f"driver: cannot read {locked}: Permission denied"
    assert task.startswith(f"task: cannot read {locked}: ") and "Permission denied" in task


def test_an_unreadable_piece_names_the_file_and_the_reason(tmp_path, dumps):
    """A file gone between planning and reading (root can read files of mode 000, and
    this is the same path): the task fails with the file and the reason, in skip mode."""
    root, paths = dumps
    gone = tmp_path / "gone.dcp"
    store = pafs.LocalFileSystem()
    writer = parquet.TaskWriter(store, str(tmp_path / "task"), "p", dspark.spark_arrow_schema(),
                                ("vbucket",), collections=None, errors="skip")
    with pytest.raises(OSError) as failure:
        writer.write(Piece(str(gone), 0, 100, 100))
    assert str(failure.value).startswith(f"cannot read {gone}: ")


# -- failed attempts and the command, in a process of their own ------------------------------------

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


def test_the_report_of_spark_decode():
    from dcpfast.cli.spark_decode import report

    summary = {"frames": 123456, "input_bytes": 25_000_000, "files": 40,
               "output_bytes": 9_000_000, "tasks": 4, "task_seconds": 3.25,
               "startup_seconds": 4.0, "seconds": 7.5,
               "rows": {f"vbucket={v}": 1000 + v for v in [-1, *range(20)]},
               "skipped": [{"where": "a.dcp (bytes 0 to 10)", "regions": 2, "bytes": 70,
                            "first": 3},
                           {"where": "b.dcp", "regions": 1, "bytes": 5, "first": 9}]}
    assert report(summary, "out/") == [
        "123,456 frames from 25.0 MB of dumps -> out/: 40 Parquet files, 9.0 MB",
        "  frames per partition: vbucket=-1 999, vbucket=0 1,000, vbucket=1 1,001, "
        "vbucket=2 1,002, vbucket=3 1,003, vbucket=4 1,004, vbucket=5 1,005, vbucket=6 "
        "1,006, ... (21 partitions, 999 to 1,019 frames each)",
        "  (=-1: frames that carry no value there; responses have no vbucket)",
        "  skipped 3 damaged region(s), 75 bytes, in 2 piece(s) (each logged above)",
        "  4.0 s starting Spark, 7.5 s running the job: 4 task(s) decoding and writing for "
        "3.2 s in all"]
    summary.update(rows={"": 5}, skipped=[], files=1)
    assert report(summary, "o")[1:] == [
        "  4.0 s starting Spark, 7.5 s running the job: 4 task(s) decoding and writing for "
        "3.2 s in all"]


@pytest.fixture
def can_spark():
    """Skip a test that starts Spark in a child process where it cannot (as the shared
    ``spark`` fixture skips)."""
    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("Spark 4 needs Java 17+")


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


def _command(*args, env=None):
    found = shutil.which("dcpfast", path=os.path.dirname(sys.executable))
    command = [found] if found else [sys.executable, "-m", "dcpfast"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=600,
                          env=env or _child_env())


@pytest.mark.spark
def test_the_quick_start_command(can_spark, tmp_path):
    """The README's quick start: quiet, a report a user can act on, a dataset every reader
    opens; a failure is one line naming the file and the offset, and a rerun works."""
    out = tmp_path / "decoded"
    done = _command("spark-decode", "--sample", "--out", str(out))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    frames = len(dcpfast.read(dcpfast.testing.SAMPLE))
    lines = done.stdout.splitlines()
    size = dcpfast.testing.SAMPLE.stat().st_size / 1e6
    assert lines[0].startswith(f"{frames:,} frames from {size:,.1f} MB of dumps -> {out}: ")
    assert lines[1].startswith("  frames per partition: vbucket=-1 ")
    assert "s starting Spark, " in lines[-1] and " s running the job: " in lines[-1]
    assert _readers(str(out)) == dict.fromkeys(("pandas", "polars", "duckdb", "pyarrow"),
                                               frames)
    done = _command("spark-decode", "--sample", "--out", str(out))
    assert done.returncode == 1
    assert done.stderr == f"Error: {out} already exists: write elsewhere, or replace it " \
                          "(mode=\"overwrite\", --overwrite)\n"
    bad = tmp_path / "bad.dcp"
    bad.write_bytes(_damaged(dcpfast.testing.SAMPLE))
    done = _command("spark-decode", str(bad), "--out", str(tmp_path / "again"))
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: {bad} (bytes ") and ": unknown magic 0xee" in line
    assert "Spark's log: " in line and not (tmp_path / "again").exists()
    log = Path(line.rsplit("Spark's log: ", 1)[1].rstrip(")"))
    assert "unknown magic 0xee" in log.read_text()            # kept for the user
    log.unlink()


def test_inputs_are_checked_before_spark_starts(tmp_path):
    """No Java on the path: had the command started Spark, it would say so instead."""
    from dcpfast.testing import capture

    pytest.importorskip("pyspark")

    env = {k: v for k, v in _child_env().items() if k != "JAVA_HOME"}
    env["PATH"] = os.path.dirname(sys.executable)
    pcap = tmp_path / "x.pcap"
    pcap.write_bytes(capture.pcap_file([]))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("")
    sample, fresh = str(dcpfast.testing.SAMPLE), str(tmp_path / "o")
    missing = tmp_path / "missing.dcp"
    for args, said in (([str(missing), "--out", fresh],
                        f"Error: {missing}: No such file or directory"),
                       ([str(pcap), "--out", fresh], "x.pcap: a packet capture"),
                       ([sample, "--out", fresh, "--partition-by", "by_seqno"],
                        "cannot partition by 'by_seqno'"),
                       ([sample, "--out", fresh, "--columns", "nope"], "unknown column"),
                       ([sample, "--out", str(taken)], "already exists")):
        done = _command("spark-decode", *args, env=env)
        assert done.returncode == 1 and said in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1 and "Spark" not in done.stderr
    assert not os.path.exists(fresh)


def test_what_a_listing_of_inputs_refuses_and_leaves_out(tmp_path):
    """A dangling link (named or in a directory) and a FIFO or a device are refused with
    their reason; Parquet files, hidden and ``_`` directories and a job's output inside
    the input are left out."""
    root = tmp_path / "in"
    root.mkdir()
    shutil.copy(dcpfast.testing.SAMPLE, root / "a.dcp")
    (root / "_temporary" / "x").mkdir(parents=True)
    (root / "_temporary" / "x" / "part.dcp").write_bytes(b"x")
    (root / "out" / "vbucket=1").mkdir(parents=True)
    (root / "out" / "vbucket=1" / "part-00000-0123456789abcdef-0.parquet").write_bytes(b"P")
    (root / "out" / "mine.dcp").write_bytes(b"x")
    assert [os.path.basename(u) for u, _ in list_files([str(root)])] == ["a.dcp", "mine.dcp"]
    assert [os.path.basename(u) for u, _ in list_files([str(root)],
                                                       exclude=[str(root / "out")])] == \
        ["a.dcp"]
    (root / "gone.dcp").symlink_to(tmp_path / "nowhere.dcp")
    for named in (root, root / "gone.dcp"):
        with pytest.raises(FileNotFoundError) as failure:
            list_files([str(named)])
        assert failure.value.filename == str(root / "gone.dcp")
        assert failure.value.strerror == f"a symbolic link to {tmp_path / 'nowhere.dcp'}, " \
                                         "which does not exist"
    (root / "gone.dcp").unlink()
    os.mkfifo(root / "pipe")
    for named, kind in ((root, "FIFO"), (root / "pipe", "FIFO"),
                        (Path("/dev/zero"), "character device")):
        with pytest.raises(ValueError, match=f"is not a regular file or directory \\(a {kind}\\)"):
            list_files([str(named)])


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
