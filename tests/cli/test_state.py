"""``dcpfast state``: dumps to a Parquet table of documents, on one process and on Spark."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.documents import consistency, state_errors
from dcpfast.documents.output import metadata
from dcpfast.testing import SAMPLE
from tests.cli.commands import ENV, assert_escaped, documents, escapes_dump
from tests.documents.test_options import collections_dump
from tests.documents.test_processes import written
from tests.state_scenarios import CAS_EPOCH, scenario


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def same(read, table) -> bool:
    """The rows and the state metadata agree (Parquet adds field metadata of its own)."""
    return read.equals(table) and metadata(read) == metadata(table)


def test_state_of_the_sample(tmp_path):
    out = tmp_path / "state.parquet"
    result = run("state", SAMPLE, "-o", out)
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert same(table, dcpfast.state(SAMPLE))
    assert f"{table.num_rows:,} documents from 4 vbuckets" in result.output
    assert consistency(table).num_rows == 4


def test_restarts_are_exact_from_files_and_from_stdin(tmp_path):
    """A file is read a second time for the versions a restart made current again;
    standard input, which cannot be, from what its first read kept."""
    data = scenario(1, restarts=0.25)
    dump = tmp_path / "r.dcp"
    dump.write_bytes(data)
    out = tmp_path / "r.parquet"
    result = run("state", dump, "-o", out, "--errors", "skip")
    assert result.exit_code == 0, result.output
    want = dcpfast.state(data, errors="skip")
    assert same(pq.read_table(out), want)
    assert "may lack" not in result.output
    once = dcpfast.state(iter(dcpfast.iter_batches(data, 2000, errors="skip")), errors="skip")
    assert not all(consistency(once)["restored"].to_pylist()), "no second pass needed"
    piped = CliRunner().invoke(main, ["state", "-", "-o", str(out), "--errors", "skip",
                                      "--force"], input=data)
    assert piped.exit_code == 0, piped.output
    assert same(pq.read_table(out), want)
    assert "may lack" not in piped.output


def test_options_reach_state(tmp_path):
    data = scenario(7, restarts=0.2)
    dump = tmp_path / "d.dcp.gz"
    dump.write_bytes(gzip.compress(data))
    out = tmp_path / "h.parquet"
    at = "2023-11-14T22:18:20+00:00"
    result = run("state", dump, "-o", out, "--at-time", at, "--history", "--include-deleted",
                 "--errors", "skip", "--collection", "0")
    assert result.exit_code == 0, result.output
    want = dcpfast.state(data, at_time=at, history=True, include_deleted=True,
                         errors="skip", only_collections=[0])
    assert same(pq.read_table(out), want)
    arrow = tmp_path / "s.arrow"
    assert run("state", dump, "-o", arrow, "--at-seqno", "3:10,45:20", "--no-values",
               "--errors", "skip").exit_code == 0
    import pyarrow.feather as feather
    assert feather.read_table(arrow).equals(
        dcpfast.state(data, at_seqno={3: 10, 45: 20}, values=False, errors="skip"))


def test_several_files_are_one_stream(tmp_path):
    data = scenario(8, sync=False)
    cut = int(dcpfast.scan(data)["offset"][300])
    (tmp_path / "a.dcp").write_bytes(data[:cut])
    (tmp_path / "b.dcp").write_bytes(data[cut:])
    out = tmp_path / "s.parquet"
    assert run("state", tmp_path / "a.dcp", tmp_path / "b.dcp", "-o", out).exit_code == 0
    assert same(pq.read_table(out), dcpfast.state(data))


def test_a_capture(tmp_path):
    dump = t.synthetic_stream(400, seed=2, sync_writes=True)
    capture = tmp_path / "c.pcap"
    capture.write_bytes(t.pcap_file(t.tcp_packets(t.tcp_conversation(
        t.stream_request(vbucket=1, opaque=9), dump))))
    out = tmp_path / "s.parquet"
    result = run("state", capture, "-o", out)
    assert result.exit_code == 0, result.output
    assert same(pq.read_table(out), dcpfast.state(dump))


def test_bad_input_and_arguments(tmp_path):
    dump = tmp_path / "bad.dcp"
    commit = t.commit(b"k", prepared_seqno=1, commit_seqno=2, vbucket=3)
    dump.write_bytes(t.snapshot_marker(1, 2, vbucket=3) + commit)
    out = tmp_path / "s.parquet"
    result = run("state", dump, "-o", out)
    assert result.exit_code == 1 and "at byte 44: commit of the prepare" in result.output
    assert result.output.rstrip().endswith("; --errors skip keeps going")   # said once
    assert not out.exists()
    result = run("state", dump, "-o", out, "--errors", "skip")
    assert result.exit_code == 0 and "skipped 1" in result.output
    assert [e.offset for e in state_errors(pq.read_table(out))] == [44]
    both = run("state", dump, "-o", out, "--at-seqno", "1", "--at-time", "2024-01-01")
    assert both.exit_code == 2 and "not both" in both.output
    assert run("state", dump, "-o", out, "--at-seqno", "x").exit_code == 2
    assert run("state", dump, "-o", out, "--at-time", "soon").exit_code == 2
    missing = run("state", tmp_path / "missing.dcp", "-o", out)
    assert missing.exit_code == 1 and "No such file" in missing.output
    assert run("state", "-o", out).exit_code == 2                   # no FILE, no --sample
    stdin = CliRunner().invoke(main, ["state", "-", "-o", str(out), "--force"],
                               input=io.BytesIO(SAMPLE.read_bytes()))
    assert stdin.exit_code == 0, stdin.output


@pytest.mark.spark
def test_state_on_spark(spark, tmp_path):
    data = scenario(9, restarts=0.2)
    dump = tmp_path / "d.dcp"
    dump.write_bytes(data)
    out = tmp_path / "state"
    at = dt.datetime.fromtimestamp((CAS_EPOCH + 4 * 10**11) / 1e9, dt.timezone.utc)
    result = run("state", dump, "-o", out, "--spark", "--errors", "skip", "--at-time",
                 at.isoformat())
    assert result.exit_code == 0, result.output
    got = sorted(r["key"] + bytes([r["vbucket"]]) for r in
                 pq.read_table(out).select(["key", "vbucket"]).to_pylist())
    want = sorted(r["key"] + bytes([r["vbucket"]]) for r in dcpfast.state(
        data, errors="skip", at_time=CAS_EPOCH + 4 * 10**11).to_pylist())
    assert got == want
    report = json.loads((tmp_path / "state.report.json").read_text())
    import polars as pl

    assert pl.scan_parquet(out).select(pl.len()).collect().item() == len(got)
    assert report["consistency"] == metadata(dcpfast.state(
        data, errors="skip", at_time=CAS_EPOCH + 4 * 10**11))["consistency"]
    assert "consistent up to seqno" in result.output


def test_a_capture_gap_is_worded_as_a_gap_in_its_tcp_stream(tmp_path):
    """A gap in a capture: strict mode says the offset is a position in a TCP stream and
    which; skip mode's summary calls it a capture gap, not damage."""
    client, server = t.synthetic_conversation(300, seed=4)
    segments = t.tcp_conversation(b"".join(f.data for f in client),
                                  b"".join(f.data for f in server), sizes=(1448,),
                                  drop=[(False, 20)], seed=4)
    capture = tmp_path / "gap.pcap"
    capture.write_bytes(t.pcap_file(t.tcp_packets(segments)))
    strict = run("state", capture, "-o", tmp_path / "s.parquet")
    assert strict.exit_code == 1
    assert "(a position in the TCP stream 10.0.0.2:11210 -> 10.0.0.1:50123, server->client, " \
        "not in the capture file)" in strict.output
    assert "capture gap" in strict.output
    skipped = run("state", capture, "-o", tmp_path / "k.parquet", "--errors", "skip")
    assert skipped.exit_code == 0, skipped.output
    assert "1 capture gap(s): 1,448 bytes of the TCP streams are not in the capture" \
        in skipped.output


