"""Dumps cut into pieces on Spark (``dcpfast.spark.joined``, ``source.JoinedFile``): the
streams a directory or the pieces given make, their byte ranges cut at frame boundaries of
the joined stream, and every read of them giving the rows of ``dcpfast.read`` of the
directory: the same frames at the same offsets, each row's ``source`` the file its frame
starts in."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pyarrow as pa
import pytest

import dcpfast
from dcpfast import spark as dspark
from dcpfast import testing as T
from dcpfast.spark.joined import planned, streams
from dcpfast.spark.source import JoinedFile, read_piece

#: Where the dump is cut: inside frames, and one piece of no byte at all.
CUTS = (0, 1001, 1001, 9_999, 20_000, 33_333)


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    """A dump cut at ``CUTS`` and the rest, in a directory of plain pieces and in one
    whose third piece is gzip-compressed; and the whole dump's bytes."""
    root = tmp_path_factory.mktemp("rotated")
    data = T.synthetic_stream(400, seed=31, value_size=80)
    cuts = [*CUTS, len(data)]
    assert len(data) > CUTS[-1] + 10_000
    folders = {}
    for kind in ("plain", "gzip"):
        folder = root / kind
        folder.mkdir()
        for k in range(len(cuts) - 1):
            piece = data[cuts[k]:cuts[k + 1]]
            name = folder / f"dump.{k:03d}"
            if kind == "gzip" and k == 3:
                name, piece = folder / f"dump.{k:03d}.gz", gzip.compress(piece)
            name.write_bytes(piece)
        folders[kind] = folder
    return folders, data


def _files(folder) -> list[str]:
    return sorted(str(p) for p in folder.iterdir())


def test_the_streams_of_files_directories_and_pieces(rotated, tmp_path):
    folders, _ = rotated
    folder, alone = str(folders["plain"]), str(folders["gzip"] / "dump.000")
    files = _files(folders["plain"])
    assert [name for name, _ in streams([folder, alone], "files")] == [*files, alone]
    [(name, found), (other, [(one, _)])] = streams([folder, alone], "directories")
    assert name == folder and [uri for uri, _ in found] == files and other == one == alone
    [(_, found)] = streams([alone, folder], "all")
    assert [uri for uri, _ in found] == [alone, *files]
    with pytest.raises(ValueError, match="joined must be one of"):
        streams([folder], "some")


def test_joined_file_reads_the_pieces_as_one_file(rotated):
    folders, data = rotated
    files = [(p, os.path.getsize(p)) for p in _files(folders["plain"])]
    with JoinedFile(files) as f:
        assert f.size == len(data) and f.read_at(len(data) + 5, 0) == data
        for pos in (0, 1000, 1001, 9_998, 33_333, len(data) - 1):
            assert f.read_at(3000, pos) == data[pos:pos + 3000]
        f.seek(-7, os.SEEK_END)
        assert f.read() == data[-7:]


def _rows(pieces, schema) -> pa.Table:
    batches = [rb for piece in pieces
               for rb in read_piece(piece, schema, collections=None, errors="strict",
                                    batch_bytes=4096, lead_in=300)]
    return pa.Table.from_batches(batches, schema).sort_by("offset")


@pytest.mark.parametrize("kind", ["plain", "gzip"])
def test_a_directory_read_in_ranges_gives_the_rows_of_read(rotated, kind):
    folders, data = rotated
    folder = str(folders[kind])
    parts = planned([folder], "directories", 4000, 1)
    pieces = [p for part in parts for p in part]
    if kind == "plain":                    # cut at byte positions of the joined stream
        assert len(pieces) > 5 and all(p.files and p.size == len(data) for p in pieces)
    else:                                  # a compressed piece: read whole
        assert len(pieces) == 1 and pieces[0].whole and len(pieces[0].files) == len(CUTS)
    schema = dspark.spark_arrow_schema(["offset", "by_seqno", "key", "source"])
    table = _rows(pieces, schema)
    want = dcpfast.read(folder)
    assert table.column("offset").to_pylist() == want["offset"].tolist()
    assert table.column("key").to_pylist() == [want.key(i) for i in range(len(want))]
    owner = np.searchsorted(np.array(CUTS), want["offset"], side="right") - 1
    names = _files(folders[kind])
    assert table.column("source").to_pylist() == [f"file:{names[k]}" for k in owner]


def test_pieces_given_are_joined_in_the_order_given(rotated):
    folders, data = rotated
    files = _files(folders["plain"])
    parts = planned(files, "all", 5000, 1)
    table = _rows([p for part in parts for p in part], dspark.spark_arrow_schema(["offset"]))
    assert table.column("offset").to_pylist() == dcpfast.scan(data)["offset"].tolist()
    with pytest.raises(dcpfast.DcpFormatError):
        _rows([p for part in planned(files[::-1], "all", 10**6, 1) for p in part],
              dspark.spark_arrow_schema(["offset"]))


@pytest.mark.spark
def test_read_dcp_joins_directories_when_asked(spark, rotated):
    folders, data = rotated
    want = dcpfast.scan(data)["offset"].tolist()
    for kind, folder in folders.items():
        df = dspark.read_dcp(spark, str(folder), columns=["offset", "by_seqno"],
                             joined="directories", partition_bytes=3000, leadInBytes=300)
        assert sorted(r.offset for r in df.collect()) == want, kind
    # each file a dump: a task fails at the end of a file cut mid-frame, or at the start
    # of the next one; whichever Spark reports first
    with pytest.raises(Exception, match="truncated frame|at byte 0: unknown magic"):
        dspark.read_dcp(spark, str(folders["plain"]), columns=["offset"]).collect()
    with pytest.raises(TypeError, match="joined"):
        dspark.read_dcp(spark, str(folders["plain"]), "arrow", joined="all")


@pytest.mark.spark
def test_write_parquet_joins_directories_when_asked(spark, rotated, tmp_path):
    folders, data = rotated
    out = str(tmp_path / "decoded")
    summary = dspark.write_parquet(spark, str(folders["plain"]), out, partition_by=(),
                                   columns=["offset", "key", "source"], joined="directories",
                                   partition_bytes=3000, lead_in=300)
    assert summary["tasks"] > 5
    table = pa.concat_tables([
        pa.parquet.read_table(os.path.join(out, name)) for name in sorted(os.listdir(out))
        if name.endswith(".parquet")]).sort_by("offset")
    want = dcpfast.scan(data)
    assert table.column("offset").to_pylist() == want["offset"].tolist()
    assert table.column("key").to_pylist() == [want.key(i) for i in range(len(want))]
