"""One task of the Parquet job (``dcpfast.spark.parquet``), without a JVM: every frame written
once by vbucket, partitioned by none, one or two columns, never making its parents; the
partition columns checked; an unreadable file or piece failing with its name and reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

import dcpfast

dspark = pytest.importorskip("dcpfast.spark")
from dcpfast.io.ranges import Piece  # noqa: E402
from dcpfast.spark import parquet  # noqa: E402
from dcpfast.spark.source import list_files  # noqa: E402
from tests.spark.test_sink import _child_env, _reference, _rows  # noqa: E402


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
