"""The compiled scan core's column memory: spans recycled for the next scan never reach a
live batch, rows reserved far too many given back, kept spans bounded in time, a small
scan taking a kept span's head and keeping its tail apart."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import dcpfast
from dcpfast import batch as batch_module
from dcpfast import memory
from dcpfast import testing as t


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_recycled_column_memory_never_reaches_a_live_batch():
    """Large columns live in spans the core hands to the next scan once their arrays are
    dropped: a batch still alive keeps its values, whatever is scanned after it."""
    unit = t.synthetic_stream(2000, seed=5)
    kept = dcpfast.scan(unit * 80)                   # ~180,000 frames: columns of >1 MiB
    before = {name: kept[name].copy() for name in kept.columns}
    for reps in (80, 79, 81, 40):                   # same, smaller and larger sizes
        dropped = dcpfast.scan(unit * reps)
        assert len(dropped) == reps * len(dcpfast.scan(unit))
        del dropped
    other = dcpfast.scan(t.synthetic_stream(3000, seed=6) * 60, columns=["by_seqno"])
    other["by_seqno"][:] = 0xAB                     # columns are writable arrays
    again = dcpfast.scan(unit * 80)
    for name in kept.columns:
        assert np.array_equal(kept[name], before[name]), name
        assert np.array_equal(again[name], before[name]), name
    assert (other["by_seqno"] == 0xAB).all()


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_a_scan_that_reserved_far_too_many_rows_gives_the_rest_back():
    """Rows are reserved from the first frames' mean length: small frames followed by
    large ones make the scan reserve far more than it fills, and the finished columns
    keep only what they hold."""
    data = t.noop() * 256 + b"".join(
        t.mutation(b"k%d" % i, bytes(1 << 20), by_seqno=i + 1) for i in range(20))
    live = memory.caches()["output"].in_use
    found = dcpfast.scan(data, collections=False, columns=["offset", "by_seqno"])
    assert len(found) == 276
    assert list(found["by_seqno"][256:]) == list(range(1, 21))
    assert memory.caches()["output"].in_use - live <= 2 * 4096


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_column_memory_kept_for_reuse_is_bounded_in_time():
    unit = t.synthetic_stream(2000, seed=5)
    dropped = dcpfast.scan(unit * 60)
    del dropped
    assert memory.caches()["output"].cached > 0       # kept for the next scan
    time.sleep(2.2)
    dcpfast.scan(unit * 60, columns=["opcode"])     # any request looks at the clock
    kept = memory.caches()["output"].cached
    assert kept <= 2 << 20                          # just the opcode span, given back


@pytest.mark.skipif(batch_module.IMPLEMENTATION != "cython", reason="the twin uses numpy's memory")
def test_small_column_memory_takes_a_kept_span_and_keeps_its_tail_apart():
    """A scan far smaller than every kept span takes the smallest one's head: its pages are
    resident, and in use and kept together stay within the most in use at once (the last,
    small batch of iter_batches adds no fresh pages to a cache full of larger spans). The
    tail stays kept as a span of its own where mappings split (POSIX), so that the next
    scan writes into its resident pages too; elsewhere it is given back."""
    unit = t.synthetic_stream(2000, seed=6)
    large = dcpfast.scan(unit * 60)
    start = large["offset"].__array_interface__["data"][0]     # the span's first part
    del large
    memory.reset_peaks()
    before = memory.caches()["output"].cached
    assert before > 8 << 20                       # kept for the next scan
    small = dcpfast.scan(unit * 2)                # columns far smaller than the kept span
    live, peak, kept, _ = memory.caches()["output"]
    assert small["offset"].__array_interface__["data"][0] == start
    assert 0 < live < 2 << 20 and peak < 2 << 20 and live + kept <= before
    assert len(small) == 2 * len(dcpfast.scan(unit))
    if sys.platform == "win32":
        assert kept == 0
        return
    assert kept > before - (4 << 20)              # the tail, whole pages kept apart
    again = dcpfast.scan(unit * 2)                # while the first one is in use
    assert start < again["offset"].__array_interface__["data"][0] < start + before
    assert memory.caches()["output"].in_use + memory.caches()["output"].cached <= before
