"""``dcpfast audit``: a connector's sink judged against its capture; exit status 0 clean,
1 problems (written with -o), 2 error."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from dcpfast.changes import audit_summary, json_lines
from dcpfast.cli import main
from tests.changes.test_delivery import _published
from tests.state_scenarios import scenario


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_clean_problems_and_errors(tmp_path):
    dump = tmp_path / "d.dcp"
    dump.write_bytes(scenario(3, restarts=0.0, vbuckets=2, sync=False))
    published = _published(dump.read_bytes())
    sink = tmp_path / "sink.jsonl"
    sink.write_bytes(b"".join(json_lines(pa.Table.from_pylist(published))))
    result = run("audit", dump, sink, "--errors", "skip")
    assert result.exit_code == 0, result.output
    assert f"{len(published):,} messages: {len(published):,} delivered once" in result.output
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_bytes(sink.read_bytes() * 2)
    out = tmp_path / "problems.parquet"
    result = run("audit", dump, doubled, "--errors", "skip", "-o", out)
    assert result.exit_code == 1, result.output
    table = pq.read_table(out)
    assert table.num_rows == len(published) and set(table["kind"].to_pylist()) == {"duplicate"}
    assert audit_summary(table)["counts"]["duplicate"] == len(published)
    result = run("audit", dump, tmp_path / "none.jsonl")
    assert result.exit_code == 2 and "no such file" in result.output
    result = run("audit", dump, sink, "--format", "debezium", "--errors", "skip")
    assert result.exit_code == 2 and "is a debezium message" in result.output
