"""``dcpfast spark-decode``: its report, the README's quick start in a process of its own,
and the inputs checked before Spark starts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dcpfast

pytest.importorskip("dcpfast.spark")
from tests.spark.test_sink import _child_env, _damaged, _readers  # noqa: E402


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


@pytest.mark.spark
def test_spark_decode_reads_pieces_of_one_dump_as_convert_does(spark, tmp_path):
    """A directory of pieces cut inside frames, and the same pieces given with --pieces:
    the frames of the joined stream at their offsets in it, as convert writes them."""
    import pyarrow.parquet as pq

    from tests.cli.commands import clean, run

    data = dcpfast.testing.SAMPLE.read_bytes()
    folder = tmp_path / "rotated"
    folder.mkdir()
    cuts = [0, 7, 60_001, 60_002, 150_000, len(data)]
    for k in range(len(cuts) - 1):
        (folder / f"dump.{k:03d}").write_bytes(data[cuts[k]:cuts[k + 1]])
    clean(run("convert", folder, "-o", tmp_path / "want.parquet", "-q",
              "--columns", "offset,opcode,key"), 0)
    want = pq.read_table(tmp_path / "want.parquet")
    pieces = sorted(folder.iterdir())
    for name, args in (("dir", [folder]), ("pieces", ["--pieces", *pieces])):
        out = tmp_path / name
        done = run("spark-decode", *args, "--out", out, "-q", "--partition-by", "",
                   "--columns", "offset,opcode,key,source")
        clean(done, 0)
        got = pq.read_table(out).sort_by("offset")
        assert got.column("offset").to_pylist() == want.column("offset").to_pylist()
        assert got.column("key").to_pylist() == want.column("key").to_pylist()
        assert got.column("opcode").to_pylist() == want.column("opcode").to_pylist()
        assert set(got.column("source").to_pylist()) == {f"file:{p}" for p in pieces[:2]} | \
            {f"file:{p}" for p in pieces[3:]}                # not the piece of one byte
    done = run("spark-decode", *pieces, "--out", tmp_path / "separate", "-q")
    clean(done, 1)                            # each file a dump: cut frames are damage
    assert "truncated frame" in done.output or "at byte 0: unknown magic" in done.output
