"""``dcpfast.arrays.unique`` against numpy's ``np.unique``: the same distinct values, the
same first element of each and the same index of each element among them, whether the
values span a range small enough to count in or are sorted."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast.arrays import unique

DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(DTYPES), st.data())
def test_unique_is_numpys(dtype, data):
    info = np.iinfo(dtype)
    # a narrow range (counted), or anywhere in the type's range (sorted)
    low = data.draw(st.integers(int(info.min), int(info.max)))
    wide = data.draw(st.booleans())
    high = int(info.max) if wide else min(int(info.max), low + data.draw(st.integers(0, 300)))
    values = np.array(data.draw(st.lists(st.integers(low, high), max_size=60)), dtype)
    found, firsts, inverse = unique(values, first=True, inverse=True)
    expected, expected_firsts, expected_inverse = np.unique(values, return_index=True,
                                                            return_inverse=True)
    assert found.dtype == values.dtype
    assert found.tolist() == expected.tolist()
    assert firsts.tolist() == expected_firsts.tolist()
    assert inverse.tolist() == expected_inverse.ravel().tolist()
    assert unique(values).tolist() == expected.tolist()
    assert unique(values, first=True)[1].tolist() == expected_firsts.tolist()


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_at_the_ends_of_the_type(dtype):
    info = np.iinfo(dtype)
    for values in ([info.max, info.max], [info.max, info.max - 3, info.max],
                   [info.min, info.min + 1, info.min], [info.min, info.max, info.min],
                   [info.min + 1, info.max // 2 + 1, 0]):     # a range wider than max
        values = np.array(values, dtype)
        found, inverse = unique(values, inverse=True)
        expected, expected_inverse = np.unique(values, return_inverse=True)
        assert found.dtype == values.dtype
        assert found.tolist() == expected.tolist()
        assert inverse.tolist() == expected_inverse.ravel().tolist()


@pytest.mark.parametrize("spread", [16, 1 << 20, 1 << 40])
def test_unique_of_many_values(spread):
    """A hundred thousand values over a few, a million or 2**40 possible ones: the
    counted path, the sorted one, and their edge (a range just over the count)."""
    rng = np.random.default_rng(spread)
    values = rng.integers(0, spread, 100_000).astype(np.int64) + 5
    found, firsts, inverse = unique(values, first=True, inverse=True)
    expected, expected_firsts, expected_inverse = np.unique(values, return_index=True,
                                                            return_inverse=True)
    assert np.array_equal(found, expected)
    assert np.array_equal(firsts, expected_firsts)
    assert np.array_equal(inverse, expected_inverse.ravel())
    assert np.array_equal(found[inverse], values)
