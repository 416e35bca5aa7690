"""The values core (``cvalues``) and its pure-Python twin (``pyvalues``): the same answers on
random xattr sections and Snappy values, ranges outside their buffers refused, extents spread
and gathered alike, and UTF-8 accepted exactly where Python accepts it."""

from __future__ import annotations

import cramjam
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dcpfast import _core
from dcpfast import testing as t
from tests.cores import COMPILED, TWINS
from tests.test_values import (
    BAD_SECTIONS,
    BAD_SNAPPY,
    D22,
    LONG_SECTION,
    VP,
    keys,
    pair,
    section,
    snappy,
    texts,
)

_values_py = TWINS["values"]
compiled = COMPILED["values"] if COMPILED else None
needs_compiled = pytest.mark.skipif(compiled is None, reason="compiled helper not built")


def _layout(blobs):
    data = b"".join(blobs)
    lengths = np.array([len(b) for b in blobs], np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8), starts, lengths


def _both(name, *args, outputs=()):
    """Run ``name`` on both helpers with fresh copies of the output arrays; return the
    results and outputs of each."""
    got = []
    for core in (compiled, _values_py):
        outs = [o.copy() for o in outputs]
        got.append((getattr(core, name)(*args, *outs), [o.tolist() for o in outs]))
    return got


blobs = st.lists(st.one_of(st.binary(max_size=60), st.sampled_from(
    [v for v, _ in BAD_SECTIONS] + [D22, t.xattr_blob({"a": "1", "é": "€"}), LONG_SECTION]),
    # long sections of few distinct keys: duplicates among the first pairs and past them
    st.lists(st.sampled_from([b"k%d" % i for i in range(40)]), min_size=10, max_size=60).map(
        lambda ks: section(*[pair(k, b"1") for k in ks])),
    st.builds(lambda d, tail: t.xattr_value(d, tail), st.dictionaries(keys, texts,
                                                                      max_size=4),
              st.binary(max_size=8))), max_size=8)


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(blobs)
def test_twin_parses_like_the_compiled_helper(values):
    buf, starts, lengths = _layout(values)
    n = len(values)
    source = np.zeros(n, np.uint8)
    fast, slow = _both("parse_xattrs", buf, buf, source, starts, lengths,
                       outputs=(np.empty(n, np.int64), np.empty(n, np.int64)))
    assert fast == slow
    (key_bytes, value_bytes, _), (skip, pairs) = fast
    total = sum(pairs)
    outs = (np.empty(total + 1, np.int64), np.empty(key_bytes, np.uint8),
            np.empty(total + 1, np.int64), np.empty(value_bytes, np.uint8))
    pairs = np.array(pairs, np.int64)
    results = []
    for core in (compiled, _values_py):
        copies = [o.copy() for o in outs]
        core.xattr_strings(buf, buf, source, starts, lengths, pairs, copies[0], copies[1],
                           copies[2], copies[3])
        results.append([c.tolist() for c in copies])
    assert results[0] == results[1]


@needs_compiled
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=30), st.binary(max_size=200).map(snappy),
                          st.sampled_from([v for v, _ in BAD_SNAPPY])), max_size=8))
def test_twin_inflates_like_the_compiled_helper(values):
    buf, starts, lengths = _layout(values)
    fast, slow = _both("snappy_lengths", buf, starts, lengths,
                       outputs=(np.empty(len(values), np.int64),))
    assert fast == slow
    declared = np.array(fast[1][0], np.int64)
    sound = declared >= 0
    bounds = np.concatenate([[0], np.cumsum(declared[sound])]).astype(np.int64)
    got = []
    for core in (compiled, _values_py):
        out = np.zeros(int(bounds[-1]), np.uint8)
        problems = core.inflate(buf, starts[sound], lengths[sound], out, bounds,
                                cramjam.snappy.decompress_raw_into)
        got.append((problems, out.tolist()))
    assert got[0] == got[1]


