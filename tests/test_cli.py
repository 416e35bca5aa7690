"""The dcpfast command on the bundled sample, on damaged files and on bad arguments."""

from __future__ import annotations

import re

from click.testing import CliRunner

import dcpfast
from dcpfast.cli import main
from dcpfast.io import SAMPLE


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_info_on_the_sample():
    result = run("info", "--sample")
    assert result.exit_code == 0, result.output
    batch = dcpfast.read(SAMPLE)
    assert f"{len(batch):,} frames" in result.output and "collections on" in result.output
    mutations = int((batch["opcode"] == dcpfast.Opcode.MUTATION).sum())
    assert re.search(rf"MUTATION\s+{mutations:,}\n", result.output)
    for vb in set(batch["vbucket"][batch.validity("vbucket")].tolist()) - {0}:
        assert re.search(rf"\n\s+{vb}\s+\d", result.output)


def test_sample_is_a_clean_collections_stream():
    batch = dcpfast.read(SAMPLE)
    assert batch.collections and not batch.errors and len(batch) > 2000
    kinds = set(batch["opcode"].tolist())
    assert {0x56, 0x57, 0x58, 0x59, 0x5f, 0x60, 0x62, 0x63} <= kinds


def test_damaged_file(tmp_path):
    path = tmp_path / "cut.dcp"
    path.write_bytes(SAMPLE.read_bytes()[:1000])
    result = run("info", str(path))
    assert result.exit_code == 1
    assert "truncated frame" in result.output and "Traceback" not in result.output
    result = run("info", "--errors", "skip", str(path))
    assert result.exit_code == 0 and "1 skipped regions" in result.output


def test_bad_arguments():
    assert run("info").exit_code == 2
    assert run("info", "/no/such/file").exit_code == 2
    assert run("info", "--errors", "ignore", "--sample").exit_code == 2
