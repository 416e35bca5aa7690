"""--pieces: the FILES given one by one are the pieces of one dump (a rotated dump), joined
in the order given as a directory's files are, frames cut across two pieces decoded
whole; without it FILES are separate dumps (or, for state and changes, one stream of
whole files), and a frame cut across two of them is an error."""

from __future__ import annotations

import gzip
import json
import re

import pyarrow.parquet as pq
import pytest

from dcpfast.cli.app import PIECES_HELP
from dcpfast.testing import SAMPLE, SAMPLE_PCAP
from tests.cli.commands import clean, run

#: The commands that read dumps and take --pieces.
COMMANDS = ("convert", "state", "report", "info", "head", "changes", "spark-decode")


@pytest.fixture(scope="module")
def cut(tmp_path_factory):
    """The sample dump cut inside frames into four pieces, the third gzip-compressed, in
    name order (``pieces``), the same pieces in a directory, and the whole file."""
    root = tmp_path_factory.mktemp("pieces")
    data = SAMPLE.read_bytes()
    cuts = [0, 50_000, 100_001, 170_003, len(data)]
    folder = root / "dump"
    folder.mkdir()
    pieces = []
    for k in range(4):
        piece = data[cuts[k]:cuts[k + 1]]
        name = folder / f"dump.{k:03d}"
        if k == 2:
            name = name.with_suffix(".002.gz")
            piece = gzip.compress(piece)
        name.write_bytes(piece)
        pieces.append(name)
    whole = root / "whole.dcp"
    whole.write_bytes(data)
    return pieces, folder, whole


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_that_reads_dumps_has_the_same_flag(command):
    said = run(command, "--help")
    clean(said, 0)
    assert "--pieces" in said.output and PIECES_HELP in _words(said.output), said.output


def test_without_the_flag_a_frame_cut_across_files_is_an_error(cut, tmp_path):
    pieces, _, _ = cut
    for command in (["convert", *pieces, "-o", tmp_path / "a.parquet"],
                    ["state", *pieces, "-o", tmp_path / "s.parquet"],
                    ["changes", *pieces, "-o", tmp_path / "c.jsonl"]):
        said = run(*command)
        clean(said, 1)
        assert f"{pieces[0]}: at byte " in said.output and "truncated frame" in said.output
    said = run("head", *pieces)
    clean(said, 2)
    assert "give one FILE, or the pieces of one dump with --pieces" in said.output


def test_info_head_and_convert_read_the_pieces_as_the_whole(cut, tmp_path):
    pieces, folder, whole = cut
    one, = json.loads(run("info", "--json", "--pieces", *pieces).output)
    other, = json.loads(run("info", "--json", whole).output)
    assert one["file"] == " + ".join(map(str, pieces))
    assert {k: v for k, v in one.items() if k != "file"} == \
        {k: v for k, v in other.items() if k != "file"}
    assert run("head", "-n", "2000", "--pieces", *pieces).output == \
        run("head", "-n", "2000", whole).output
    for name, args in (("a", ["--pieces", *pieces]), ("b", [whole]), ("c", [folder])):
        clean(run("convert", *args, "-o", tmp_path / f"{name}.parquet", "-q"), 0)
    a, b, c = (pq.read_table(tmp_path / f"{n}.parquet") for n in "abc")
    assert a.num_rows > 1000 and a.equals(b) and c.equals(b)


def test_state_changes_and_report_read_the_pieces_as_the_whole(cut, tmp_path):
    pieces, _, whole = cut
    for name, args in (("a", ["--pieces", *pieces]), ("b", [whole])):
        clean(run("state", *args, "-o", tmp_path / f"{name}.parquet"), 0)
        clean(run("changes", *args, "-o", tmp_path / f"{name}.jsonl"), 0)
        clean(run("report", *args, "--json", tmp_path / f"{name}.json"), 0)
    a, b = (pq.read_table(tmp_path / f"{n}.parquet") for n in "ab")
    assert a.num_rows > 100 and a.equals(b)
    lines = [(tmp_path / f"{n}.jsonl").read_bytes() for n in "ab"]
    assert lines[0].count(b"\n") > 100 and lines[0] == lines[1]
    reports = [json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab"]

    def streams(figures):
        return [{k: v for k, v in s.items() if k != "connection"} for s in figures["streams"]]
    assert reports[0]["frames"] == reports[1]["frames"] > 1000
    assert streams(reports[0]) == streams(reports[1])
    assert reports[0]["anomaly_counts"] == reports[1]["anomaly_counts"]


def test_the_pieces_are_joined_in_the_order_given(cut, tmp_path):
    pieces, _, _ = cut
    said = run("info", "--pieces", *pieces[::-1])
    clean(said, 1)
    assert "unknown magic" in said.output


def test_what_cannot_be_a_piece(cut, tmp_path):
    pieces, _, _ = cut
    said = run("info", "--pieces", pieces[0], "-")
    clean(said, 2)
    assert "standard input (-) cannot be a piece" in said.output
    missing = tmp_path / "dump.009"
    said = run("convert", "--pieces", pieces[0], missing, "-o", tmp_path / "x.parquet")
    clean(said, 1)
    assert f"{missing}: No such file or directory" in said.output
    said = run("state", "--pieces", SAMPLE_PCAP, SAMPLE_PCAP, "-o", tmp_path / "s.parquet")
    clean(said, 1)
    assert "pieces of packet captures" in said.output
    assert not (tmp_path / "x.parquet").exists() and not (tmp_path / "s.parquet").exists()


def test_one_piece_is_the_file(cut, tmp_path):
    _, _, whole = cut
    for name, args in (("a", ["--pieces", whole]), ("b", [whole])):
        clean(run("convert", *args, "-o", tmp_path / f"{name}.parquet", "-q"), 0)
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
