"""Byte buffers (``dcpfast.buffers``): ``pooled_take`` is numpy's indexing, whatever the
columns' size."""

from __future__ import annotations

import numpy as np
import pytest

from dcpfast import buffers


def test_pooled_take_is_a_take(monkeypatch):
    """``buffers.pooled_take`` gives what numpy's indexing gives, small columns and those
    taken into Arrow's pool alike, read through first or not (a column of another's
    strides is taken as it is), by positions (negative ones among them) or a mask, and
    refuses a position outside the columns whatever their size."""
    rng = np.random.default_rng(4)
    columns = {"a": rng.integers(0, 2**63, 5000, np.uint64),
               "b": rng.integers(0, 2**31, 5000).astype(np.int32),
               "c": rng.random(5000) < 0.5,
               "d": rng.integers(0, 2**16, 10000).astype(np.uint16)[::2]}
    index = rng.integers(-5000, 5000, 3000)
    mask = rng.random(5000) < 0.3
    for pooled_from, read_from in ((buffers.POOLED_FROM, buffers.READ_THROUGH_FROM), (0, 0)):
        monkeypatch.setattr(buffers, "POOLED_FROM", pooled_from)
        monkeypatch.setattr(buffers, "READ_THROUGH_FROM", read_from)
        for chosen in (index, mask):
            taken = buffers.pooled_take(columns, ["a", "b", "c", "d"], chosen)
            for name, column in columns.items():
                assert taken[name].dtype == column.dtype
                np.testing.assert_array_equal(taken[name], column[chosen])
        for outside in ([5000], [-5001]):
            with pytest.raises(IndexError):
                buffers.pooled_take(columns, ["a", "b"], np.array(outside))
