"""The ``spark-decode`` job (``dcpfast.spark.job``) ended by Ctrl-C or SIGTERM, in a process
of its own: one line, nothing written, the process ended by the signal."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

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
