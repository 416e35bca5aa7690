"""``dcpfast.memory``: what the caches say they hold, releasing it and resetting the
peaks; the twin's zeros and no-ops."""

from __future__ import annotations

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name

import dcpfast
from dcpfast import _core, memory
from dcpfast import testing as t
from tests.cores import TWINS

compiled_only = pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                                   reason="the twin has no spans: numpy's memory stays numpy's")

LARGE = 1 << 18                       # int64 elements: 2 MiB, well above the 64 KiB floor


# -- dcpfast.memory: what the caches hold, released, peaks reset ------------------------------


@compiled_only
def test_a_state_shows_in_the_working_cache_and_release_gives_it_back():
    memory.reset_peaks()
    table = dcpfast.state(t.synthetic_stream(3000, seed=13), values=False)
    found = memory.caches()
    assert set(found) == {"output", "working"}
    assert found["working"].peak > 0 and found["output"].peak > 0
    assert found["working"].cached > 0 and found["working"].cached_spans > 0
    assert all(c.peak >= c.in_use >= 0 for c in found.values())
    freed = memory.release()
    assert freed > 0
    after = memory.caches()
    assert all(c.cached == 0 and c.cached_spans == 0 for c in after.values()), after
    assert memory.release() == 0
    assert table.num_rows > 0
    assert dcpfast.state(t.synthetic_stream(3000, seed=13), values=False).equals(table)


@compiled_only
def test_peaks_start_again_from_what_is_in_use():
    with _core.memory.numpy_spans():
        a = np.ones(4 * LARGE, np.int64)
        held = memory.caches()["working"]
        assert held.peak >= held.in_use >= a.nbytes
        del a
    memory.reset_peaks()
    found = memory.caches()
    assert all(c.peak == c.in_use for c in found.values()), found
    assert found["working"].peak < held.peak


def test_the_twin_keeps_nothing():
    twin = TWINS["memory"]
    assert twin.figures() == {"output": (0, 0, 0, 0), "working": (0, 0, 0, 0)}
    assert twin.untraced() == (0, 0)
    assert twin.release() == 0 and twin.reset_peaks() is None
    with twin.numpy_spans() as context:
        assert context is not None and get_handler_name() == "default_allocator"


@pytest.mark.skipif(dcpfast.IMPLEMENTATION != "python", reason="the twins' figures")
def test_the_twins_caches_are_empty_after_a_state():
    assert dcpfast.state(t.synthetic_stream(500, seed=4), values=False).num_rows > 0
    assert memory.caches() == dict.fromkeys(("output", "working"), memory.Cache(0, 0, 0, 0))
    assert memory.release() == 0
    memory.reset_peaks()
