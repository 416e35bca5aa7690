"""``dcpfast mirror``: one line per run, what waits said, errors in one line."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from dcpfast.cli import main
from dcpfast.testing import SAMPLE

deltalake = pytest.importorskip("deltalake")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_runs_as_the_dump_grows(tmp_path):
    data = SAMPLE.read_bytes()
    dump, table = tmp_path / "d.dcp", tmp_path / "t.delta"
    dump.write_bytes(data[:len(data) // 2 + 5])
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0, result.output
    assert "version 0 (run 1)" in result.output and "waiting" in result.output
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0 and "nothing new since run 1" in result.output
    dump.write_bytes(data)
    result = run("mirror", dump, "--to", table)
    assert result.exit_code == 0 and "version 1 (run 2)" in result.output
    assert deltalake.DeltaTable(str(table)).to_pyarrow_table().num_rows == \
        int(result.output.split(" in the table")[0].rsplit(", ", 1)[1].replace(",", ""))
    result = run("mirror", "--sample", "--to", tmp_path / "s.delta", "--history",
                 tmp_path / "h.delta")
    assert result.exit_code == 0, result.output
    assert "h.delta: version 0 (run 1)" in result.output
    assert "__END_AT" in deltalake.DeltaTable(str(tmp_path / "h.delta")).schema().to_arrow() \
        .names


def test_errors_in_one_line(tmp_path):
    result = run("mirror", tmp_path / "none.dcp", "--to", tmp_path / "t")
    assert result.exit_code == 1 and "none.dcp" in result.output
    dump = tmp_path / "d.dcp"
    dump.write_bytes(SAMPLE.read_bytes())
    deltalake.write_deltalake(tmp_path / "plain", __import__("pyarrow").table({"x": [1]}))
    result = run("mirror", dump, "--to", tmp_path / "plain")
    assert result.exit_code == 1 and "no dcpfast mirror wrote" in result.output
    assert "Traceback" not in result.output
