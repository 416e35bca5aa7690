"""The memory core and ``dcpfast.memory``: numpy's arrays in the working cache
(``_core.memory.numpy_spans``, which the state engine runs in): what numpy asks of a
memory handler (zeroed blocks, blocks that grow and shrink with their bytes kept, blocks
freed after the context is left or on another thread), one count of each byte for the
memory measures, and the context's reach; every entry point of the state engine running
in it; what the caches say they hold, releasing it and resetting the peaks; the twin's
zeros and no-ops."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner
from numpy._core.multiarray import get_handler_name

import dcpfast
from dcpfast import _core, memory
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.documents import StateBuilder
from dcpfast.documents.engine import Engine
from dcpfast.documents.rows import batch_rows
from dcpfast.events import read_events
from tests.cores import TWINS

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


# -- every entry point runs the engine in the working cache ----------------------------------


@pytest.fixture
def handlers(monkeypatch):
    """The numpy handler each call of the engine's update and finish ran with."""
    seen: list[str] = []
    for name in ("update", "finish"):
        method = getattr(Engine, name)

        def probe(self, *args, _method=method, _name=name, **kwargs):
            seen.append(f"{_name}:{get_handler_name()}")
            return _method(self, *args, **kwargs)

        monkeypatch.setattr(Engine, name, probe)
    return seen


def _ran_in_spans(seen: list[str]) -> None:
    assert any(s.startswith("update:") for s in seen), seen
    assert any(s.startswith("finish:") for s in seen), seen
    assert {s.split(":")[1] for s in seen} == {"dcpfast_spans"}, seen
    assert get_handler_name() == "default_allocator"


@pytest.fixture
def dump(tmp_path):
    path = tmp_path / "d.dcp"
    path.write_bytes(t.synthetic_stream(2000, seed=21, vbuckets=4))
    return path


@compiled_only
@pytest.mark.parametrize("threads", [1, 2])
def test_state_runs_the_engine_in_the_working_cache(handlers, dump, threads):
    assert dcpfast.state(dump, threads=threads).num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_a_state_shared_among_processes_runs_its_share_in_the_working_cache(handlers, dump):
    """This process builds one share (the others, worker processes, run the same
    ``StateBuilder``)."""
    assert dcpfast.state(dump, processes=2).num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_a_bare_state_builder_runs_the_engine_in_the_working_cache(handlers, dump):
    builder = StateBuilder()
    for batch in dcpfast.iter_batches(dump, 1 << 16):
        builder.update(batch)
    assert builder.table().num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_rows_fed_as_spark_feeds_them_run_in_the_working_cache(handlers, dump):
    """Spark's partitions give the builder rows (``feed``) and take ``result``."""
    builder, batch = StateBuilder(values=False), dcpfast.read(dump)
    rows, _ = batch_rows(batch, 0, values=False, events=read_events(batch)[0])
    builder.feed(rows)
    assert builder.result().num_rows > 0
    _ran_in_spans(handlers)


@compiled_only
def test_the_command_runs_the_engine_in_the_working_cache(handlers, dump, tmp_path):
    done = CliRunner().invoke(main, ["state", str(dump), "-o", str(tmp_path / "s.parquet")])
    assert done.exit_code == 0, done.output
    _ran_in_spans(handlers)


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
