"""Peak memory of a call: Python's allocations (numpy's included), pyarrow's pool, and the
mapped spans the compiled core keeps its large columns and buffers in."""

from __future__ import annotations

import tracemalloc

import pyarrow as pa

from dcpfast import _core

_POOLS = []           # a pool must outlive every buffer it handed out


def peak_allocation(fn):
    """``fn()`` and the peak bytes it held at once (an upper bound: the peaks added)."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    _POOLS.append(pool)
    pa.set_memory_pool(pool)
    mapped = _core.scan.mapped
    before = mapped(reset=True)[0]
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] + pool.max_memory() + mapped()[1] - before
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    return result, peak
