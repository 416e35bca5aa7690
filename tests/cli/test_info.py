"""``dcpfast info``: the counts of the bundled sample, as text and JSON; damage."""

from __future__ import annotations

import json
import re

import dcpfast
from dcpfast.testing import SAMPLE
from tests.cli.commands import assert_escaped, clean, escapes_dump, run


def test_info_on_the_sample():
    result = run("info", "--sample")
    assert result.exit_code == 0, result.output
    batch = dcpfast.read(SAMPLE)
    assert f"{len(batch):,} frames" in result.output and "collections on" in result.output
    mutations = int((batch["opcode"] == dcpfast.Opcode.MUTATION).sum())
    assert re.search(rf"MUTATION\s+{mutations:,}\n", result.output)
    for vb in set(batch["vbucket"][batch.validity("vbucket")].tolist()) - {0}:
        assert re.search(rf"\n\s+{vb}\s+\d", result.output)


def test_damaged_file(tmp_path):
    path = tmp_path / "cut.dcp"
    path.write_bytes(SAMPLE.read_bytes()[:1000])
    result = run("info", str(path))
    assert result.exit_code == 1
    assert "truncated frame" in result.output and "Traceback" not in result.output
    result = run("info", "--errors", "skip", str(path))
    assert result.exit_code == 0 and "1 skipped regions" in result.output


def test_info_json_matches_the_scan(dumps):
    batch = dcpfast.read(SAMPLE)
    result = run("info", "--json", dumps["raw"])
    clean(result, 0)
    [summary] = json.loads(result.output)
    assert summary["frames"] == len(batch) and summary["errors"] == []
    assert summary["bytes"] == len(SAMPLE.read_bytes())
    assert summary["opcodes"]["MUTATION"] == int((batch["opcode"] == 0x57).sum())
    for vb, entry in summary["vbuckets"].items():
        mine = batch["vbucket"] == int(vb)
        assert entry["frames"] == int((mine & batch.validity("vbucket")).sum())
    mutations = batch.only("mutation", "deletion", "expiration", "prepare", "commit", "abort")
    assert sum(summary["documents_by_collection"].values()) == len(mutations)
    assert {int(c, 16) for c in summary["documents_by_collection"]} == \
        set(mutations["collection_id"].tolist())


def test_names_from_a_dump_and_file_names_are_printed_escaped(tmp_path):
    path = tmp_path / "escapes\x1b]0;title\x07.dcp"
    path.write_bytes(escapes_dump())
    result = run("info", path)
    clean(result, 0)
    assert_escaped(result.output)
    assert re.search(r"collection names: .*, 0x9 s\\x1b\[31mred\.c\\x1b\]0;owned\\x07\n",
                     result.output)
    assert result.output.startswith(f"{tmp_path}/escapes\\x1b]0;title\\x07.dcp: ")
    missing = run("info", tmp_path / "none\x1b[2J.dcp")
    clean(missing, 1)
    assert_escaped(missing.output)
