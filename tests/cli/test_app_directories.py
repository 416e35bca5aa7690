"""A directory given to a command is one dump cut into pieces (a rotated dump): its files
read in name order as one stream, frames cut across two pieces decoded whole, every
command answering as it does for the whole file."""

from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq
import pytest

from dcpfast.testing import SAMPLE, SAMPLE_PCAP
from tests.cli.commands import run


@pytest.fixture(scope="module")
def pieces(tmp_path_factory):
    """The sample dump cut inside frames into four pieces, one of them gzip-compressed,
    in a directory (with a hidden file that is no piece); and the whole file."""
    root = tmp_path_factory.mktemp("rotated")
    data = SAMPLE.read_bytes()
    cuts = [0, 50_000, 100_001, 170_003, len(data)]
    folder = root / "dump"
    folder.mkdir()
    for k in range(4):
        piece = data[cuts[k]:cuts[k + 1]]
        name = folder / f"part-{k:03d}.dcp"
        if k == 2:
            name = name.with_suffix(".dcp.gz")
            piece = gzip.compress(piece)
        name.write_bytes(piece)
    (folder / ".part-000.dcp.swp").write_bytes(b"not a piece")
    whole = root / "whole.dcp"
    whole.write_bytes(data)
    return folder, whole


def test_info_head_and_convert_read_the_pieces_as_the_whole(pieces, tmp_path):
    folder, whole = pieces
    one, = json.loads(run("info", "--json", folder).output)
    other, = json.loads(run("info", "--json", whole).output)
    assert {k: v for k, v in one.items() if k != "file"} == \
        {k: v for k, v in other.items() if k != "file"}
    assert run("head", "-n", "50", folder).output == run("head", "-n", "50", whole).output
    for name, source in (("a", folder), ("b", whole)):
        assert run("convert", source, "-o", tmp_path / f"{name}.parquet", "-q").exit_code == 0
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))


@pytest.mark.parametrize("processes", ["1", "2"])
def test_state_diff_and_report_read_the_pieces_as_the_whole(pieces, tmp_path, processes):
    folder, whole = pieces
    for name, source in (("a", folder), ("b", whole)):
        done = run("state", source, "-o", tmp_path / f"{name}.parquet", "--processes",
                   processes)
        assert done.exit_code == 0, done.output
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    same = run("diff", folder, whole)
    assert same.exit_code == 0 and "no differences" in same.output, same.output
    for name, source in (("a", folder), ("b", whole)):
        assert run("report", source, "--json", tmp_path / f"{name}.json").exit_code == 0
    a, b = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "ab")
    def streams(figures):
        return [{k: v for k, v in s.items() if k != "connection"} for s in figures["streams"]]
    assert (a["frames"], streams(a), a["anomaly_counts"]) == \
        (b["frames"], streams(b), b["anomaly_counts"])


def test_directories_that_hold_no_dump(tmp_path):
    """An empty directory, and one of captures (read one by one, never joined): one line
    each."""
    empty = tmp_path / "empty"
    empty.mkdir()
    said = run("info", empty)
    assert said.exit_code == 1 and "no dump files in" in said.output
    captures = tmp_path / "captures"
    captures.mkdir()
    (captures / "a.pcap").write_bytes(SAMPLE_PCAP.read_bytes())
    said = run("state", captures, "-o", tmp_path / "s.parquet")
    assert said.exit_code == 1 and "a directory of packet captures" in said.output, \
        said.output
