"""The dcpfast command as a first-time user meets it: ``--sample`` on every reading
command, a missing file as a one-line error (status 1) that leaves an existing output
alone, ``convert`` saying what it wrote, CSV text where the bytes are UTF-8, ``head`` on a
damaged dump listing the frames before the damage, ``info`` marking responses and saying
what its seqno range counts."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.testing import SAMPLE


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


@pytest.fixture(scope="module")
def sample():
    return dcpfast.read(SAMPLE)


@pytest.mark.parametrize("command", [["info"], ["head", "-n", "3"],
                                     ["convert", "-o", "OUT", "--force"]])
def test_every_reading_command_takes_the_sample(command, tmp_path, sample):
    command = [str(tmp_path / "s.parquet") if a == "OUT" else a for a in command]
    with_sample = run(*command, "--sample")
    assert with_sample.exit_code == 0, with_sample.output
    assert with_sample.output == run(*command, SAMPLE).output
    assert run(*command).exit_code == 2                  # neither a FILE nor --sample


def test_spark_decode_takes_the_sample_too():
    assert "--sample" in run("spark-decode", "--help").output


@pytest.mark.parametrize("command", [["info"], ["head"], ["convert", "-o", "OUT"]])
def test_a_missing_file_is_a_one_line_error(command, tmp_path):
    out = tmp_path / "existing.parquet"
    out.write_bytes(b"keep me")
    command = [str(out) if a == "OUT" else a for a in command]
    missing = tmp_path / "nope.dcp"
    result = run(*command, missing)
    assert result.exit_code == 1
    assert result.output == f"Error: {missing}: No such file or directory\n"
    assert out.read_bytes() == b"keep me"                # nothing written before the check


def test_convert_says_what_it_wrote(tmp_path, sample):
    out = tmp_path / "frames.parquet"
    result = run("convert", SAMPLE, "-o", out)
    assert result.exit_code == 0, result.output
    assert result.output == (f"wrote {len(sample):,} frames to {out} "
                             f"({out.stat().st_size:,} bytes)\n")
    assert pq.read_table(out).num_rows == len(sample)
    again = run("convert", SAMPLE, "-o", out, "-q")
    assert again.exit_code == 1 and again.output == (
        f"Error: {out} already exists: choose another output, or replace it with --force\n")
    quiet = run("convert", SAMPLE, "-o", out, "-q", "--force")
    assert quiet.exit_code == 0 and quiet.output == ""


def test_csv_holds_text_where_the_bytes_are_utf8(tmp_path):
    data = (t.mutation(b"caf\xc3\xa9", b'{"a": 1}', by_seqno=1, vbucket=1)
            + t.mutation(b"\xff\xfe", b"\x00\x01binary", by_seqno=2, vbucket=1)
            + t.mutation(b"tab\tkey", b"line\nbreak", by_seqno=3, vbucket=1))
    dump = tmp_path / "mixed.dcp"
    dump.write_bytes(data)
    out = tmp_path / "out.csv"
    assert run("convert", dump, "-o", out, "--columns", "key,value", "--values",
               "--no-collections").exit_code == 0
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["key"] for r in rows] == ["café", "0xfffe", "tab\tkey"]
    assert [r["value"] for r in rows] == ['{"a": 1}', "0x" + b"\x00\x01binary".hex(),
                                         "line\nbreak"]
    assert json.loads(rows[0]["body"]) == {"a": 1}
    keys = tmp_path / "keys.csv"                          # a column all text stays text
    assert run("convert", SAMPLE, "-o", keys, "--columns", "key").exit_code == 0
    with open(keys, newline="", encoding="utf-8") as f:
        assert any(r["key"].startswith("doc::") for r in csv.DictReader(f))


def test_head_lists_the_frames_before_the_damage(tmp_path, sample):
    cut = tmp_path / "cut.dcp"
    cut.write_bytes(SAMPLE.read_bytes()[:1000])
    result = run("head", cut)
    assert result.exit_code == 1
    *lines, error = result.output.splitlines()
    ends = sample["offset"] + 24 + sample["body_len"]
    complete = ends <= 1000
    assert [int(line.split()[0]) for line in lines[1:]] == sample["offset"][complete].tolist()
    damage = int(ends[complete][-1])                      # where the cut frame starts
    assert error.startswith(f"Error: {cut}: at byte {damage}: truncated frame")
    skip = run("head", cut, "--errors", "skip")
    assert skip.exit_code == 0 and skip.output.splitlines()[1:] == lines[1:]


def test_info_marks_responses_and_says_what_seqnos_count():
    result = run("info", "--sample")
    assert result.exit_code == 0
    assert "STREAM_REQUEST resp" in result.output and "HELLO resp" in result.output
    assert "\n  MUTATION " in result.output and "MUTATION resp" not in result.output
    assert "first/last seqno: the lowest and highest by_seqno of its documents" in \
        result.output
    summary = json.loads(run("info", "--sample", "--json").output)[0]
    assert summary["responses"] == {"HELLO": 1, "OPEN": 1, "STREAM_REQUEST": 4, "CONTROL": 6}
    assert summary["opcodes"]["STREAM_REQUEST"] == 4


@pytest.mark.spark
def test_the_quick_start_decodes_the_sample(tmp_path, sample):
    """The README's quick start, ``dcpfast spark-decode --sample --out DIR``, as a user runs
    it: in a process of its own (with its own Spark)."""
    pytest.importorskip("pyspark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("Spark 4 needs Java 17+")
    out = tmp_path / "decoded"
    command = shutil.which("dcpfast", path=os.path.dirname(sys.executable))
    done = subprocess.run([*([command] if command else [sys.executable, "-m", "dcpfast"]),
                           "spark-decode", "--sample", "--out", str(out), "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"{len(sample):,} frames" in done.stdout
    assert pq.read_table(out).num_rows == len(sample)


def test_head_filters_and_says_when_nothing_matches(sample):
    frames = dcpfast.read(SAMPLE)
    mutations = frames.only("mutation")
    seqnos = sorted(int(s) for s in mutations["by_seqno"])
    lo, hi = seqnos[10], seqnos[40]
    result = run("head", SAMPLE, "--opcode", "mutation", "--seqno", f"{lo}..{hi}", "-n",
                 "1000")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    expected = [i for i in range(len(frames)) if frames["opcode"][i] == 0x57
                and lo <= frames["by_seqno"][i] <= hi]
    assert len(lines) == 1 + len(expected) and "MUTATION" in lines[1]
    key = frames.key(int(expected[0])).decode()
    by_key = run("head", SAMPLE, "--key", key, "--json", "-n", "1000")
    rows = [json.loads(line) for line in by_key.output.splitlines()]
    assert rows and all(r["key"] == key for r in rows)
    assert rows[0]["opcode"] in ("mutation", "deletion", "prepare", "commit", "abort",
                                 "expiration")
    nothing = CliRunner().invoke(main, ["head", str(SAMPLE), "--vbucket", "7"])
    assert nothing.exit_code == 0
    assert nothing.stdout.splitlines()[0].split()[:2] == ["offset", "opcode"]
    assert "no frame matches the filters" in nothing.stderr
    typo = run("head", SAMPLE, "--opcode", "mutaton")
    assert typo.exit_code == 2 and "did you mean 'mutation'" in typo.output
    two = run("head", SAMPLE, "--sample")
    assert two.exit_code == 2 and "give one FILE or --sample, not both" in two.output


def test_connection_level_frames_carry_no_vbucket(sample):
    """NOOPs, DCP Open and Controls are the connection's: vbucket 0 counts its own frames
    only, and head shows them with no vbucket."""
    client = dcpfast.read(dcpfast.testing.SAMPLE_CLIENT)
    connection = np.isin(client["opcode"], [0x1F, 0x50, 0x5C, 0x5D, 0x5E])
    assert connection.any() and not client.validity("vbucket")[connection].any()
    line = run("head", dcpfast.testing.SAMPLE_CLIENT, "--opcode", "open").output.splitlines()[1]
    assert line.split()[2] == "-"
