"""``dcpfast diff``: the summary, the rows written, and the exit status: 0 equal, 1 differ,
2 on every error."""

from __future__ import annotations

import gzip

import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.compare import summary
from dcpfast.compare.output import metadata
from dcpfast.testing import SAMPLE
from tests.cli.commands import assert_escaped, escapes_dump
from tests.diff_scenarios import derive, documents, source


def run(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli-diff")
    data = source(7, items=300)
    target = derive(documents(data)[0], 7)
    paths = {"source": root / "s.dcp.gz", "target": root / "t.dcp"}
    paths["source"].write_bytes(gzip.compress(data))
    paths["target"].write_bytes(target.data)
    capture = t.pcap_file(t.tcp_packets(t.tcp_conversation(b"", target.data, sizes=(900,))))
    paths["capture"] = root / "t.pcap"
    paths["capture"].write_bytes(capture)
    paths["existing"] = root / "existing.parquet"
    paths["existing"].write_bytes(b"kept")
    return data, target.data, paths


def test_the_same_dumps_exit_0():
    result = run("diff", SAMPLE, SAMPLE)
    assert result.exit_code == 0, result.output
    assert "no differences" in result.output and "inventory.hotel" in result.output


def test_differing_dumps_exit_1_and_write_the_rows(dumps, tmp_path):
    data, target, paths = dumps
    want = dcpfast.diff(data, target, fields=[*dcpfast.compare.DEFAULT_FIELDS, "cas"])
    out = tmp_path / "d.parquet"
    result = run("diff", paths["source"], paths["target"], "-o", out, "--fields", "+cas")
    assert result.exit_code == 1, result.output
    written = pq.read_table(out)
    assert written.equals(want) and metadata(written) == metadata(want)
    assert f"{want.num_rows:,} difference(s) -> {out}" in result.output
    for c in summary(want).to_pylist():
        assert f"{c['scope']}.{c['collection']}" in result.output
    arrow = tmp_path / "d.arrow"
    assert run("diff", paths["source"], paths["capture"], "-o", arrow, "--fields",
               "body,flags", "--collection", "route", "--threads", "1").exit_code == 1
    assert feather.read_table(arrow).equals(dcpfast.diff(data, target, fields=["body", "flags"],
                                                         only_collections=["route"]))
    shown = run("diff", paths["target"], paths["source"], "--include-deleted")
    assert shown.exit_code == 1 and "more (-o FILE writes them all)" in shown.output
    piped = CliRunner().invoke(main, ["diff", "-", str(paths["target"])], input=data)
    plain = dcpfast.diff(data, target).num_rows
    assert piped.exit_code == 1 and f"{plain:,} difference(s):" in piped.output


def test_not_compared_is_said_and_is_no_difference(tmp_path):
    """A dump cut inside a snapshot, against itself whole up to there: equal, with what
    could not be compared counted."""
    marker = t.snapshot_marker(1, 4, vbucket=2)
    first = t.mutation(b"a", b"{}", by_seqno=1, datatype=1, vbucket=2)
    second = t.mutation(b"b", b"{}", by_seqno=2, datatype=1, vbucket=2)
    (tmp_path / "a.dcp").write_bytes(marker + first + second)
    (tmp_path / "b.dcp").write_bytes(marker + first)
    result = run("diff", tmp_path / "a.dcp", tmp_path / "b.dcp")
    assert result.exit_code == 0, result.output
    assert "2 document(s) not compared" in result.output and "no differences" in result.output


def test_every_error_exits_2(dumps, tmp_path):
    data, target, paths = dumps
    broken = bytearray(target)
    at = dcpfast.scan(target)["offset"].tolist()[30]
    broken[at] = 0
    bad = tmp_path / "bad.dcp"
    bad.write_bytes(bytes(broken))
    damaged = run("diff", paths["source"], bad)
    assert damaged.exit_code == 2
    assert damaged.output.strip().splitlines()[-1].startswith(f"Error: target {bad}: at byte {at}:")
    skipped = run("diff", paths["source"], bad, "--errors", "skip")
    assert skipped.exit_code == 1 and f"target {bad}: skipped 1 damaged" in skipped.output
    for args in (["diff", paths["source"], tmp_path / "missing.dcp"],       # no such file
                 ["diff", paths["source"]],                                  # usage
                 ["diff", paths["source"], paths["target"], "--fields", "size"],
                 ["diff", paths["source"], paths["target"], "--at-seqno", "x"],
                 ["diff", paths["source"], paths["target"], "--at-seqno", "5", "--at-time",
                  "2024-01-01"],
                 ["diff", paths["source"], paths["target"], "--at-time", "yesterday"],
                 ["diff", "-", "-"],
                 ["diff", paths["source"], paths["target"], "-o", paths["target"]],
                 ["diff", paths["source"], paths["target"], "-o", tmp_path / "no" / "d.parquet"],
                 ["diff", paths["source"], paths["target"], "--threads", "0"],
                 ["diff", paths["source"], paths["target"], "-o", tmp_path / "d.csv"],
                 ["diff", paths["source"], paths["target"], "-o", paths["existing"]]):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output and result.output.strip(), args
    assert paths["target"].stat().st_size == len(target)
    assert paths["existing"].read_bytes() == b"kept"
    forced = run("diff", paths["source"], paths["target"], "-o", paths["existing"], "--force")
    assert forced.exit_code == 1 and pq.read_table(paths["existing"]).num_rows


def test_what_diff_cannot_answer_exits_2_and_what_it_can_matches(tmp_path):
    """A collection name neither side holds is a usage error of --collection; keys whose
    stream does not say they carry a collection id, beside keys that do, are an error
    until --collections says so; a dump that never named a scope still matches."""
    from tests.compare.test_api import default_collection, without_scope_events

    _, server = t.synthetic_conversation(200, seed=2, vbuckets=2)
    paths = {name: tmp_path / f"{name}.dcp" for name in ("whole", "unscoped", "said", "unsaid")}
    paths["whole"].write_bytes(b"".join(f.data for f in server))
    paths["unscoped"].write_bytes(without_scope_events(server))
    paths["said"].write_bytes(default_collection(hello=dcpfast.protocol.FEATURE_COLLECTIONS))
    paths["unsaid"].write_bytes(default_collection(hello=None))
    typo = run("diff", paths["whole"], paths["whole"], "--collection", "hotle")
    assert typo.exit_code == 2 and "Traceback" not in typo.output
    assert "Invalid value for --collection" in typo.output and \
        "hotle, which neither side holds" in typo.output
    unsaid = run("diff", paths["said"], paths["unsaid"])
    assert unsaid.exit_code == 2 and "Traceback" not in unsaid.output
    assert "the target's keys were read without collection ids" in unsaid.output
    assert run("diff", paths["said"], paths["unsaid"], "--collections").exit_code == 0
    same = run("diff", paths["whole"], paths["unscoped"])
    assert same.exit_code == 0 and "no differences" in same.output, same.output


def test_names_and_keys_from_a_dump_are_printed_escaped(tmp_path):
    """Scope, collection and key names holding terminal escapes (a colour, a window title,
    a C1 control, a line feed) are printed escaped, never as they are."""
    path = tmp_path / "escapes.dcp"
    path.write_bytes(escapes_dump())
    empty = tmp_path / "empty.dcp"
    empty.write_bytes(b"")
    result = run("diff", path, empty)
    assert result.exit_code == 1, result.output
    assert_escaped(result.output)
    assert "s\\x1b[31mred.c\\x1b]0;owned\\x07" in result.output
    assert "k\\x1b[2J\\x9bx\\nforged" in result.output


def test_a_state_file_is_a_side(tmp_path):
    """What ``dcpfast state -o`` wrote (with its tombstones) is a side of ``dcpfast diff``;
    one without them, or a Parquet file of frames, is an error in one line."""
    whole = tmp_path / "whole.parquet"
    assert run("state", SAMPLE, "-o", whole, "--include-deleted").exit_code == 0
    same = run("diff", whole, SAMPLE)
    assert same.exit_code == 0 and "no differences" in same.output, same.output
    early = tmp_path / "early.parquet"
    assert run("state", SAMPLE, "-o", early, "--include-deleted", "--at-seqno", "100")\
        .exit_code == 0
    differ = run("diff", early, whole)
    assert differ.exit_code == 1 and "difference(s)" in differ.output, differ.output
    assert differ.output == run("diff", early, SAMPLE).output.replace(str(SAMPLE), str(whole))
    bare = tmp_path / "bare.parquet"
    assert run("state", SAMPLE, "-o", bare).exit_code == 0
    refused = run("diff", bare, SAMPLE)
    assert refused.exit_code == 2 and "include_deleted" in refused.output
    frames = tmp_path / "frames.parquet"
    assert run("convert", SAMPLE, "-o", frames, "-q").exit_code == 0
    refused = run("diff", SAMPLE, frames)
    assert refused.exit_code == 2 and refused.output.strip().endswith(
        "this table carries no dcpfast state metadata"), refused.output
