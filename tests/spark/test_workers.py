"""dcpfast's Spark paths as a newcomer meets them, each in a process of its own: a job run
with the virtual environment's interpreter but not activated (no ``PYSPARK_PYTHON``,
``python3`` on the path another Python) from a directory holding a copy of the source
tree (whose ``dcpfast/`` has no compiled cores); a worker of another dcpfast refused in one
line (``dcpfast.spark.workers``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dcpfast
from dcpfast import testing as T

pytest.importorskip("pyspark")
from dcpfast.spark.workers import identity, same_dcpfast  # noqa: E402

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def _bare_env() -> dict:
    """The environment of a shell where the virtual environment is not activated."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "PYTHONPATH",
                        "PYTHONSAFEPATH")}
    here = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if os.path.realpath(p) != os.path.realpath(here))
    return env


_JOB = """
import sys
from pyspark.sql import SparkSession
import dcpfast
from dcpfast.spark import read_dcp, write_parquet
from dcpfast.spark.job import spark_error
from dcpfast.spark.workers import identity

sample, pcap, out = sys.argv[1:]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
print("driver", dcpfast.IMPLEMENTATION)
print("count", read_dcp(spark, sample).count())
summary = write_parquet(spark, sample, out)
print("workers", summary["dcpfast"] == [identity()], summary["frames"])
for bad, kind in (("missing/", FileNotFoundError), (pcap, ValueError)):
    try:
        read_dcp(spark, bad)                                  # no action: at once
    except kind as e:
        print("refused", e)
try:
    read_dcp(spark, sample, method="arrow")
except RuntimeError as e:
    print("arrow", e)
spark.stop()
"""


def test_a_job_from_a_checkout_without_an_activated_environment(can_spark, tmp_path):
    """The data sources' workers run this interpreter's dcpfast with its compiled cores
    (not ``python3``, not the checkout's twin); mistakes fail at once, in one line."""
    from dcpfast.testing import capture

    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "dcpfast", checkout / "dcpfast",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__", "*.c"))
    job = tmp_path / "jobs" / "job.py"
    job.parent.mkdir()
    job.write_text(_JOB)
    pcap = tmp_path / "c.pcap"
    pcap.write_bytes(capture.pcap_file([]) + bytes(100))
    done = subprocess.run([sys.executable, str(job), str(T.SAMPLE), str(pcap),
                           str(tmp_path / "out")], cwd=checkout, env=_bare_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    frames = len(dcpfast.read(T.SAMPLE))
    lines = done.stdout.splitlines()
    assert lines[:3] == [f"driver {dcpfast.IMPLEMENTATION}", f"count {frames}",
                         f"workers True {frames}"]
    assert lines[3] == "refused [Errno 2] No such file or directory: 'missing/'"
    assert lines[4] == f"refused {pcap}: a packet capture (pcap or pcapng), not a DCP " \
                       "dump: decode it with dcpfast convert or dcpfast.pcap.read_pcap"
    python3 = shutil.which("python3", path=_bare_env()["PATH"])
    if python3 and sys.prefix != sys.base_prefix:
        assert lines[5].startswith("arrow Spark's Python workers would run ") and \
            f"set PYSPARK_PYTHON={sys.executable}" in lines[5]


def test_a_worker_of_another_dcpfast_fails_in_one_line():
    same_dcpfast(identity())
    same_dcpfast(None)
    with pytest.raises(RuntimeError) as failure:
        same_dcpfast("0.0.1/python")
    said = str(failure.value)
    assert said.startswith(f"Spark's Python workers run dcpfast {identity()} (from ")
    assert "but this process runs 0.0.1/python" in said and "\n" not in said
