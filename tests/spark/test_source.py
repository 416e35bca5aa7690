"""Reading dumps on Spark (``dcpfast.spark.source``): a piece read in skip mode logs what it
dropped, once, naming the file and its bytes; what a listing of inputs refuses and leaves
out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import dcpfast
from dcpfast import spark as dspark
from dcpfast.io.ranges import Piece
from dcpfast.spark.source import list_files, read_piece
from tests.io.test_ranges import _damaged, _whole, _write


def test_skip_mode_logs_what_it_dropped(tmp_path, stream, caplog):
    data = _damaged(stream)
    path = _write(tmp_path, "bad.dcp", data)
    ref = _whole(data, errors="skip")
    regions = sorted((e.offset, e.offset + e.length) for e in ref.errors)
    schema = dspark.spark_arrow_schema(["offset"])
    whole = Piece(path, 0, len(data), len(data))
    with caplog.at_level("WARNING", logger="dcpfast.spark"):
        rows = sum(rb.num_rows for rb in read_piece(
            whole, schema, collections=None, errors="skip", batch_bytes=4096))
    assert rows == len(ref)
    [record] = caplog.records
    assert f"skipped {len(regions)} damaged region(s), " \
        f"{sum(end - start for start, end in regions)} bytes, the first at byte {regions[0][0]}" \
        in record.getMessage()
    caplog.clear()
    list(read_piece(Piece(path, 0, len(stream) // 2, len(data)), schema,
                           collections=None, errors="skip"))
    assert "bad.dcp (bytes 0 to" in caplog.records[0].getMessage()
    caplog.clear()
    list(read_piece(Piece(_write(tmp_path, "good.dcp", stream), 0,
                                        len(stream), len(stream)),
                           schema, collections=None, errors="skip"))
    assert not caplog.records


def test_what_a_listing_of_inputs_refuses_and_leaves_out(tmp_path):
    """A dangling link (named or in a directory) and a FIFO or a device are refused with
    their reason; Parquet files, hidden and ``_`` directories and a job's output inside
    the input are left out."""
    root = tmp_path / "in"
    root.mkdir()
    shutil.copy(dcpfast.testing.SAMPLE, root / "a.dcp")
    (root / "_temporary" / "x").mkdir(parents=True)
    (root / "_temporary" / "x" / "part.dcp").write_bytes(b"x")
    (root / "out" / "vbucket=1").mkdir(parents=True)
    (root / "out" / "vbucket=1" / "part-00000-0123456789abcdef-0.parquet").write_bytes(b"P")
    (root / "out" / "mine.dcp").write_bytes(b"x")
    assert [os.path.basename(u) for u, _ in list_files([str(root)])] == ["a.dcp", "mine.dcp"]
    assert [os.path.basename(u) for u, _ in list_files([str(root)],
                                                       exclude=[str(root / "out")])] == \
        ["a.dcp"]
    (root / "gone.dcp").symlink_to(tmp_path / "nowhere.dcp")
    for named in (root, root / "gone.dcp"):
        with pytest.raises(FileNotFoundError) as failure:
            list_files([str(named)])
        assert failure.value.filename == str(root / "gone.dcp")
        assert failure.value.strerror == f"a symbolic link to {tmp_path / 'nowhere.dcp'}, " \
                                         "which does not exist"
    (root / "gone.dcp").unlink()
    os.mkfifo(root / "pipe")
    for named, kind in ((root, "FIFO"), (root / "pipe", "FIFO"),
                        (Path("/dev/zero"), "character device")):
        with pytest.raises(ValueError, match=f"is not a regular file or directory \\(a {kind}\\)"):
            list_files([str(named)])
