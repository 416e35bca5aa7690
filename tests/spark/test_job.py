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


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_spark_decode_ended_by_a_signal_leaves_nothing(can_spark, tmp_path, signum):
    """Ctrl-C or SIGTERM while the job runs: one line, no traceback, nothing at ``--out``
    (a next run is not refused), and the process ends by the signal."""
    dump = tmp_path / "big.dcp"
    dump.write_bytes(T.synthetic_stream(40_000, seed=3))
    out = tmp_path / "out"
    found = shutil.which("dcpfast", path=os.path.dirname(sys.executable))
    command = [found] if found else [sys.executable, "-m", "dcpfast"]
    proc = subprocess.Popen([*command, "spark-decode", str(dump), "--out", str(out), "-q",
                             "--partition-by", "vbucket,opcode"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    deadline = time.monotonic() + 300
    while not (out / "_temporary").exists() and proc.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signum)
    stdout, stderr = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the job ended before the signal came")
    assert proc.returncode == -signum, stderr[-3000:]
    assert stderr == f"Error: ended by {signal.Signals(signum).name}: nothing written to " \
                     f"{out}\n"
    assert not out.exists()
