"""What a scan allocates: Python's peak and the core's mapped spans during one in-process
scan, and the peak RSS of ``iter_batches`` over a 2 GiB dump in a fresh interpreter."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pyarrow as pa

from dcpfast import _core as core
from dcpfast import scan
from dcpfast.io import DEFAULT_BATCH_BYTES

from .common import check
from .decoders import PROJECTION

#: The ``iter_batches`` memory probe reads a dump of at least this many bytes.
RSS_DUMP_BYTES = 2**31


def traced_memory(view) -> dict:
    """Allocation during one all-columns ``dcpfast.scan``: Python's peak (tracemalloc)
    plus the most the core held at once in its mapped spans (where large columns live)
    and in pyarrow's pool, with the input and output sizes it is to be compared with."""
    gc.collect()
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    untraced = core.memory.untraced
    core.memory.reset_peaks()
    live = untraced()[0]
    tracemalloc.start()
    try:
        batch = scan(view, collections=True, threads=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    peak += pool.bytes_allocated() - before + untraced()[1] - live
    columns = sum(a.nbytes for a in batch.to_dict().values())
    return {"input_bytes": len(view), "columns_bytes": columns, "peak_bytes": peak,
            "peak_over_columns": peak / columns, "peak_over_input": peak / len(view)}


_RSS_CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import dcpfast
    import dcpfast.io.dumps                  # loaded before the baseline is taken

    def peak():
        # VmHWM is this process's own high-water mark; ru_maxrss also counts the
        # parent's RSS at the fork on Linux, so it is only the fallback
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    path, batch_bytes, mapped = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "mapped"
    columns = sys.argv[4].split(",") if len(sys.argv) > 4 else None
    base = peak()
    frames = seqnos = 0
    for batch in dcpfast.iter_batches(path, batch_bytes, collections=True, columns=columns,
                                      memory_map=mapped):
        frames += len(batch)
        seqnos = (seqnos + int(batch["by_seqno"].sum(dtype=np.uint64))) % 2**64
    print(json.dumps({"baseline_bytes": base, "peak_bytes": peak(), "frames": frames,
                      "by_seqno_sum": seqnos}))
""")


def rss_probe(data: bytes, expected: dict, directory: Path,
              batch_bytes: int = DEFAULT_BATCH_BYTES) -> dict:
    """Peak RSS of a fresh interpreter that imports dcpfast and then runs ``iter_batches``
    over a dump of ``data`` repeated to at least ``RSS_DUMP_BYTES``, above its peak after
    the imports: with all columns, with the 5-column projection, and with all columns
    and ``memory_map=True``."""
    repeats = -(-RSS_DUMP_BYTES // len(data))
    path = directory / "rss.dcp"
    with open(path, "wb") as f:
        for _ in range(repeats):
            f.write(data)
    report = {"dump_bytes": repeats * len(data), "batch_bytes": batch_bytes}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        for key, how, columns in (("all_columns", "read", ()),
                                  ("projection", "read", (",".join(PROJECTION),)),
                                  ("all_columns_mapped", "mapped", ())):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(path),
                                   str(batch_bytes), how, *columns],
                                  capture_output=True, text=True, timeout=1800, env=env)
            elapsed = time.perf_counter() - start
            check(done.returncode == 0, f"iter_batches memory probe failed: "
                  f"{done.stderr[-500:]}")
            found = json.loads(done.stdout)
            check(found["frames"] == repeats * expected["frames"], f"memory probe: "
                  f"{found['frames']} frames, expected {repeats * expected['frames']}")
            check(found["by_seqno_sum"] == repeats * expected["by_seqno_sum"] % 2**64,
                  "memory probe: by_seqno sum differs")
            growth = found["peak_bytes"] - found["baseline_bytes"]
            report[key] = {**found, "growth_bytes": growth,
                           "growth_over_batch": growth / batch_bytes, "seconds": elapsed}
    finally:
        path.unlink()
    return report