@pytest.mark.parametrize("core", ["compiled", "twin"])
def test_helpers_reject_ranges_outside_their_buffers(core):
    module = _values_py if core == "twin" else compiled
    if module is None:
        pytest.skip("compiled helper not built")
    chunks = [np.zeros(10, np.uint8), np.zeros(3, np.uint8)]
    for chunk, start, bounds in (([1], 0, [0, 4]), ([2], 0, [0, 1]), ([-1], 0, [0, 1]),
                                 ([0], -1, [0, 1]), ([0], 8, [0, 3]), ([0], 0, [3, 2])):
        with pytest.raises(ValueError):
            module.gather_chunks(chunks, np.array(chunk, np.int32), np.array([start], np.int64),
                                 np.array(bounds, np.int64), np.empty(8, np.uint8))
    with pytest.raises(ValueError):                # more rows than bounds
        module.gather_chunks(chunks, np.zeros(2, np.int32), np.zeros(2, np.int64),
                             np.array([0, 1], np.int64), np.empty(8, np.uint8))
    offsets = [np.array([0, 4, 10], np.int64), np.array([0], np.int64),
               np.array([2, 3, 7], np.int32)]
    valids = [None, None, np.array([False, True])]
    for chunk, entry in (([3], [0]), ([0], [2]), ([0], [-1]), ([1], [0])):
        with pytest.raises(ValueError):            # no such chunk, or no such value
            module.extents_at(offsets, valids, np.array(chunk, np.int32),
                              np.array(entry, np.int64), np.empty(1, np.int64),
                              np.zeros(2, np.int64), np.empty(1, np.uint8))
    with pytest.raises(ValueError):                # more rows than bounds
        module.extents_at(offsets, valids, np.zeros(2, np.int32), np.zeros(2, np.int64),
                          np.empty(2, np.int64), np.zeros(2, np.int64), np.empty(2, np.uint8))
    with pytest.raises(ValueError):                # a validity of another length
        module.extents_at(offsets, [None, None, np.array([True])], np.zeros(1, np.int32),
                          np.zeros(1, np.int64), np.empty(1, np.int64), np.zeros(2, np.int64),
                          np.empty(1, np.uint8))
    starts, bounds, valid = np.empty(5, np.int64), np.zeros(6, np.int64), np.empty(5, np.uint8)
    module.extents_at(offsets, valids, np.array([0, -1, 0, 2, 2], np.int32),
                      np.array([1, 5, 0, 0, 1], np.int64), starts, bounds, valid)
    assert bounds.tolist() == [0, 6, 6, 10, 10, 14] and valid.tolist() == [1, 0, 1, 0, 1]
    assert starts[[0, 2, 4]].tolist() == [4, 0, 3]
    source, start, bounds = np.empty(2, np.int32), np.empty(2, np.int64), np.zeros(3, np.int64)
    taken = np.empty(2, np.uint8)
    extents = ([np.array([0, 1], np.int32)], [np.array([3, 0], np.int64)],
               [np.array([2, 5], np.int64)], [None], np.array([4], np.int32))
    for chunk, entry in (([1, 0], [0, 0]), ([0, 0], [2, 0]), ([0, 0], [-1, 0])):
        with pytest.raises(ValueError):
            module.chunk_extents(*extents, np.array(chunk, np.int32), np.array(entry, np.int64),
                                 source, start, bounds, taken)
    with pytest.raises(ValueError):                # a validity of another length
        module.chunk_extents(*extents[:3], [np.array([True])], extents[4], np.zeros(2, np.int32),
                             np.zeros(2, np.int64), source, start, bounds, taken)
    module.chunk_extents(*extents, np.array([0, -1], np.int32), np.array([1, 9], np.int64), source,
                         start, bounds, taken)
    assert (source[0], start[0], bounds.tolist(), taken.tolist()) == (5, 0, [0, 5, 5], [1, 0])
    two = ([np.array([0, 1], np.int32), np.array([0], np.int32)],
           [np.array([3, 0], np.int64), np.array([7], np.int64)],
           [np.array([2, 5], np.int64), np.array([1], np.int64)],
           [np.array([True, False]), None], np.array([4, 6], np.int32))
    source, start = np.empty(4, np.int32), np.empty(4, np.int64)
    bounds, taken = np.zeros(5, np.int64), np.empty(4, np.uint8)
    module.chunk_extents(*two, np.array([0, 0, 1, -1], np.int32), np.array([0, 1, 0, 0], np.int64),
                         source, start, bounds, taken)
    assert taken.tolist() == [1, 0, 1, 0]           # a null of a chunk is taken as a null
    assert bounds.tolist() == [0, 2, 2, 3, 3] and (source[2], start[2]) == (6, 7)


@pytest.mark.parametrize("core", ["compiled", "twin"])
def test_spread_extents_lists_every_item_of_its_extent(core):
    """``spread_extents`` gives each item of each extent its chunk and place, extents of no item
    (nulls) giving none, counted from ``bounds[0]``; bounds that go down or answers of
    another length are refused."""
    module = _values_py if core == "twin" else compiled
    if module is None:
        pytest.skip("compiled helper not built")
    chunk = np.array([2, -1, 0, 1], np.int32)
    starts = np.array([5, 0, 0, 9], np.int64)
    bounds = np.array([3, 6, 6, 7, 9], np.int64)
    item_chunk, item_entry = np.empty(6, np.int32), np.empty(6, np.int64)
    module.spread_extents(chunk, starts, bounds, item_chunk, item_entry)
    assert item_chunk.tolist() == [2, 2, 2, 0, 1, 1]
    assert item_entry.tolist() == [5, 6, 7, 0, 9, 10]
    with pytest.raises(ValueError):                 # bounds that go down
        module.spread_extents(chunk, starts, np.array([0, 2, 1, 3, 4], np.int64),
                              np.empty(4, np.int32), np.empty(4, np.int64))
    with pytest.raises(ValueError):                 # answers of another length
        module.spread_extents(chunk, starts, bounds, np.empty(5, np.int32), np.empty(6, np.int64))
    with pytest.raises(ValueError):                 # one bound too few
        module.spread_extents(chunk, starts, bounds[:-1], np.empty(3, np.int32),
                              np.empty(3, np.int64))


