"""Peak memory of a call: Python's allocations (numpy's included), pyarrow's pool, and the
spans the compiled cores keep their large columns, buffers and tables in (those that
tracemalloc does not see).

These are process-wide counts: ``peak_in_child`` measures in a fresh process, where no
other thread of the test session (a Spark gateway's, a page server's) allocates meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pyarrow as pa

from dcpfast import _core

_POOLS = []           # a pool must outlive every buffer it handed out


def peak_allocation(fn):
    """``fn()`` and the peak bytes it held at once (an upper bound: the peaks added)."""
    previous = pa.default_memory_pool()
    pool = pa.proxy_memory_pool(previous)
    _POOLS.append(pool)
    pa.set_memory_pool(pool)
    untraced = _core.memory.untraced
    _core.memory.reset_peaks()
    before = untraced()[0]
    tracemalloc.start()
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] + pool.max_memory() + untraced()[1] - before
    finally:
        tracemalloc.stop()
        pa.set_memory_pool(previous)
    return result, peak


#: The child: prepares a job outside the measurement, then prints its result and peak.
_CHILD = """
import importlib, json, sys
from tests.memory import peak_allocation
module, name, *args = sys.argv[1:]
job = getattr(importlib.import_module(module), name)(*args)
print(json.dumps(peak_allocation(job)))
"""


def peak_in_child(module: str, name: str, *args):
    """``peak_allocation(job)`` in a fresh process, ``job`` being what the tests module
    ``module``'s ``name(*args)`` returns (``args`` given as strings, the job's result
    JSON)."""
    path = os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path])
    done = subprocess.run([sys.executable, "-c", _CHILD, module, name, *map(str, args)],
                          capture_output=True, env=dict(os.environ, PYTHONPATH=path),
                          timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result, peak = json.loads(done.stdout.decode().splitlines()[-1])
    return result, peak
