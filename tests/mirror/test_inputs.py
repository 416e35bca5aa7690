"""``mirror.inputs``: the inputs as one stream up to their last whole frame, and the
positions a later run checks them against."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast.mirror.inputs import (
    InputsChanged,
    check,
    files_of,
    read,
    read_on,
    whole_frames,
)
from dcpfast.testing import SAMPLE

DATA = SAMPLE.read_bytes()
ENDS = [o + n for o, n in zip(dcpfast.scan(DATA).to_arrow()["offset"].to_pylist(),
                              (dcpfast.scan(DATA).to_arrow()["body_len"].to_numpy() + 24)
                              .tolist(), strict=True)]


@given(st.integers(0, len(DATA)))
@settings(max_examples=200, deadline=None)
def test_the_last_whole_frame_of_any_prefix(cut):
    end = whole_frames(DATA[:cut])
    assert end == max([e for e in ENDS if e <= cut], default=0)


def test_files_of_a_directory_in_name_order(tmp_path):
    for name in ("b.dcp", "a.dcp", ".hidden", "c.dcp"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    assert [os.path.basename(f) for f in files_of(tmp_path)] == ["a.dcp", "b.dcp", "c.dcp"]
    with pytest.raises(FileNotFoundError, match="nothing.dcp"):
        files_of([tmp_path / "nothing.dcp"])
    with pytest.raises(ValueError, match="at least one"):
        files_of([])


def test_files_read_as_one_stream_what_waits_at_the_end(tmp_path):
    cut = [0, 1000, 1001, len(DATA) - 10]
    files = []
    for i, (lo, hi) in enumerate(zip(cut, cut[1:])):
        (tmp_path / f"{i}.dcp").write_bytes(DATA[lo:hi])
        files.append(str(tmp_path / f"{i}.dcp"))
    got = read(files)
    assert got.data == DATA[:whole_frames(DATA[:len(DATA) - 10])]
    assert got.waiting == len(DATA) - 10 - len(got.data) > 0
    assert [p["offset"] for p in got.positions] == [1000, 1, len(DATA) - 1011]


def test_a_compressed_dump_is_read_whole_and_alone(tmp_path):
    packed = tmp_path / "d.dcp.gz"
    packed.write_bytes(gzip.compress(DATA))
    got = read([str(packed)])
    assert got.whole and got.data == packed.read_bytes() and got.waiting == 0
    other = tmp_path / "e.dcp"
    other.write_bytes(DATA)
    with pytest.raises(ValueError, match="mirrored alone"):
        read([str(other), str(packed)])


def test_a_later_run_refuses_files_that_do_not_continue(tmp_path):
    dump = tmp_path / "d.dcp"
    dump.write_bytes(DATA[:5000])
    applied = read([str(dump)]).positions
    with open(dump, "ab") as f:
        f.write(DATA[5000:9000])
    check([str(dump)], applied)                          # grown: fine
    check([str(dump), str(tmp_path / "next.dcp")], applied)
    with pytest.raises(InputsChanged, match="missing"):
        check([str(tmp_path / "x.dcp")], applied)
    changed = bytearray(DATA[:9000])
    changed[100] ^= 0xFF                                 # rewritten in place
    dump.write_bytes(bytes(changed))
    check([str(dump)], applied)                          # its metadata cannot tell ...
    with pytest.raises(InputsChanged, match="rewritten in place"):
        read([str(dump)], applied)                       # ... its bytes do
    with pytest.raises(InputsChanged, match="begin with the files applied"):
        check([str(tmp_path / "first.dcp"), str(dump)], applied)


@given(st.integers(1, len(DATA) - 1), st.integers(1, len(DATA) - 1), st.integers(0, 100))
@settings(max_examples=40, deadline=None)
def test_reading_on_gives_the_stream_from_an_offset(tmp_path_factory, a, b, back):
    """A later run's read: the stream from an offset, each file's checksum whole as a run
    reading everything would have it, a file before the last that grew refused."""
    folder = tmp_path_factory.mktemp("on")
    first, second = sorted((a, b))
    (folder / "a.dcp").write_bytes(DATA[:first])
    files = files_of(folder)
    earlier = read(files)
    offset = max([e for e in ENDS if e <= len(earlier.data) - back], default=0)   # a frame's end
    with open(folder / "a.dcp", "ab") as f:               # the last file applied grows
        f.write(DATA[first:second])
    (folder / "b.dcp").write_bytes(DATA[second:])         # and a new one comes
    files = files_of(folder)
    check(files, earlier.positions)
    on = read_on(files, earlier.positions, offset)
    whole = read(files, earlier.positions)
    assert on is not None and on.base == offset
    assert bytes(on.data) == bytes(whole.data)[offset:] and on.waiting == whole.waiting
    assert [p["crc"] for p in on.positions] == [p["crc"] for p in whole.positions] == \
        [zlib.crc32(DATA[:second]), zlib.crc32(DATA[second:])]
    with open(folder / "a.dcp", "ab") as f:               # now a file before the last grows
        f.write(b"\x80")
    assert read_on(files_of(folder), on.positions, offset) is None
