"""What other processes and odd inputs do to a reader: files that shrink under it, file
objects that report bytes they never wrote, sizes that are no sizes, compression bombs,
and the memory the recycled cache keeps. Each case that could kill a process runs in a
child, which must end normally."""

from __future__ import annotations

import gzip
import io
import json
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.pcap import read_pcap

compiled_only = pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                                   reason="the recycled memory is the compiled core's")
#: RSS figures mean nothing under AddressSanitizer (its shadow memory and its quarantine
#: of freed blocks count too): fuzz/sanitize.sh runs the tests so.
rss_measured = pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                                  reason="RSS under AddressSanitizer")


def child(script: str, *args, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``script`` in a fresh interpreter; it must not die of a signal."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode >= 0, (f"killed by {signal.Signals(-done.returncode).name}",
                                  done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """A dump of about 12 MB, so that the shortened file loses many pages."""
    path = tmp_path_factory.mktemp("dumps") / "dump.dcp"
    unit = t.synthetic_stream(3000, seed=21)
    path.write_bytes(unit * (12_000_000 // len(unit)))
    return path


# -- files shortened by another process ------------------------------------------------

SHRINK_AFTER_READ = """
    import os, sys, dcpfast
    path = sys.argv[1]
    batch = dcpfast.read(path, collections=True)
    with open(path, "r+b") as f:           # as another process would
        f.truncate(4096)
    n = len(batch)
    table = batch.to_arrow()
    assert table.num_rows == n and table.column("key").null_count < n
    assert batch.frame(n - 1) and batch.values().num_rows > 0
    print(n)
"""


def test_a_file_shortened_after_read_leaves_the_batch_whole(dump, tmp_path):
    path = tmp_path / "shrinks.dcp"
    path.write_bytes(dump.read_bytes())
    done = child(SHRINK_AFTER_READ, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout) == len(dcpfast.scan(dump.read_bytes(), collections=True))


SHRINK_WHILE_READING = """
    import os, sys, dcpfast
    path, how = sys.argv[1], sys.argv[2]
    size = os.path.getsize(path)
    real = os.preadv
    def shrink_then_read(fd, buffers, position):       # the file shrinks mid-read
        os.truncate(path, size // 3)
        os.preadv = real
        return real(fd, buffers, position)
    os.preadv = shrink_then_read
    try:
        if how == "read":
            frames = len(dcpfast.read(path, collections=True, errors=sys.argv[3]))
        else:
            frames = sum(len(b) for b in dcpfast.iter_batches(
                path, 1 << 20, collections=True, errors=sys.argv[3]))
    except dcpfast.DcpFormatError as e:
        print("raised", e)
    else:
        print("kept", frames)
"""


@pytest.mark.parametrize("how", ["read", "iter_batches"])
@pytest.mark.parametrize("errors", ["strict", "skip"])
def test_a_file_shortened_while_it_is_read(dump, tmp_path, how, errors):
    """The reader keeps what it read (skip mode: a cut-short last frame is damage) or
    raises (strict mode), and never dies."""
    path = tmp_path / "shrinks.dcp"
    path.write_bytes(dump.read_bytes())
    done = child(SHRINK_WHILE_READING, path, how, errors)
    assert done.returncode == 0, done.stderr[-2000:]
    verdict, _, rest = done.stdout.partition(" ")
    if errors == "skip":
        assert verdict == "kept"
        whole = dcpfast.scan(dump.read_bytes()[:os.path.getsize(dump) // 3],
                             collections=True)
        assert int(rest) >= len(whole) - 1
    else:
        assert verdict in ("raised", "kept")


SHRINK_BETWEEN_BATCHES = """
    import os, sys, dcpfast
    from dcpfast.batch import view_of
    path = sys.argv[1]
    held, frames = [], 0
    for i, batch in enumerate(dcpfast.iter_batches(path, 1 << 20, collections=True,
                                                   errors="skip")):
        held.append(batch)
        frames += len(batch)
        if i == 1:                            # the pages of both batches are lost
            with open(path, "r+b") as f:
                f.truncate(4096)
    for batch in held:                       # every batch read is still whole
        batch.to_arrow()
        batch.values()
        assert bytes(view_of(batch)[-100:]) and (not len(batch) or batch.frame(-1))
    print(frames)
"""


def test_iter_batches_over_a_file_that_shrinks_between_batches(dump, tmp_path):
    path = tmp_path / "shrinks.dcp"
    path.write_bytes(dump.read_bytes())
    done = child(SHRINK_BETWEEN_BATCHES, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0 < int(done.stdout) < len(dcpfast.scan(dump.read_bytes(), collections=True))


SHRINK_CAPTURE = """
    import os, sys
    from dcpfast.pcap import read_pcap
    path = sys.argv[1]
    reader = read_pcap(path, batch_bytes=1 << 16, collections=False)
    first = next(reader)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    rest = list(reader)
    print(len(first) + sum(len(b) for b in rest))
"""


def test_read_pcap_over_a_capture_that_shrinks(tmp_path):
    frames = [t.mutation(b"k%d" % i, bytes(2000), by_seqno=i + 1) for i in range(400)]
    data = b"".join(frames)
    segments = t.tcp_conversation(b"", data)
    path = tmp_path / "dcp.pcap"
    path.write_bytes(t.pcap_file(t.tcp_packets(segments)))
    assert os.path.getsize(path) > 4 << 16
    done = child(SHRINK_CAPTURE, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0 < int(done.stdout) < len(frames)


def test_only_memory_map_true_maps_the_file(dump):
    import mmap
    assert not isinstance(dcpfast.read(dump).data, (mmap.mmap, memoryview))
    mapped = dcpfast.read(dump, memory_map=True)
    assert isinstance(mapped.data.obj, mmap.mmap)
    assert len(mapped) == len(dcpfast.read(dump))
    batches = list(dcpfast.iter_batches(dump, 4 << 20))
    assert not any(isinstance(b.data, memoryview) for b in batches)
    batches = list(dcpfast.iter_batches(dump, 4 << 20, memory_map=True))
    assert all(isinstance(b.data.obj, mmap.mmap) for b in batches)


# -- file objects that report bytes they never wrote -----------------------------------

class Lying(io.RawIOBase):
    """Writes ``data`` once, then reports full reads of bytes it never writes."""

    def __init__(self, data: bytes, lies: int):
        self.data, self.lies = data, lies

    def readable(self):
        return True

    def readinto(self, b):
        if self.data:
            n = min(len(b), len(self.data))
            b[:n] = self.data[:n]
            self.data = self.data[n:]
            return n
        if self.lies:
            self.lies -= 1
            return len(b)
        return 0


@compiled_only
def test_a_file_object_that_reports_unwritten_bytes_sees_no_earlier_scan():
    """Memory an earlier scan used (and gave back to the recycled cache) is never handed
    out as bytes the file object did not write: those read as zeros, which are no frames."""
    secret = t.synthetic_stream(3000, seed=22)
    for _ in range(3):
        held = list(dcpfast.iter_batches(io.BytesIO(secret * 8), 1 << 20, collections=True))
        del held                               # its memory goes back to the cache
    head = t.synthetic_stream(5, seed=23)
    found = list(dcpfast.iter_batches(Lying(head, 4), 1 << 20, collections=True,
                                      errors="skip"))
    frames = sum(len(b) for b in found)
    assert frames == len(dcpfast.scan(head, collections=True))
    for b in found:
        assert not np.frombuffer(b.data, np.uint8)[len(head):].any()


@pytest.mark.parametrize("reported", [-1, 1 << 30])
def test_a_file_object_reporting_an_impossible_count_is_an_error(reported):
    class Impossible(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            return reported
    with pytest.raises(OSError, match="readinto"):
        list(dcpfast.iter_batches(Impossible(), 1 << 20))
    with pytest.raises(OSError, match="readinto"):
        list(read_pcap(Impossible()))


# -- sizes and limits -------------------------------------------------------------------

@pytest.mark.parametrize("size", [float("nan"), float("inf"), 1.5, 4096.0, True, "4096",
                                  None, 0, -1, 23])
def test_batch_sizes_are_integers_of_at_least_a_frame_header(size):
    with pytest.raises(ValueError, match="batch_bytes"):
        list(dcpfast.iter_batches([t.noop()], batch_bytes=size))
    with pytest.raises(ValueError, match="batch_bytes"):
        list(read_pcap(io.BytesIO(t.pcap_file([])), batch_bytes=size))


def test_the_smallest_batch_size_reads_a_frame_per_batch_or_two():
    data = t.synthetic_stream(300, seed=24)
    whole = dcpfast.scan(data, collections=True)
    batches = list(dcpfast.iter_batches([data], batch_bytes=24, collections=True))
    assert sum(len(b) for b in batches) == len(whole)
    assert len(batches) <= len(whole) + 1


def test_read_stops_at_max_bytes_of_decompressed_data(tmp_path):
    unit = t.synthetic_stream(2000, seed=25)
    data = unit * (4_000_000 // len(unit))
    path = tmp_path / "bomb.dcp.gz"
    path.write_bytes(gzip.compress(data, 1))
    with pytest.raises(ValueError, match="max_bytes.*iter_batches"):
        dcpfast.read(path, max_bytes=1 << 20)
    assert len(dcpfast.read(path, max_bytes=len(data))) == len(dcpfast.scan(data))
    assert len(dcpfast.read(path, max_bytes=None)) == len(dcpfast.scan(data))
    with pytest.raises(ValueError, match="max_bytes"):
        dcpfast.read(path, max_bytes=1.5)


BOMB = """
    import sys, dcpfast
    import dcpfast.io.dumps, dcpfast.values         # loaded before the base is taken
    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    base = rss()
    try:
        dcpfast.read(sys.argv[1], max_bytes=16 << 20)
    except ValueError as e:
        print(rss() - base)
"""


@rss_measured
def test_a_compression_bomb_costs_no_more_than_max_bytes(tmp_path):
    path = tmp_path / "bomb.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        for _ in range(64):
            f.write(bytes(16 << 20))                # 1 GiB of zeros in about 1 MB
    assert os.path.getsize(path) < 4 << 20
    done = child(BOMB, path)
    assert done.returncode == 0 and done.stdout, done.stderr[-2000:]
    assert int(done.stdout) < 80 << 20


# -- the recycled cache: counted, bounded, and given back when idle ---------------------

IDLE = """
    import json, time
    import dcpfast
    from dcpfast import memory, testing as t
    def rss():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    unit = t.synthetic_stream(3000, seed=26)
    data = unit * (60_000_000 // len(unit))
    base = rss()
    batch = dcpfast.scan(data, collections=True, threads=1)
    del batch                                   # its columns go to the cache
    kept, held = memory.caches()["output"].cached, rss() - base
    time.sleep(2.5)                             # no allocation meanwhile
    print(json.dumps(dict(kept=kept, held=held, later=memory.caches()["output"].cached,
                          after=rss() - base)))
"""


@compiled_only
@rss_measured
def test_the_recycled_cache_is_given_back_when_idle():
    done = child(IDLE)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["kept"] > 20 << 20 and found["held"] > 20 << 20
    assert found["later"] == 0
    assert found["after"] < found["held"] - (20 << 20)


BOUND = """
    import json, sys
    import dcpfast
    import dcpfast.io.dumps                          # loaded before the base is taken
    def hwm():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    path, batch_bytes = sys.argv[1], int(sys.argv[2])
    threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    base = hwm()
    frames = 0
    for batch in dcpfast.iter_batches(path, batch_bytes, collections=True, threads=threads):
        frames += len(batch)
    print(json.dumps(dict(frames=frames, growth=hwm() - base)))
"""


@compiled_only
@rss_measured
@pytest.mark.parametrize("value", [16 << 10, 3 << 20, 7 << 20])
def test_iter_batches_memory_stays_within_its_bound(tmp_path, value):
    """The documented bound (docs/usage.md): twice a batch's input (batch_bytes plus the
    largest frame) and its columns, the recycled cache included; frames of several sizes
    up to almost twice the batch size."""
    batch_bytes = 4 << 20
    path = tmp_path / "frames.dcp"
    with open(path, "wb") as f:
        f.write(t.synthetic_stream(50, seed=27))
        for i in range(90_000_000 // value):
            f.write(t.mutation(b"k%d" % i, bytes([i % 251]) * value, by_seqno=i + 1))
    frame = value + 80
    columns = 200 * ((batch_bytes + frame) // frame + 64)         # about 175 bytes a row
    bound = 2 * (batch_bytes + frame + columns) + (16 << 20)      # and the interpreter's
    done = child(BOUND, path, batch_bytes)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["frames"] == len(dcpfast.read(path))
    assert found["growth"] <= bound, (found, bound)


@compiled_only
@rss_measured
def test_threads_add_no_memory_to_iter_batches(tmp_path):
    """Batches large enough for two threads: the ranges write into the batch's own
    columns, so the peak is that of one thread (columns of each range's own would add
    about half a batch's columns, some 10 MiB here)."""
    batch_bytes = 32 << 20
    unit = t.synthetic_stream(3000, seed=28)
    path = tmp_path / "frames.dcp"
    path.write_bytes(unit * (4 * batch_bytes // len(unit)))
    growth = {}
    for threads in (1, 2):
        done = child(BOUND, path, batch_bytes, threads)
        assert done.returncode == 0, done.stderr[-2000:]
        growth[threads] = json.loads(done.stdout)["growth"]
    assert growth[2] <= growth[1] + (4 << 20), growth


CLI_SHRINK = """
    import os, sys
    from dcpfast.cli import main
    path, command, out = sys.argv[1], sys.argv[2], sys.argv[3]
    size = os.path.getsize(path)
    real = os.preadv
    def shrink_then_read(fd, buffers, position):
        os.truncate(path, size // 3 + 7)          # inside a frame
        os.preadv = real
        return real(fd, buffers, position)
    os.preadv = shrink_then_read
    args = ["info", path] if command == "info" else ["convert", path, "-o", out, "-q"]
    main.main(args, standalone_mode=True)
"""


@pytest.mark.parametrize("command", ["info", "convert"])
def test_the_command_over_a_file_shortened_while_read(dump, tmp_path, command):
    """The command ends with a message (the cut-short last frame, strict mode) and status
    1, not a signal; convert leaves no partial output."""
    path = tmp_path / "shrinks.dcp"
    path.write_bytes(dump.read_bytes())
    out = tmp_path / "out.parquet"
    done = child(CLI_SHRINK, path, command, out)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "truncated frame" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()
