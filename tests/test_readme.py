"""The documentation: the column table of docs/columns.md is the schema's, every relative
link of the README, docs/ and the changelog leads to a file (and heading) that exists, and
the pages describe dcpfast as it is (no commit hashes, no dated diary entries), and the
README's Python blocks run as shown."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dcpfast

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED = [*PAGES, ROOT / "CHANGELOG.md"]     # the pages whose links and words are checked
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
#: A commit hash: 7 to 40 lower-case hex digits, letters and digits both, standing alone
#: (not a number, a word, a ``0x`` value or a piece of a dashed identifier).
COMMIT = re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w-])")
#: A diary's marks: a heading with a date, an entry of what was tried and dropped.
DIARY = re.compile(r"^#{1,6} .*\b\d{4}-\d\d-\d\d\b.*$|\btried and (?:dropped|not kept)\b",
                   re.M | re.I)


def test_column_table_matches_the_schema():
    text = (ROOT / "docs" / "columns.md").read_text()
    rows = re.findall(r"^\| (\w+) \| (u?int\d+) \|", text, re.M)
    assert rows == [(c.name, c.dtype) for c in dcpfast.COLUMNS]


def _without_code_blocks(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", _without_code_blocks(text), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def _links(page: Path) -> list[str]:
    """The relative link targets of a page's prose (brackets in code are code)."""
    prose = re.sub(r"`[^`\n]*`", "", _without_code_blocks(page.read_text()))
    return [t for t in LINK.findall(prose)
            if not re.match(r"[a-z][a-z0-9+.-]*:", t)]


def test_the_readme_indexes_every_page_of_docs():
    linked = {t.partition("#")[0] for t in _links(ROOT / "README.md")}
    assert {f"docs/{page.name}" for page in PAGES[1:]} <= linked


@pytest.mark.parametrize("page", CHECKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text()):
            broken.append(f"{target}: no heading #{anchor} in {file.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


@pytest.mark.parametrize("page", CHECKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_pages_carry_no_commit_hash_or_diary(page):
    """History is in the commit messages and CHANGELOG.md; the pages say what is."""
    text = page.read_text()
    found = COMMIT.findall(text) + DIARY.findall(text)
    assert not found, f"{page.name}: {found}"


@pytest.mark.parametrize("text, found", [
    ("the build of 1a2b3c4 took", ["1a2b3c4"]), ("(cafe123)", ["cafe123"]),
    ("commit " + "9f" * 20, ["9f" * 20]), ("9f" * 21, []),
    ("a snapshot end of 0xffffffffffffffff", []), ("at byte 150994944", []),
    ("succeeded, deadbeef", []), ("id 550e8400-e29b-41d4-a716-446655440000", []),
    ("abc12", []),
])
def test_commit_hashes_are_told_from_values(text, found):
    assert COMMIT.findall(text) == found


def test_diary_marks():
    assert DIARY.findall("## 2026-11-29: the vbuckets\n") == ["## 2026-11-29: the vbuckets"]
    assert DIARY.findall("Tried and not kept: a table") == ["Tried and not kept"]
    assert DIARY.findall('at_time="2024-05-02T13:59:00Z"\nA CAS before 2000-01-01') == []


#: The README's Python blocks: the tour's, which run in turn in one interpreter as a
#: reader follows them, and the Spark block, which stands alone.
BLOCKS = re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)
TOUR = [block for block in BLOCKS if "pyspark" not in block]
SPARK = [block for block in BLOCKS if "pyspark" in block]


def _runs(code: str, cwd: Path) -> None:
    """Run ``code`` verbatim in a fresh interpreter in ``cwd``; it must end well."""
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          timeout=900, env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              sys.path)))
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]


def test_the_tour_runs_verbatim(tmp_path):
    """Every Python block of the README's tour but Spark's, in order, in one fresh
    interpreter: the reader's path through it works as shown (with the extras it imports:
    DuckDB and polars)."""
    pytest.importorskip("duckdb")
    pytest.importorskip("polars")
    assert len(TOUR) >= 8
    _runs("\n".join(TOUR), tmp_path)


@pytest.mark.spark
def test_the_spark_block_runs_verbatim(tmp_path):
    """The README's Spark block alone in a fresh interpreter (its session made there, the
    data source registered) writes what it says."""
    pytest.importorskip("pyspark")
    pytest.importorskip("deltalake")
    assert len(SPARK) == 1
    _runs(SPARK[0], tmp_path)
    assert list((tmp_path / "decoded").rglob("*.parquet"))
    assert (tmp_path / "frames" / "_delta_log").is_dir()
