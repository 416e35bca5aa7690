"""Where ``iter_batches`` gets its bytes (``dcpfast.io.sources``): a regular file read through
mapped windows that stay valid, a file object read from its position, mapped or copied."""

from __future__ import annotations

import io

import pytest

import dcpfast
from dcpfast import testing as t
from tests.io.test_dumps import assert_columns_equal


def _keys_and_values(batches):
    tables = [b.to_arrow() for b in batches]
    return [sum((tb.column(name).to_pylist() for tb in tables), []) for name in ("key", "value")]


@pytest.mark.parametrize("batch_bytes", [100, 999, 4096])
def test_a_regular_file_is_read_through_windows_that_stay_valid(tmp_path, batch_bytes,
                                                                monkeypatch):
    import mmap
    monkeypatch.setattr(dcpfast.io.sources, "MAP_MIN_BYTES", 1)       # map even tiny windows
    damaged = bytearray(t.synthetic_stream(200, seed=12))
    damaged[5000:5003] = b"\xff\xff\xff"           # skip mode resynchronises past it
    path = tmp_path / "dump.dcp"
    path.write_bytes(damaged)
    options = dict(batch_bytes=batch_bytes, collections=True, errors="skip")
    mapped = list(dcpfast.iter_batches(path, memory_map=True, **options))
    copied = list(dcpfast.iter_batches(io.BytesIO(bytes(damaged)), **options))
    assert all(isinstance(b.data.obj, mmap.mmap) for b in mapped)     # no bytes copied
    assert_columns_equal(mapped, dcpfast.scan(damaged, errors="skip", final=True))
    assert [e for b in mapped for e in b.errors] == [e for b in copied for e in b.errors]
    # the loop has moved on: the first windows were handed back, and still read the same
    assert _keys_and_values(mapped) == _keys_and_values(copied)
    for b in mapped[:3]:
        assert bytes(b.data) == damaged[b.base_offset:b.base_offset + len(b.data)]


def test_a_file_object_is_read_from_its_position(tmp_path, monkeypatch):
    import mmap
    monkeypatch.setattr(dcpfast.io.sources, "MAP_MIN_BYTES", 1)
    data = t.synthetic_stream(100, seed=13)
    whole = dcpfast.scan(data)
    cut = int(whole["offset"][40])
    path = tmp_path / "dump.dcp"
    path.write_bytes(data)
    with open(path, "rb") as f:
        f.seek(cut)
        batches = list(dcpfast.iter_batches(f, batch_bytes=1000, collections=True,
                                            memory_map=True))
    rest = dcpfast.scan(data[cut:], collections=True)
    assert all(isinstance(b.data.obj, mmap.mmap) for b in batches)
    assert_columns_equal(batches, rest)
    assert _keys_and_values(batches) == _keys_and_values([rest])
    for mapped in (True, False):
        with open(path, "rb") as f, dcpfast.io.open_stream(f) as stream:
            first = int(whole["offset"][1])
            assert stream.read(first) == data[:first]  # a frame already read, sniffed too
            batches = list(dcpfast.iter_batches(stream, batch_bytes=1000, collections=True,
                                                memory_map=mapped))
        assert_columns_equal(batches, dcpfast.scan(data[first:], collections=True))
        assert bytes(batches[0].data[:20]) == data[first:first + 20]
    with open(path, "rb") as f:                    # read, not mapped: from its position too
        f.seek(cut)
        batches = list(dcpfast.iter_batches(f, batch_bytes=1000, collections=True))
    assert not any(isinstance(b.data, memoryview) for b in batches)
    assert_columns_equal(batches, rest)
    monkeypatch.setattr(dcpfast.io.sources, "MAP_MIN_BYTES", 1001)    # small batches are copied
    with open(path, "rb") as f:
        batches = list(dcpfast.iter_batches(f, batch_bytes=1000, collections=True,
                                            memory_map=True))
    assert not isinstance(batches[0].data, memoryview)
    assert_columns_equal(batches, whole)
