"""``dcpfast.report`` keeps aggregates, not frames: the peak RSS of a child process grows
little with the size of a dump, and a few KiB per connection with the connections of a
capture. Growth between a small and a large input, never absolute sizes (slow: a dump of
more than 2 GB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import dcpfast
from dcpfast import testing as t

MiB = 1 << 20
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux" or "libasan" in os.environ.get("LD_PRELOAD", ""),
                       reason="reads /proc/self/status; AddressSanitizer keeps freed memory"),
    pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                       reason="the twins take minutes on these inputs"),
]

#: The child: reports on its input and prints its peak RSS over what it held before.
_CHILD = """
import json, resource, sys
def rss():
    return int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1])
import dcpfast, pyarrow, pyarrow.compute
from dcpfast import testing as t
path, size = sys.argv[1], int(sys.argv[2])
if size:                           # a dump of ``size`` bytes: one synthetic block repeated
    block = t.synthetic_stream(4000, seed=7, vbuckets=16, sync_writes=True)
    with open(path, "wb") as f:
        for _ in range(size // len(block) + 1):
            f.write(block)
dcpfast.report(t.SAMPLE_PCAP)      # what every report loads, loaded before
before = rss()
figures = dcpfast.report(path, threads=2, batch_bytes=8 << 20).figures
out = {"frames": figures["frames"], "connections": len(figures["connections"]),
       "expect": (size // len(block) + 1) * len(dcpfast.scan(block)) if size else None,
       "peak": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024}
print(json.dumps(out))
"""


def peak(path, size: int = 0) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(size)],
                          capture_output=True, env=ENV, timeout=1800)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().splitlines()[-1])


def test_memory_does_not_grow_with_the_dump(tmp_path):
    small = peak(tmp_path / "small.dcp", 32 * MiB)
    large = peak(tmp_path / "large.dcp", 256 * MiB)
    assert large["frames"] > 7 * small["frames"]
    # frames held would be 220 MiB more; batches of 8 MiB and the aggregates are not
    assert large["peak"] - small["peak"] < 24, (small, large)


def _connections(count: int) -> bytes:
    """A capture of ``count`` connections, each a server's stream request answered and a
    mutation, never closed."""
    packets = []
    for i in range(count):
        client = (f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", 40000 + i % 20000)
        at = (1_700_000_000 + i) * 10**9
        events = [(at, True, t.stream_request(vbucket=i % 1024, opaque=7)),
                  (at + 1000, False, t.failover_log_response([(1, 0)], opaque=7)),
                  (at + 2000, False, t.mutation(b"key", b"value" * 10, by_seqno=1,
                                                vbucket=i % 1024, opaque=7, cas=at))]
        packets += t.timed_packets(events, client=client, handshake=False, fin=False)
    return t.pcap_file(packets)


def test_memory_per_connection_is_small(tmp_path):
    small, large = tmp_path / "small.pcap", tmp_path / "large.pcap"
    small.write_bytes(_connections(300))
    large.write_bytes(_connections(2400))
    got = peak(large)
    assert got["connections"] == 2400
    per_connection = (got["peak"] - peak(small)["peak"]) * MiB / 2100
    # what a report keeps of a connection and its stream (about 5 KiB, 12 KiB of RSS with
    # the capture reader's two directions), not its frames
    assert per_connection < 24 << 10, f"{per_connection:.0f} bytes a connection"


@pytest.mark.slow
def test_a_dump_of_gigabytes(tmp_path):
    """Every frame of a dump past 2**31 bytes counted. Its memory is checked as growth by
    the test above: an absolute peak measured here (60-80 MiB alone) once read 528 MiB
    late in a whole-suite run on a shared machine, a figure not explained yet."""
    size = int(os.environ.get("DCPFAST_LARGE_BYTES", 2_200_000_000))
    got = peak(tmp_path / "large.dcp", size)
    assert got["frames"] == got["expect"], got
