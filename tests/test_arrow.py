"""Columns as Arrow arrays (``dcpfast.arrow``): binary and map columns taken from chunks as
Arrow's ``take`` takes them, map key types changed whatever the array's shape, and ``masked``
as pyarrow with a mask."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cores import COMPILED, TWINS

_values_py = TWINS["values"]
compiled = COMPILED["values"] if COMPILED else None
_chunk = st.tuples(st.lists(st.one_of(st.none(), st.binary(max_size=9)), max_size=6),
                   st.booleans(), st.integers(0, 3), st.integers(0, 3))


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(_chunk, max_size=5), data=st.data())
def test_binary_taken_from_chunks_as_arrow_takes_it(chunks, data):
    """``take_binary`` of a column in chunks (binary or large_binary, sliced, with nulls,
    empty) at any positions gives what Arrow's ``take`` of the joined column gives, with
    each core's gather."""
    from dcpfast import _core
    from dcpfast.arrow import take_binary

    arrays = []
    for values, wide, head, tail in chunks:
        array = pa.array(values, pa.large_binary() if wide else pa.binary())
        arrays.append(array.slice(min(head, len(array)),
                                  max(len(array) - head - tail, 0)).cast(pa.large_binary()))
    if data.draw(st.booleans()):           # a null slot that spans bytes: none are taken
        arrays.append(pa.Array.from_buffers(
            pa.large_binary(), 2, [pa.py_buffer(bytes([0b10])),
                                   pa.py_buffer(np.array([0, 3, 5], np.int64)),
                                   pa.py_buffer(b"abcde")]))
    column = pa.chunked_array(arrays, pa.large_binary())
    index = np.array(data.draw(st.lists(st.integers(-2, max(len(column) - 1, -1)),
                                        max_size=20)), np.int64)
    expected = column.combine_chunks().take(pa.array(index, pa.int64(),
                                                     mask=index < 0)).to_pylist()
    for module in [m for m in (_values_py, compiled) if m is not None]:
        _core.values, before = module, _core.values
        try:
            taken = take_binary(column if len(arrays) != 1 else arrays[0], index)
        finally:
            _core.values = before
        taken.validate(full=True)
        assert taken.type == pa.binary()
        assert taken.to_pylist() == expected
        if len(expected) and not all(v is None for v in expected):
            assert taken.buffers()[2].size == sum(len(v) for v in expected if v is not None)
        wide = take_binary(column, index, wide=True)
        assert wide.type == pa.large_binary() and wide.to_pylist() == expected
    if len(column):
        with pytest.raises(IndexError):
            take_binary(column, np.array([len(column)]))
        with pytest.raises(TypeError):                # another layout: refused, not read
            take_binary(column.cast(pa.binary_view()), index)


maps_in_chunks = st.lists(st.one_of(st.none(), st.lists(st.tuples(st.text(max_size=4),
                                                           st.text(max_size=6)),
                                                 max_size=3)), max_size=6)


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(st.tuples(maps_in_chunks, st.integers(0, 2), st.integers(0, 2)),
                       max_size=4),
       large=st.booleans(), data=st.data())
def test_maps_taken_from_chunks_as_arrow_takes_them(chunks, large, data):
    """``take_map`` of a map column in chunks (sliced, with nulls and empty maps, string
    or large_string) at any positions, nulls among them, gives what Arrow's ``take`` of
    the joined column gives, of the column's type."""
    from dcpfast.arrow import take_map

    text = pa.large_string() if large else pa.string()
    kind = pa.map_(text, text)
    arrays = []
    for maps, head, tail in chunks:
        array = pa.array(maps, kind)
        arrays.append(array.slice(min(head, len(array)), max(len(array) - head - tail, 0)))
    column = pa.chunked_array(arrays, kind)
    index = np.array(data.draw(st.lists(st.integers(-1, max(len(column) - 1, -1)),
                                        max_size=20)), np.int64)
    expected = column.combine_chunks().take(pa.array(index, pa.int64(), mask=index < 0))
    for source in (column, *(arrays if len(arrays) == 1 else ())):
        taken = take_map(source, index)
        taken.validate(full=True)
        assert taken.type == kind
        assert taken.to_pylist() == expected.to_pylist()
    if len(column):
        with pytest.raises(IndexError):
            take_map(column, np.array([len(column)]))


@pytest.mark.parametrize("shape", ["whole", "sliced", "taken", "taken with nulls", "chunked",
                                   "all null", "empty"])
def test_map_columns_change_key_type_whatever_their_shape(shape):
    """xattrs go from large_string maps to string maps (and back) through ``cast_map``:
    pyarrow 25 aborts the process on a plain cast of a map array that ``take`` made."""
    from dcpfast.arrow import cast_map

    large = pa.map_(pa.large_string(), pa.large_string())
    small = pa.map_(pa.string(), pa.string())
    base = pa.array([[("a", "1")], None, [("b", "2"), ("c", "3")], [], [("d", "4")]], large)
    array = {"whole": base, "sliced": base.slice(1, 3),
             "taken": base.take(pa.array([4, 2, 0])),
             "taken with nulls": base.take(pa.array([4, None, 1, 2])),
             "chunked": pa.chunked_array([base.slice(2), base.take(pa.array([1, 0]))]),
             "all null": pa.nulls(3, large), "empty": pa.array([], large)}[shape]
    expected = array.to_pylist()
    for to in (small, large):
        out = cast_map(array, to)
        out.validate(full=True)
        assert out.type == to
        assert out.to_pylist() == expected


def test_masked_is_pyarrow_with_a_mask():
    """``arrow.masked`` gives what ``pa.array(values, mask=~valid)`` gives, of the values'
    type or one given of their width, none null or some; a mask of another length is
    refused."""
    import pyarrow as pa

    from dcpfast.arrow import masked

    rng = np.random.default_rng(5)
    for values in (rng.integers(0, 2**32, 1000).astype(np.uint32),
                   rng.integers(0, 2**63, 1000).astype(np.uint64)):
        for valid in (rng.random(1000) < 0.7, np.ones(1000, bool), np.zeros(1000, bool)):
            got = masked(values, valid)
            got.validate(full=True)
            assert got.equals(pa.array(values, mask=~valid))
    times = rng.integers(0, 2**62, 10)
    valid = rng.random(10) < 0.5
    kind = pa.timestamp("ns", tz="UTC")
    assert masked(times, valid, kind).equals(pa.array(times, kind, mask=~valid))
    with pytest.raises(ValueError):
        masked(times, valid[:9])
