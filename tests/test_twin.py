"""The Cython core and its pure-Python twin agree on every input, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast import _scan_py, protocol, schema
from dcpfast import testing as t
from strategies import streams

cython_core = pytest.importorskip("dcpfast._scan", reason="compiled core not built")


def run(core, data, **kw):
    args = dict(start=0, names=schema.NAMES, collections=True, skip=False, max_frames=-1,
                max_frame_size=protocol.DEFAULT_MAX_FRAME_SIZE, base=0, final=False,
                unverified=False, view_bits=31)
    args.update(kw)
    return core.scan_buffer(data, *args.values())


def assert_same(data, **kw):
    fast, slow = run(cython_core, data, **kw), run(_scan_py, data, **kw)
    assert (fast[0] is None) == (slow[0] is None)
    assert fast[1] == slow[1]                                   # strict failures
    if fast[0] is not None:
        (n, consumed, arrays, kinds, regions, unverified, views) = fast[0]
        (n2, consumed2, arrays2, kinds2, regions2, unverified2, views2) = slow[0]
        assert (n, consumed, regions, unverified) == (n2, consumed2, regions2, unverified2)
        np.testing.assert_array_equal(kinds, kinds2)
        assert arrays.keys() == arrays2.keys()
        for name in arrays:
            assert arrays[name].dtype == arrays2[name].dtype
            np.testing.assert_array_equal(arrays[name], arrays2[name], err_msg=name)
        names = kw.get("names", schema.NAMES)
        assert views.keys() == views2.keys() == {
            name for name, pair in schema.BINARY.items() if set(pair) <= set(names)}
        for name in views:
            assert views[name].shape == views2[name].shape == (n, 16)
            np.testing.assert_array_equal(views[name], views2[name], err_msg=name)
    assert cython_core.sniff_collections(data, 0) == _scan_py.sniff_collections(data, 0)


@settings(max_examples=200)
@given(streams(max_frames=15), st.booleans(), st.booleans(), st.integers(0, 2 ** 20))
def test_valid_streams(stream, skip, final, base):
    collections, data, _ = stream
    assert_same(data, collections=collections, skip=skip, final=final, base=base)


@settings(max_examples=300)
@given(st.binary(max_size=300), st.booleans(), st.booleans(), st.booleans())
def test_random_bytes(data, collections, skip, final):
    assert_same(data, collections=collections, skip=skip, final=final)


@settings(max_examples=200)
@given(streams(min_frames=2, max_frames=10), st.data())
def test_damaged_streams(stream, data):
    collections, raw, _ = stream
    damaged = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 6))):
        damaged[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    for skip in (False, True):
        assert_same(bytes(damaged), collections=collections, skip=skip,
                    final=data.draw(st.booleans()), unverified=skip and data.draw(st.booleans()),
                    max_frames=data.draw(st.integers(-1, 12)),
                    max_frame_size=data.draw(st.sampled_from([24, 100, 1 << 26])))


@pytest.mark.parametrize("names", [(), ("opcode",), ("key_offset", "stream_id", "purge_seqno"),
                                   ("opcode", "value_offset", "value_len")])
def test_projections(names):
    data = t.synthetic_stream(150, seed=11, stream_ids=True, marker_version=2)
    assert_same(data, names=names)


def test_a_synthetic_conversation():
    assert_same(t.synthetic_stream(400, seed=12, sync_writes=True, marker_version=0))


def test_many_blocks_after_a_reservation_that_was_too_small():
    # the large frames first make the core reserve too few rows for the small ones after
    # them: it writes several blocks, regrows every column (and the views), writes on
    data = (t.synthetic_stream(300, seed=1, value_size=5000)
            + t.synthetic_stream(3000, seed=2, value_size=3, stream_ids=True))
    assert_same(data)
    assert_same(data, start=len(t.synthetic_stream(300, seed=1, value_size=5000)), base=99)


@pytest.mark.parametrize("n", [4095, 4096, 4097, 20003])
def test_kind_bitmaps_over_several_tiles(n):
    kinds = np.random.default_rng(n).choice([3, 3, 3, 3, 5, 7, 0], n).astype(np.uint8)
    present, bits = cython_core.kind_bitmaps(kinds, len(protocol.KINDS))
    present2, bits2 = _scan_py.kind_bitmaps(kinds, len(protocol.KINDS))
    np.testing.assert_array_equal(present, present2)
    np.testing.assert_array_equal(bits, bits2)


@settings(max_examples=200)
@given(st.lists(st.integers(0, len(protocol.KINDS) - 1), max_size=80))
def test_kind_bitmaps(kinds):
    kinds = np.array(kinds, np.uint8)
    present, bits = cython_core.kind_bitmaps(kinds, len(protocol.KINDS))
    present2, bits2 = _scan_py.kind_bitmaps(kinds, len(protocol.KINDS))
    np.testing.assert_array_equal(present, present2)
    np.testing.assert_array_equal(bits, bits2)
    assert list(present) == sorted(set(kinds.tolist()))
    for row, kind in enumerate(present):                  # bit i of a row: row i is of its kind
        rows = np.unpackbits(bits[row], bitorder="little", count=len(kinds)).astype(bool)
        np.testing.assert_array_equal(rows, kinds == kind)


def test_kind_bitmaps_refuses_unknown_kinds():
    for core in (cython_core, _scan_py):
        with pytest.raises(ValueError, match="outside"):
            core.kind_bitmaps(np.array([0, len(protocol.KINDS)], np.uint8), len(protocol.KINDS))
