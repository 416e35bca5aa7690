"""The documentation: the column table of docs/columns.md is the schema's, and every
relative link of the README and docs/ leads to a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dcpfast

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


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


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
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
