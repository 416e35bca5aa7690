"""``dcpfast info``: the counts of the bundled sample, as text and JSON; damage."""

from __future__ import annotations

import json
import re

import numpy as np

import dcpfast
from dcpfast import testing as t
from dcpfast.protocol import DOCUMENT_CHANGES
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


def _all_vb_seqnos(pairs) -> bytes:
    """A GetAllVbSeqnos success response listing ``pairs`` (vbucket, seqno)."""
    return t.response(0x48, value=b"".join(vb.to_bytes(2, "big") + seqno.to_bytes(8, "big")
                                           for vb, seqno in pairs))


def test_info_against_the_servers_high_seqnos(tmp_path):
    """A dump that holds the server's GetAllVbSeqnos answer: info says which vbuckets did
    not get as far as the server said they were, and the JSON gives each vbucket's."""
    batch = dcpfast.read(SAMPLE)
    documents = np.isin(batch["opcode"], sorted(DOCUMENT_CHANGES)) & batch.validity("vbucket")
    last = {vb: int(batch["by_seqno"][documents & (batch["vbucket"] == vb)].max())
            for vb in (593, 621, 748, 848)}
    answer = [(593, last[593]), (621, last[621] + 80), (748, last[748] - 5), (848, 0), (12, 7)]
    path = tmp_path / "with-seqnos.dcp"
    path.write_bytes(SAMPLE.read_bytes() + _all_vb_seqnos(answer))
    text = run("info", str(path)).output
    assert (f"server's high seqnos (GetAllVbSeqnos, 5 vbuckets): 2 not reached here: vb 12 "
            f"none of its 7, vb 621 captured to {last[621]:,} of {last[621] + 80:,}") in text
    (found,) = json.loads(run("info", "--json", str(path)).output)
    assert found["server_seqnos"] == {str(vb): seqno for vb, seqno in sorted(answer)}
    assert found["vbuckets"]["748"]["server_seqno"] == last[748] - 5
    assert found["behind_server"] == [
        {"vbucket": 12, "last_seqno": None, "server_seqno": 7},
        {"vbucket": 621, "last_seqno": last[621], "server_seqno": last[621] + 80}]


def test_info_of_a_malformed_high_seqnos_answer(tmp_path):
    """A GetAllVbSeqnos answer that is not whole entries: an error naming it, or in skip
    mode a skipped region, the rest of the input counted."""
    path = tmp_path / "bad-seqnos.dcp"
    path.write_bytes(SAMPLE.read_bytes() + t.response(0x48, value=bytes(15)))
    failed = run("info", str(path))
    assert failed.exit_code != 0 and "GetAllVbSeqnos response value of 15 bytes" in \
        failed.output
    text = run("info", "--errors", "skip", str(path)).output
    assert "1,172 frames" in text and "1 skipped regions" in text


def test_inputs_of_another_format_are_named(tmp_path):
    """Text or a Parquet file given as a dump: strict mode names what it is, in one line
    without the skip hint; skip mode, which finds no frame in it, is an error too, not an
    empty answer; an empty dump is no error."""
    text = tmp_path / "notes.txt"
    text.write_text("# what the capture showed\nvb 12 stalled\n")
    strict = run("info", str(text))
    assert strict.exit_code == 1 and strict.output.strip() == (
        f"Error: {text}: at byte 0: unknown magic 0x23: the input starts as text, not as DCP "
        "frames")
    skip = run("info", "--errors", "skip", str(text))
    size = text.stat().st_size
    assert skip.exit_code == 1 and f"no DCP frame in the input: all of its {size} bytes were " \
        "skipped as damage: the input starts as text" in skip.output
    table = tmp_path / "frames.parquet"
    assert run("convert", str(SAMPLE), "-o", str(table), "-q").exit_code == 0
    for command in ("info", "head", "state"):
        args = [command, str(table)] + (["-o", str(tmp_path / "s.parquet")]
                                        if command == "state" else [])
        said = run(*args)
        assert said.exit_code == 1 and "the input starts as a Parquet file" in said.output \
            and "--errors skip" not in said.output, (command, said.output)
    empty = tmp_path / "empty.dcp"
    empty.write_bytes(b"")
    assert run("info", "--errors", "skip", str(empty)).exit_code == 0
