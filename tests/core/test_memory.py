"""The memory core (``_core.memory``): numpy's arrays in the working cache
(``numpy_spans``): what numpy asks of a memory handler (zeroed blocks, blocks that grow
and shrink with their bytes kept, blocks freed after the context is left or on another
thread), one count of each byte for the memory measures, and the context's reach."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name

import dcpfast
from dcpfast import _core, memory
from dcpfast import testing as t

compiled_only = pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                                   reason="the twin has no spans: numpy's memory stays numpy's")

LARGE = 1 << 18                       # int64 elements: 2 MiB, well above the 64 KiB floor


@compiled_only
def test_arrays_made_in_the_context_live_in_spans_and_outlive_it():
    with _core.memory.numpy_spans():
        assert get_handler_name() == "dcpfast_spans"
        large = np.arange(LARGE, dtype=np.int64)
        small = np.arange(10, dtype=np.int64)          # from the allocator, same handler
        assert get_handler_name(large) == get_handler_name(small) == "dcpfast_spans"
        assert large.ctypes.data % 64 == 0 and small.ctypes.data % 16 == 0
    assert get_handler_name() == "default_allocator"
    assert get_handler_name(np.arange(LARGE)) == "default_allocator"
    assert large.sum() == LARGE * (LARGE - 1) // 2 and small.tolist() == list(range(10))
    del large, small                                   # freed by the handler they came from


@compiled_only
def test_contexts_nest_and_leave_numpy_as_they_found_it():
    with _core.memory.numpy_spans():
        with _core.memory.numpy_spans():
            assert get_handler_name() == "dcpfast_spans"
        assert get_handler_name() == "dcpfast_spans"
    assert get_handler_name() == "default_allocator"
    with pytest.raises(KeyError), _core.memory.numpy_spans():
        raise KeyError("left by an exception")
    assert get_handler_name() == "default_allocator"


@compiled_only
def test_zeroed_arrays_are_zero_in_a_reused_span():
    with _core.memory.numpy_spans():
        dirty = np.full(LARGE, -1, np.int64)
        where = dirty.ctypes.data
        del dirty                                      # its span kept, dirty
        zeros = np.zeros(LARGE, np.int64)
        assert zeros.ctypes.data == where              # the very span, served again
        assert not zeros.any()


@compiled_only
@pytest.mark.parametrize("sizes", [[LARGE, 4 * LARGE, LARGE // 3, 7, 2 * LARGE],
                                   [100, 9000, 50, LARGE]])
def test_resized_arrays_keep_their_elements(sizes):
    """ndarray.resize reallocates through the handler: in its span while it fits and no
    more than half of it goes unused, else moved; the elements kept, the new ones 0."""
    with _core.memory.numpy_spans():
        a = np.arange(sizes[0], dtype=np.int64)
        for size in sizes[1:]:
            kept = min(len(a), size)
            a.resize(size, refcheck=False)
            assert np.array_equal(a[:kept], np.arange(kept)), size
            assert not a[kept:].any()
            a[kept:] = np.arange(kept, size)


@compiled_only
def test_each_byte_is_counted_once():
    """numpy reports its arrays to tracemalloc itself; the spans under them are left out of
    the spans' untraced count, so that tracemalloc's peak plus that count
    (``tests/memory.py``) counts each byte once. The caches' own figures count them."""
    tracemalloc.start()
    try:
        with _core.memory.numpy_spans():
            _core.memory.reset_peaks()
            live = _core.memory.untraced()[0]
            working = memory.caches()["working"].in_use
            traced = tracemalloc.get_traced_memory()[0]
            a = np.ones(4 * LARGE, np.int64)           # 8 MiB
            assert tracemalloc.get_traced_memory()[0] - traced >= a.nbytes
            now, peak = _core.memory.untraced()
            assert now == live and peak == live
            assert memory.caches()["working"].in_use - working >= a.nbytes
            del a
            assert tracemalloc.get_traced_memory()[0] - traced < 1 << 16
    finally:
        tracemalloc.stop()


@compiled_only
def test_the_context_is_this_thread_s_alone_and_its_arrays_free_anywhere():
    seen, box = {}, []

    def other():
        seen["handler"] = get_handler_name(np.ones(LARGE))

    def use_and_drop():
        seen["sum"] = float(box[0].sum())
        box.clear()                                    # the last reference, dropped here

    with _core.memory.numpy_spans():
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        box.append(np.ones(LARGE))
    assert seen["handler"] == "default_allocator"
    worker = threading.Thread(target=use_and_drop)
    worker.start()
    worker.join()
    assert seen["sum"] == float(LARGE) and not box


@compiled_only
def test_states_in_reused_spans_agree_and_leave_numpy_as_it_was():
    """A state's arrays, and its key index's tables, in spans that the call before left
    dirty: the same table each time."""
    data = t.synthetic_stream(3000, seed=11)
    first = dcpfast.state(data, values=False)
    assert get_handler_name() == "default_allocator"
    for _ in range(3):
        dcpfast.state(t.synthetic_stream(2000, seed=12), values=False)
        assert dcpfast.state(data, values=False).equals(first)
    assert first.num_rows > 0
