"""A dump of more than 2 GB through ``iter_batches``: every frame counted, seqnos summed,
and the process's memory bounded by the batch size, not the dump's size."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import dcpfast

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                       reason="the memory bound is the compiled core's; the twin is the "
                              "correctness reference and too slow for gigabytes"),
]

_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import dcpfast
    from dcpfast import testing as t

    def hwm():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

    path, total, batch_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    block = t.synthetic_stream(4000, seed=7, vbuckets=8, sync_writes=True)
    repeats = total // len(block) + 1
    with open(path, "wb") as f:
        for _ in range(repeats):
            f.write(block)
    one = dcpfast.scan(block, collections=True, columns=["by_seqno"])
    base = hwm()
    frames = seqno_sum = 0
    for b in dcpfast.iter_batches(path, batch_bytes=batch_bytes, collections=True,
                                  columns=["by_seqno"]):
        frames += len(b)
        seqno_sum = (seqno_sum + int(b["by_seqno"].sum(dtype=np.uint64))) % 2**64
    print(json.dumps(dict(
        frames=frames, seqno_sum=seqno_sum, expect_frames=repeats * len(one),
        expect_sum=repeats * int(one["by_seqno"].sum(dtype=np.uint64)) % 2**64,
        bytes=repeats * len(block), growth=hwm() - base)))
""")


def test_gigabytes_in_bounded_memory(tmp_path):
    batch_bytes = 64 << 20
    total = int(os.environ.get("DCPFAST_LARGE_BYTES", 2_200_000_000))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path / "large.dcp"),
                          str(total), str(batch_bytes)], capture_output=True, text=True,
                         check=True, timeout=1800,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    result = json.loads(out.stdout)
    assert result["bytes"] >= total
    assert result["frames"] == result["expect_frames"]
    assert result["seqno_sum"] == result["expect_sum"]
    assert result["growth"] <= 3 * batch_bytes, result
