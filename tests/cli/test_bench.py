"""``dcpfast bench``: the benchmark suite's table, its corpora, the command outside a source
tree, and every benchmark script starting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dcpfast
from dcpfast import cli
from tests.cli.commands import clean, run

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def suite(monkeypatch):
    """``benchmarks/suite`` of the source tree (skipped where the tests run without it)."""
    if not (BENCHMARKS / "suite" / "__init__.py").is_file():
        pytest.skip("the benchmark suite lives in the source tree's benchmarks/")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import suite.corpora
    import suite.scan
    import suite.table
    return suite


def test_bench_prints_its_table(suite, tmp_path):
    from dcpfast.cli.bench import BENCH_SCRIPT
    from tests.cores import COMPILED
    if not os.path.isfile(BENCH_SCRIPT):
        pytest.skip("dcpfast bench runs the suite of the checkout dcpfast is installed from")
    if not COMPILED or dcpfast.IMPLEMENTATION != "cython":
        result = run("bench", "--quick")
        assert result.exit_code == 2
        return
    table = suite.table
    readme = tmp_path / "benchmarks.md"
    readme.write_text(f"# speed\n{table.BEGIN}\nold table\n{table.END}\nafter\n")
    small = ("--items", 2000, "--python-items", 500, "--repeat", 1, "--no-rss")
    result = run("bench", *small, "--json", tmp_path / "b.json", "--cache", tmp_path,
                 "--readme", readme)
    clean(result, 0)
    assert "checks passed" in result.output
    assert f"scan, all {len(dcpfast.COLUMNS)} columns" in result.output
    report = json.loads((tmp_path / "b.json").read_text())
    assert list(report["corpora"]) == list(suite.corpora.CORPUS_NAMES)
    assert report["corpora"]["mixed"]["items"] == 2000
    assert {t["met"] for t in report["targets"]} <= {True, False, None}
    text = readme.read_text()
    assert "old table" not in text and text.endswith(f"{table.END}\nafter\n")
    assert f"| `scan`, all {len(dcpfast.COLUMNS)} columns |" in text
    again = run("bench", *small, "--corpus", "small", "--cache", tmp_path)
    assert "corpus small" in again.output and "corpus mixed" not in again.output
    assert "(cache " in again.output
    # the table rewritten from the JSON report alone is the one the run wrote
    copy = tmp_path / "copy.md"
    copy.write_text(f"{table.BEGIN}\n{table.END}\n")
    assert suite.scan.main(["--readme", str(copy), "--from-json", str(tmp_path / "b.json")]) == 0
    assert copy.read_text() == text[len("# speed\n"):-len("after\n")]


def test_bench_table_needs_a_marked_file(suite, tmp_path, capfd):
    report = tmp_path / "report.json"
    report.write_text("{}")
    unmarked = tmp_path / "unmarked.md"
    unmarked.write_text("# no markers\n")
    for target, why in ((tmp_path / "missing.md", "does not exist"),
                        (unmarked, "has no benchmark markers")):
        with pytest.raises(SystemExit) as stopped:
            suite.scan.main(["--readme", str(target), "--from-json", str(report)])
        assert stopped.value.code == 2
        assert why in capfd.readouterr().err
    assert unmarked.read_text() == "# no markers\n"


def test_bench_corpus_choices_are_the_suites(suite):
    option = next(p for p in cli.bench.bench.params if p.name == "corpora")
    assert tuple(option.type.choices) == suite.corpora.CORPUS_NAMES


def test_bench_outside_a_source_tree(monkeypatch, tmp_path):
    """An installed dcpfast (no benchmark suite beside it) does not list ``bench``, and
    says in one line where the suite lives if asked for it anyway."""
    script = tmp_path / "checkout" / "benchmarks" / "bench_scan.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    monkeypatch.setattr(cli.bench, "BENCH_SCRIPT", str(script))    # a checkout's suite
    assert "bench" in run("--help").output.split("Commands:")[1]
    monkeypatch.setattr(cli.bench, "BENCH_SCRIPT", str(tmp_path / "benchmarks" / "bench_scan.py"))
    assert "bench" not in run("--help").output.split("Commands:")[1]
    result = run("bench", "--quick")
    clean(result, 1)
    assert result.output.startswith("Error: ") and len(result.output.splitlines()) == 1
    assert "benchmarks/" in result.output


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("bench_*.py")))
def test_benchmark_scripts_start(suite, script, tmp_path):
    """Every benchmark script finds the suite next to it, from any directory, even with
    the script's directory left off ``sys.path`` (``python -P``)."""
    if script == "bench_spark.py":
        pytest.importorskip("pyspark")
    done = subprocess.run([sys.executable, "-P", str(BENCHMARKS / script), "--help"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr
