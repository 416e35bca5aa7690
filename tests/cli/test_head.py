"""``dcpfast head``: one line per frame, filtered, keys escaped and truncated."""

from __future__ import annotations

import re

import numpy as np

import dcpfast
from dcpfast import testing as t
from dcpfast.testing import SAMPLE
from tests.cli.commands import assert_escaped, clean, escapes_dump, run


def test_head_lines_follow_the_frames(dumps):
    batch = dcpfast.read(SAMPLE)
    result = run("head", dumps["raw"])
    clean(result, 0)
    title, *lines = result.output.splitlines()
    assert title.split() == ["offset", "opcode", "vb", "seqno", "key", "value", "datatype"]
    assert len(lines) == 20
    assert [int(line.split()[0]) for line in lines] == batch["offset"][:20].tolist()
    vb = int(batch.only("mutation")["vbucket"][-1])
    lines = run("head", "-n", 5, "--opcode", "mutation", "--opcode", "0x5a", "--vbucket",
                vb, dumps["raw"]).output.splitlines()[1:]
    wanted = np.flatnonzero(np.isin(batch["opcode"], [0x57, 0x5a]) &
                            (batch["vbucket"] == vb))[:5]
    assert [int(line.split()[0]) for line in lines] == batch["offset"][wanted].tolist()
    i = int(wanted[0])
    frame = batch.frame(i)
    key = batch.key(i).decode()
    assert re.search(rf"MUTATION\s+{vb}\s+{frame.by_seqno} rev {frame.rev_seqno}\s+"
                     rf"\[0x{frame.collection_id:x}\] {re.escape(key)}\s+"
                     rf"{len(batch.value(i)):,}\s+", lines[0])
    assert run("head", "-n", 0, dumps["raw"]).output == ""


def test_head_escapes_and_truncates_keys(tmp_path):
    path = tmp_path / "keys.dcp"
    path.write_bytes(t.mutation(b"\x00tab\there" + b"x" * 60, b"{}", by_seqno=9,
                                datatype=1, vbucket=5))
    result = run("head", "--no-collections", path)
    clean(result, 0)
    line = result.output.splitlines()[1]
    assert "\\x00tab\\there" in line and "..." in line and line.endswith("json")


def test_head_escapes_what_a_terminal_would_run(tmp_path):
    """Keys with escape sequences, C1 controls and line feeds shown escaped; keys that are
    UTF-8 text shown as text."""
    path = tmp_path / "escapes.dcp"
    path.write_bytes(escapes_dump() + t.mutation("caf\u00e9".encode(), b"{}", by_seqno=5,
                                                 datatype=1, collection_id=9, vbucket=5))
    result = run("head", path)
    clean(result, 0)
    assert_escaped(result.output)
    assert "[0x9] k\\x1b[2J\\x9bx\\nforged" in result.output
    assert "[0x9] b\\xff\\x1b[0m" in result.output and "[0x9] caf\u00e9 " in result.output