def test_capture_gaps_past_the_problems_listed_are_all_counted(tmp_path):
    """More problems than the metadata lists (1,000): the gap line counts every gap, and
    says the bytes it gives are those of the gaps listed; the damage line counts the
    rest."""
    client, server = t.synthetic_conversation(15000, seed=7)
    data = b"".join(f.data for f in server)
    drops = list(range(5, len(data) // 1448 - 5, 3))
    assert len(drops) > 600                           # a gap and a cut frame each: > 1,000
    capture = tmp_path / "gaps.pcap"
    capture.write_bytes(t.pcap_file(t.tcp_packets(t.tcp_conversation(
        b"".join(f.data for f in client), data, sizes=(1448,),
        drop=[(False, i) for i in drops], seed=7))))
    done = run("state", capture, "-o", tmp_path / "s.parquet", "--errors", "skip")
    assert done.exit_code == 0, done.output
    meta = metadata(pq.read_table(tmp_path / "s.parquet"))
    assert meta["errors_total"] > len(meta["errors"]) == 1000
    assert meta["error_counts"]["capture_gap"] == len(drops)
    assert f"{len(drops):,} capture gap(s): at least " in done.output
    others = meta["errors_total"] - len(drops)
    assert f"skipped {others:,} damaged or inconsistent frame(s)" in done.output


@pytest.mark.parametrize("command", ["info", "head", "state", "convert"])
def test_every_decoding_command_takes_threads_and_shows_examples(command, tmp_path):
    assert "Examples:" in run(command, "--help").output
    args = {"state": ["-o", tmp_path / "s.parquet"],
            "convert": ["-o", tmp_path / "c.parquet"]}.get(command, [])
    assert run(command, SAMPLE, "--threads", "2", *args).exit_code == 0
    assert run(command, SAMPLE, "--threads", "0", *args).exit_code == 2


def test_the_command_names_a_wrong_collection(tmp_path):
    dump = tmp_path / "c.dcp"
    dump.write_bytes(collections_dump())
    result = CliRunner().invoke(main, ["state", str(dump), "-o", str(tmp_path / "s.parquet"),
                                       "--collection", "nope"])
    assert result.exit_code == 2 and "nope" in result.output


def test_the_command_shares_a_dump_among_processes(tmp_path):
    from click.testing import CliRunner

    from dcpfast.cli import main

    path = written(tmp_path, scenario(9, vbuckets=5, restarts=0.2))
    outs = [tmp_path / "one.parquet", tmp_path / "two.parquet"]
    for out, extra in zip(outs, ([], ["--processes", "2"])):
        result = CliRunner().invoke(main, ["state", str(path), "-o", str(out),
                                           "--errors", "skip", *extra])
        assert result.exit_code == 0, result.output
    import pyarrow.parquet as pq
    one, two = (pq.read_table(out) for out in outs)
    assert two.equals(one) and two.schema.metadata == one.schema.metadata
    holed = written(tmp_path, scenario(9, vbuckets=5)[:-700] + scenario(9, vbuckets=5)[-500:],
                    "holed.dcp")
    results = [CliRunner().invoke(main, ["state", str(holed), "-o", str(tmp_path / "h.pq"),
                                         *extra]) for extra in ([], ["--processes", "2"])]
    assert results[0].exit_code == results[1].exit_code == 1
    assert results[1].output == results[0].output and "holed.dcp" in results[0].output


def test_collection_names_quoted_in_an_error_are_escaped(tmp_path):
    dump = tmp_path / "e.dcp"
    dump.write_bytes(escapes_dump())
    result = run("state", dump, "-o", tmp_path / "s.parquet", "--collection", "nope")
    assert result.exit_code == 2 and "nope" in result.output
    assert_escaped(result.output)
    assert "s\\x1b[31mred.c\\x1b]0;owned\\x07" in result.output


def _workers_of(pid: int) -> list[int]:
    """The state worker processes the process ``pid`` started."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and \
                b"dcpfast.documents.processes" in cmdline:
            found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="finds its workers in /proc; needs two cores for two processes")
def test_a_worker_killed_is_one_line(tmp_path):
    """A worker of ``state --processes 2`` killed (SIGKILL: the OOM killer, a user): the
    command says which worker died and how, in one line, exit status 2, and writes
    nothing."""
    dump = tmp_path / "big.dcp"
    dump.write_bytes(documents(20000, body=200))
    out = tmp_path / "s.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "dcpfast", "state", str(dump), "-o",
                             str(out), "--processes", "2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV)
    try:
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while not workers and proc.poll() is None and time.monotonic() < deadline:
            workers = _workers_of(proc.pid)
            time.sleep(0.001)
        assert workers, "no worker seen"
        os.kill(workers[0], signal.SIGKILL)     # before it can have read its share
        _, said = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    lines = said.decode().strip().splitlines()
    assert proc.returncode == 2, said
    assert len(lines) == 1, said
    assert lines[0].startswith("Error: ") and "killed by SIGKILL" in lines[0], lines
    assert f"pid {workers[0]}" in lines[0] and "vbuckets" in lines[0], lines
    assert not out.exists()
