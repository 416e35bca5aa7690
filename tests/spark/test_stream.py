"""The driver's walk over a growing file (``dcpfast.spark.stream``), without Spark: it stops
after the last complete frame, and a limit below one frame still moves it by one."""

from __future__ import annotations

import pyarrow.fs as pafs
import pytest

import dcpfast
from dcpfast import testing as T
from dcpfast.options import ScanOptions

pytest.importorskip("dcpfast.spark")
from dcpfast.spark.stream import walk  # noqa: E402


def test_the_walk_stops_after_the_last_complete_frame(tmp_path):
    """A frame cut at the end waits; a limit below one frame still moves by one frame."""
    data = T.synthetic_stream(60, seed=5)
    offsets = dcpfast.scan(data, final=True)["offset"].tolist()
    path = tmp_path / "g.dcp"
    cut = offsets[20] + 7                                  # inside frame 20
    path.write_bytes(data[:cut])
    options = ScanOptions.of(collections=None, errors="strict")
    with pafs.LocalFileSystem().open_input_file(str(path)) as f:
        bounds, collections = walk(f, 0, cut, cut, options, unverified=False,
                                   batch_bytes=300, progress=False)
        assert bounds[-1] == (offsets[20], False) and len(bounds) > 2
        assert all(b in offsets for b, _ in bounds)
        one, _ = walk(f, offsets[3], offsets[3] + 1, cut, options, unverified=False,
                      batch_bytes=1 << 20, progress=True)
        assert [b for b, _ in one] == [offsets[3], offsets[4]]
        none, _ = walk(f, offsets[3], offsets[3] + 1, cut, options, unverified=False,
                       batch_bytes=1 << 20, progress=False)
        assert none == [(offsets[3], False)]
