"""The Cython core and its pure-Python twin agree on every input, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import _core, protocol, schema
from dcpfast import testing as t
from tests.strategies import streams

_scan_py = _core.twins()["scan"]
if _core.compiled() is None:
    pytest.skip("compiled core not built", allow_module_level=True)
cython_core = _core.compiled()["scan"]


def run(core, data, **kw):
    args = dict(start=0, names=schema.NAMES, collections=True, skip=False, max_frames=-1,
                max_frame_size=protocol.DEFAULT_MAX_FRAME_SIZE, base=0, final=False,
                unverified=False, view_bits=31)
    args.update(kw)
    return core.scan_buffer(data, _core.ScanRequest(**args))


def assert_same(data, **kw):
    fast, slow = run(cython_core, data, **kw), run(_scan_py, data, **kw)
    assert fast.failure == slow.failure                         # strict failures
    if fast.failure is None:
        (n, consumed, arrays, kinds, regions, unverified, views, _) = fast
        (n2, consumed2, arrays2, kinds2, regions2, unverified2, views2, _) = slow
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


@pytest.mark.parametrize("bits", [5, 7, 9, 12])
def test_views_over_small_windows(bits):
    # views whose data buffers are windows of 2**bits bytes (the scan's views past 2 GiB),
    # and none at all where a value is longer than a window
    data = t.synthetic_stream(400, seed=4, value_size=60)
    fast, slow = (run(core, data, view_bits=bits) for core in (cython_core, _scan_py))
    longest = int(fast.arrays["value_len"].max())
    assert longest > 31 and (longest > (1 << bits) - 1) == (bits < 9)
    if bits < 9:
        assert fast.views is None and slow.views is None
    else:
        assert_same(data, view_bits=bits)
        starts = fast.arrays["value_offset"][fast.arrays["value_len"] > 12]
        assert len(np.unique(starts >> bits)) > 10                   # many windows in use
    # without the value columns, only the key views, whatever the values' lengths
    keys_only = tuple(n for n in schema.NAMES if n not in schema.BINARY["value"])
    assert_same(data, names=keys_only, view_bits=bits)


def assert_validity_bitmaps(kinds, carried):
    """The core's paths and the twin give the same bitmaps and states, and they are what
    they say."""
    kinds, carried = np.asarray(kinds, np.uint8), np.asarray(carried, np.uint8)
    state, bits = cython_core.validity_bitmaps(kinds, carried)
    for other in (cython_core.validity_bitmaps(kinds, carried, wide=False),   # no AVX-512
                  _scan_py.validity_bitmaps(kinds, carried)):
        np.testing.assert_array_equal(state, other[0])
        np.testing.assert_array_equal(bits, other[1])
    assert bits.shape == (len(carried), (len(kinds) + 7) // 8)
    for g, table in enumerate(carried):
        want = table[kinds] != 0
        rows = np.unpackbits(bits[g], bitorder="little")
        np.testing.assert_array_equal(rows[:len(kinds)], want)
        assert not rows[len(kinds):].any()                  # bits past the rows are 0
        assert state[g] == (2 if want.all() else 1 if want.any() else 0)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 4097, 20003])
def test_validity_bitmaps_across_words(n):
    # the core takes 64 rows at a time and the rest one by one: both sides of the seam
    rng = np.random.default_rng(n)
    kinds = rng.choice([3, 3, 3, 3, 5, 7, 0, 13, 30], n)
    carried = rng.random((7, len(protocol.KINDS))) < 0.5
    carried[0], carried[1] = True, False                    # all valid, none valid
    assert_validity_bitmaps(kinds, carried)


@pytest.mark.parametrize("n", [63, 64, 200])
def test_validity_bitmaps_of_kinds_past_63(n):
    # kinds of 64 and more: no 64-bit set of kinds holds them, so every path must do without
    rng = np.random.default_rng(n)
    kinds = rng.choice([1, 63, 64, 200, 255], n)
    carried = rng.random((5, 256)) < 0.5
    assert_validity_bitmaps(kinds, carried)
    assert_validity_bitmaps(kinds % 64, carried)


@settings(max_examples=200)
@given(st.lists(st.integers(0, len(protocol.KINDS) - 1), max_size=300),
       st.lists(st.lists(st.booleans(), min_size=len(protocol.KINDS),
                         max_size=len(protocol.KINDS)), max_size=6))
def test_validity_bitmaps(kinds, carried):
    assert_validity_bitmaps(kinds, np.array(carried, bool).reshape(-1, len(protocol.KINDS)))


def test_validity_bitmaps_of_the_schema_groups():
    # the groups to_arrow asks for, over a stream of many kinds
    batch = dcpfast.scan(t.synthetic_stream(400, seed=3, marker_version=2, sync_writes=True))
    tables = {schema.validity_table(name, True).tobytes(): schema.validity_table(name, True)
              for name in schema.NAMES if schema.validity_table(name, True) is not None}
    assert_validity_bitmaps(batch._kinds, np.array(list(tables.values())))


def test_validity_bitmaps_refuse_unknown_kinds():
    for core in (cython_core, _scan_py):
        with pytest.raises(ValueError, match="outside"):
            core.validity_bitmaps(np.array([0, len(protocol.KINDS)], np.uint8),
                                  np.ones((1, len(protocol.KINDS)), np.uint8))
