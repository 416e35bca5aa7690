"""``dcpfast changes``: dumps to a change feed in JSON lines or Parquet, in each format,
the same rows as ``dcpfast.changes``; what it cannot claim on standard error."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from click.testing import CliRunner

from dcpfast import testing as t
from dcpfast.changes import changes, feed_metadata, formatted
from dcpfast.cli import main
from dcpfast.testing import SAMPLE
from tests.state_scenarios import scenario


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_parquet_holds_the_feed_of_each_format(tmp_path):
    dump = tmp_path / "d.dcp"
    dump.write_bytes(scenario(9, restarts=0.3))
    feed = changes(dump, errors="skip", before=True)
    for fmt in ("changes", "debezium", "couchbase-kafka", "auto-cdc"):
        out = tmp_path / f"{fmt}.parquet"
        result = run("changes", dump, "-o", out, "--format", fmt, "--errors", "skip",
                     "--bucket", "travel")
        assert result.exit_code == 0, result.output
        assert f"-> {out}" in result.output and "rollback" in result.output
        want = formatted(feed if fmt == "debezium" else feed.drop_columns(["before"]), fmt,
                         bucket="travel")
        assert pq.read_table(out).to_pylist() == want.to_pylist()
    assert feed_metadata(pq.read_table(tmp_path / "changes.parquet"))["consistency"]


def test_json_lines_to_a_file_and_to_standard_output(tmp_path):
    out = tmp_path / "feed.jsonl"
    result = run("changes", "--sample", "-o", out, "--format", "debezium")
    assert result.exit_code == 0, result.output
    lines = out.read_bytes().splitlines()
    assert len(lines) == changes(SAMPLE).num_rows
    assert json.loads(lines[0])["value"]["op"] in ("c", "r")
    result = CliRunner().invoke(main, ["changes", "--sample", "-o", "-", "--format",
                                       "couchbase-kafka", "--no-values"])
    assert result.exit_code == 0
    records = [json.loads(line) for line in result.stdout_bytes.splitlines()]
    assert len(records) == len(lines) and all(r["content"] is None for r in records)


def test_refusals_and_warnings(tmp_path):
    dump = tmp_path / "d.dcp"
    frames = [t.snapshot_marker(1, 2, vbucket=3), t.mutation(b"a", by_seqno=1, vbucket=3),
              t.mutation(b"b", by_seqno=2, vbucket=3), t.snapshot_marker(3, 4, vbucket=3),
              t.mutation(b"c", by_seqno=3, vbucket=3), t.mutation(b"d", by_seqno=6, vbucket=3)]
    dump.write_bytes(b"".join(frames))
    result = run("changes", dump, "-o", tmp_path / "f.txt")
    assert result.exit_code == 2 and "unknown extension" in result.output
    result = run("changes", dump, "-o", tmp_path / "f.jsonl")
    assert result.exit_code == 1 and "vbucket 3" in result.output
    assert not (tmp_path / "f.jsonl").exists()
    result = CliRunner().invoke(main, ["changes", str(dump), "-o", str(tmp_path / "f.jsonl"),
                                       "--errors", "skip"])
    assert result.exit_code == 0
    assert "frames were lost on 1 vbucket(s) (3)" in result.stderr
    result = run("changes", dump, "-o", tmp_path / "f.jsonl", "--errors", "skip")
    assert result.exit_code == 1 and "exists" in result.output
