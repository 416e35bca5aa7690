"""The ``spark-decode`` job (``dcpfast.spark.job``) ended by Ctrl-C or SIGTERM, in a process
of its own: one line, nothing written, the process ended by the signal; killed outright
(SIGKILL), its rerun takes over what it left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import dcpfast
from dcpfast import testing as T

pytest.importorskip("pyspark")
pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def big_dump(tmp_path_factory):
    """A dump whose tasks take a few seconds to decode and write."""
    path = tmp_path_factory.mktemp("signals") / "big.dcp"
    path.write_bytes(T.synthetic_stream(400_000, seed=3))
    return path


def _staged(out) -> bool:
    """Whether the job's tasks have written a file into its staging directory."""
    staging = out / "_temporary"
    return staging.exists() and any(staging.rglob("*.parquet"))


@pytest.mark.parametrize("signum, moment", [
    (signal.SIGINT, "staging made"), (signal.SIGINT, "tasks writing"),
    (signal.SIGTERM, "tasks writing")])
def test_spark_decode_ended_by_a_signal_leaves_nothing(can_spark, big_dump, tmp_path, signum,
                                                       moment):
    """Ctrl-C or SIGTERM while the job runs, as it starts or while its tasks write: one
    line, no traceback, and the process ends by the signal, never with status 0; nothing
    at ``--out`` (a next run is not refused), or, where the signal came as the job
    finished, its whole output, and the line says which."""
    out = tmp_path / "out"
    found = shutil.which("dcpfast", path=os.path.dirname(sys.executable))
    command = [found] if found else [sys.executable, "-m", "dcpfast"]
    proc = subprocess.Popen([*command, "spark-decode", str(big_dump), "--out", str(out), "-q",
                             "--partition-by", "vbucket,opcode"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    ready = (lambda: (out / "_temporary").exists()) if moment == "staging made" \
        else (lambda: _staged(out))
    deadline = time.monotonic() + 300
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is not None:
        pytest.skip("the job ended before the signal could be sent")
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=300)
    name = signal.Signals(signum).name
    assert proc.returncode == -signum, stderr[-3000:]
    if out.exists():                    # the job had finished when the cancel came
        assert stderr == f"Error: ended by {name}: the job had written all of {out} when " \
                         "it could stop\n"
        assert (out / "_SUCCESS").exists() and not (out / "_temporary").exists()
    else:
        assert stderr == f"Error: ended by {name}: nothing written to {out}\n"


def _staged_files(out, fmt: str) -> list:
    """The Parquet files a running job has written so far: in its staging directory
    (Parquet), in the table's folder (Delta)."""
    where = out / "_temporary" if fmt == "parquet" else out
    return list(where.rglob("*.parquet")) if where.exists() else []


def _committed(out, fmt: str) -> bool:
    return (out / "_SUCCESS").exists() if fmt == "parquet" else \
        any((out / "_delta_log").glob("*.json"))


@pytest.mark.parametrize("fmt", ["parquet", "delta"])
def test_a_rerun_takes_over_from_a_first_job_killed(spark, can_spark, tmp_path, fmt):
    """SIGKILL (the driver and its workers at once) once the first job's files exist:
    its leftovers stay (``_temporary``; the table's folder with its marker and files but
    no commit), and a rerun with ``--overwrite`` removes them and writes every frame
    once, nothing of the killed job read or left."""
    from click.testing import CliRunner

    from dcpfast.cli import main

    dump = tmp_path / "big.dcp"
    dump.write_bytes(T.synthetic_stream(40_000, seed=5))
    out = tmp_path / "out"
    found = shutil.which("dcpfast", path=os.path.dirname(sys.executable))
    command = [found] if found else [sys.executable, "-m", "dcpfast"]
    proc = subprocess.Popen([*command, "spark-decode", str(dump), "--out", str(out), "-q",
                             "--partition-by", "vbucket,opcode", "--format", fmt],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True,    # its own group: the JVM, the workers
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path),
                                     PYSPARK_SUBMIT_ARGS="--conf spark.python.use.daemon="
                                                         "false pyspark-shell"))
    deadline = time.monotonic() + 300
    while not _staged_files(out, fmt) and proc.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGSTOP)            # all at once, then all killed
        done = _committed(out, fmt)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    else:
        done = True
    if done:
        pytest.skip("the job committed before it was killed")
    assert proc.returncode == -signal.SIGKILL
    if fmt == "parquet":
        assert (out / "_temporary").is_dir()
    else:
        assert list(out.glob("_dcpfast-running-*")) and _staged_files(out, fmt)
    run = CliRunner().invoke(main, ["spark-decode", str(dump), "--out", str(out), "-q",
                                    "--partition-by", "vbucket,opcode", "--format", fmt,
                                    "--overwrite"])
    assert run.exit_code == 0, run.output
    frames = len(dcpfast.read(dump))
    if fmt == "parquet":
        import pyarrow.dataset as ds

        assert not (out / "_temporary").exists()
        assert ds.dataset(out, partitioning="hive").count_rows() == frames
    else:
        import deltalake

        table = deltalake.DeltaTable(str(out))
        assert table.version() == 0
        assert table.to_pyarrow_table(columns=["offset"]).num_rows == frames
        named = {os.path.relpath(u, out) for u in table.file_uris()}
        assert {str(p.relative_to(out)) for p in out.rglob("*.parquet")} == named
        assert not list(out.glob("_dcpfast-running-*"))
