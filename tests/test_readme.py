"""The README's column table is the schema's."""

from __future__ import annotations

import re
from pathlib import Path

import dcpfast

README = Path(__file__).parent.parent / "README.md"


def test_column_table_matches_the_schema():
    rows = re.findall(r"^\| (\w+) \| (u?int\d+) \|", README.read_text(), re.M)
    assert rows == [(c.name, c.dtype) for c in dcpfast.COLUMNS]