nul_free = st.binary(max_size=12).map(lambda b: b.replace(b"\0", b"\1"))


@settings(max_examples=500, deadline=None)
@given(nul_free.filter(bool), st.binary(max_size=24).map(lambda b: b.replace(b"\0", b"\1")),
       st.sampled_from(["\u00e9", "\u20ac", "\U0001d11e", "\ud7ff", "\ud800", "\ue000",
                        "\U0010ffff"]), nul_free)
def test_utf8_rule_is_pythons(key, text, char, tail):
    """A section's keys and values are accepted exactly when Python decodes them, the
    character anywhere among ASCII runs that are checked eight bytes at a time."""
    value = text + char.encode("utf-8", "surrogatepass") + tail
    blob = section(pair(key, value))
    try:
        key.decode("utf-8")
        value.decode("utf-8")
        expect = []
    except UnicodeDecodeError:
        expect = [(0, VP.XATTR_UTF8, 4, 0)]
    buf, starts, lengths = _layout([blob])
    for core in filter(None, (compiled, _values_py)):
        found = core.parse_xattrs(buf, buf, np.zeros(1, np.uint8), starts, lengths,
                                  np.empty(1, np.int64), np.empty(1, np.int64))[2]
        assert found == expect, core.__name__


def snappy_blocks():
    """Raw Snappy blocks: sound ones of every element kind (literals of every length
    encoding, copies of 1, 2 and 4 offset bytes, copies that overlap what they make) and
    the same damaged (bytes changed, cut, added)."""
    import cramjam
    sound = st.one_of(
        st.binary(max_size=300),
        st.builds(lambda a, n: a * n, st.binary(min_size=1, max_size=9), st.integers(1, 400)),
        st.builds(lambda a, b: a + bytes(b), st.binary(max_size=70_000),
                  st.integers(0, 70_000)),
    ).map(lambda raw: bytes(cramjam.snappy.compress_raw(raw)))

    @st.composite
    def damaged_block(draw):
        block = bytearray(draw(sound))
        for _ in range(draw(st.integers(1, 3))):
            edit = draw(st.integers(0, 2))
            at = draw(st.integers(0, len(block)))
            if edit == 0 and at < len(block):
                block[at] = draw(st.integers(0, 255))
            elif edit == 1:
                del block[at:]
            else:
                block[at:at] = draw(st.binary(min_size=1, max_size=4))
        return bytes(block)
    return st.one_of(sound, damaged_block(), st.binary(max_size=40))


@pytest.mark.skipif(_core.compiled() is None, reason="compiled core not built")
@settings(max_examples=300, deadline=None)
@given(st.lists(snappy_blocks(), max_size=6))
# a block the compiled loop inflates further than the library before both give up
@example([b"\x80\x01\x00\x00\x00\x00\x00\x01\x04\x00\x00\x02\x01\x00\x02\x01\x00~\x06\x00"
          b"\x01\x01"])
def test_the_compiled_inflate_equals_the_library(blocks):
    """The compiled core inflates sound blocks itself, without the GIL, and hands the
    others to the library: slots and problems are the library's own (the twin's), and a
    block that fails leaves its slot zeros whatever either wrote of it first."""
    import cramjam
    compiled, twin = _core.compiled()["values"], _core.twins()["values"]
    data = b"".join(blocks)
    lengths = np.array([len(b) for b in blocks], np.int64)
    starts = np.cumsum(lengths) - lengths
    buf = np.frombuffer(data, np.uint8) if data else np.empty(0, np.uint8)
    declared = np.empty(len(blocks), np.int64)
    twin.snappy_lengths(buf, starts, lengths, declared)
    sound = declared >= 0
    bounds = np.concatenate([[0], np.cumsum(declared[sound])]).astype(np.int64)
    got = []
    for core in (compiled, twin):
        out = np.zeros(int(bounds[-1]), np.uint8)
        problems = core.inflate(buf, starts[sound], lengths[sound], out, bounds,
                                cramjam.snappy.decompress_raw_into)
        got.append((problems, out.tobytes()))
    assert got[0] == got[1]
