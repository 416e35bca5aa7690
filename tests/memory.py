"""Peak memory of a call: Python's allocations (numpy's included) and pyarrow's pool, where
the compiled core keeps its columns and read buffers."""

from __future__ import annotations

import tracemalloc

import pyarrow as pa

_POOLS = []           # a pool must outlive every buffer it handed out


def peak_allocation(fn):
    """``fn()`` and the peak bytes it held at once (an upper bound: the two peaks added)."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    _POOLS.append(pool)
    pa.set_memory_pool(pool)
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] + pool.max_memory()
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    return result, peak
