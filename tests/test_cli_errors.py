"""The dcpfast command where things go wrong around it: an output that is an input, a
signal mid-way, a closed standard input, names that are not UTF-8, a full disk, too
little memory. Each ends with one ``Error:`` line and status 1 (or by its signal), never
a traceback, and leaves no partial output (out of address space with several threads,
the error is the last line: CPython may write lines of its own for a thread started or
ended at the limit)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.testing import SAMPLE

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def run(*args, input=None):
    return CliRunner().invoke(main, [os.fspath(a) for a in args], input=input)


def command(*args) -> list[str]:
    """The dcpfast command with ``args``, run by this interpreter."""
    return [sys.executable, "-m", "dcpfast", *map(os.fspath, args)]


def one_error_line(result_output: str, status: int) -> str:
    lines = result_output.strip().splitlines()
    assert status == 1, result_output
    assert len(lines) == 1 and lines[0].startswith("Error: "), result_output
    return lines[0]


@pytest.fixture
def dump(tmp_path) -> Path:
    path = tmp_path / "dump.dcp"
    path.write_bytes(SAMPLE.read_bytes())
    return path


# -- the output is an input ------------------------------------------------------------------


def test_convert_refuses_to_write_over_an_input(dump, tmp_path):
    data = dump.read_bytes()
    named = tmp_path / "dump.parquet"
    named.write_bytes(data)
    symlink = tmp_path / "link.parquet"
    symlink.symlink_to(dump)
    hard = tmp_path / "hard.parquet"
    os.link(dump, hard)
    for inputs, output in (([named], named), ([dump, named], named), ([dump], symlink),
                           ([dump], hard), ([symlink], dump.with_suffix(".parquet"))):
        if output == dump.with_suffix(".parquet"):
            output.unlink(missing_ok=True)
            output.symlink_to(dump)
        result = run("convert", *inputs, "-o", output)
        line = one_error_line(result.output, result.exit_code)
        assert "the output is also an input" in line
        assert dump.read_bytes() == data and named.read_bytes() == data
    # standard input redirected from the output
    with open(named, "rb") as stdin:
        done = subprocess.run(command("convert", "-", "-o", named), stdin=stdin,
                              capture_output=True, env=ENV, timeout=120)
    assert "the output is also an input (<stdin>)" in one_error_line(
        done.stderr.decode(), done.returncode)
    assert named.read_bytes() == data
    # another file is fine
    result = run("convert", dump, "-o", tmp_path / "other.parquet")
    assert result.exit_code == 0, result.output


# -- signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_during_convert_removes_the_partial_output(tmp_path, signum):
    out = tmp_path / "out.parquet"
    body = b"".join(f.data for f in t.synthetic_frames(400, seed=3)[20:])
    # two threads: the output is written by a thread beside the decoding
    proc = subprocess.Popen(command("convert", "-q", "-", "-o", out, "--threads", "2"),
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    try:
        # more than one 64 MiB batch, then the input stays open: convert has written the
        # first batch and waits for more when the signal comes
        for _ in range((80 << 20) // len(body)):
            proc.stdin.write(body)
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert out.stat().st_size > 0
        proc.send_signal(signum)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:     # it came just before a read began: the read
            proc.stdin.write(body)            # ends with more input, then it is handled
            proc.stdin.flush()
            proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.stdin.close()
    assert proc.returncode == -signum
    assert b"Traceback" not in proc.stderr.read()
    assert not out.exists()


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_a_hang_up_ignored_leaves_convert_running(tmp_path):
    """Under nohup (SIGHUP ignored) a hang-up does not end the conversion."""
    out = tmp_path / "out.parquet"
    frames = t.synthetic_frames(400, seed=3)[20:]
    body = b"".join(f.data for f in frames)
    proc = subprocess.Popen(command("convert", "-q", "-", "-o", out), stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=ENV,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        proc.stdin.write(body)
        proc.stdin.flush()
        time.sleep(1)
        proc.send_signal(signal.SIGHUP)
        proc.stdin.write(body)
        proc.stdin.close()
        proc.wait(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, proc.stderr.read()
    assert pq.read_metadata(out).num_rows == 2 * len(frames)


# -- inputs and outputs that cannot be used ---------------------------------------------------


def test_closed_standard_input():
    for args in (["info", "-"], ["head", "-"], ["convert", "-", "-o", os.devnull + ".csv"]):
        done = subprocess.run(command(*args), capture_output=True, env=ENV, timeout=120,
                              preexec_fn=lambda: os.close(0))
        line = one_error_line(done.stderr.decode(), done.returncode)
        assert line == "Error: <stdin>: standard input is closed"


def test_names_that_are_not_utf8(dump, tmp_path):
    odd = tmp_path / os.fsdecode(b"caf\xe9")                 # Latin-1, not UTF-8
    out = Path(str(odd) + ".parquet")
    assert run("convert", dump, "-o", out).exit_code == 0
    with open(out, "rb") as f:
        assert pq.read_table(f).num_rows == len(dcpfast.read(SAMPLE))
    odd_input = Path(str(odd) + ".dcp")
    odd_input.write_bytes(SAMPLE.read_bytes()[:1000])
    for args in (["info", odd_input], ["head", odd_input],
                 ["convert", odd_input, "-o", tmp_path / "x.csv"],
                 ["convert", dump, "-o", tmp_path / os.fsdecode(b"no\xff") / "x.csv"]):
        done = subprocess.run(command(*args), capture_output=True, env=ENV, timeout=120)
        line = one_error_line(done.stderr.decode(errors="replace"), done.returncode)
        assert "caf\ufffd" in line or "no\ufffd" in line, line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("threads", ["1", "2"])     # written here, or by a thread beside
def test_a_full_disk_names_the_output(dump, tmp_path, threads):
    for ext in ("parquet", "arrow", "csv"):
        out = tmp_path / f"full.{ext}"
        out.symlink_to("/dev/full")
        result = run("convert", dump, "-o", out, "--threads", threads)
        line = one_error_line(result.output, result.exit_code)
        assert line == f"Error: {out}: No space left on device"
        assert out.is_symlink()                   # a device is not removed


@pytest.mark.skipif(not hasattr(signal, "SIGXFSZ"), reason="needs file size limits")
@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_write_failing_mid_way_names_the_output(tmp_path, threads):
    """A file size limit fails the first group's write while later groups are still to
    come (with two threads, in the thread that writes beside the decoding)."""
    big = tmp_path / "big.dcp"
    big.write_bytes(SAMPLE.read_bytes() * 400)          # 180 MB: three 64 MiB batches
    out = tmp_path / "out.parquet"

    def limited():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    done = subprocess.run(command("convert", "-q", big, "-o", out, "--threads", threads),
                          capture_output=True, env=ENV, timeout=300, preexec_fn=limited)
    line = one_error_line(done.stderr.decode(), done.returncode)
    assert line == f"Error: {out}: {os.strerror(errno.EFBIG)}"
    assert not out.exists()


_ADDRESS_SPACE = pytest.mark.skipif(
    sys.platform != "linux" or "libasan" in os.environ.get("LD_PRELOAD", ""),
    reason="address-space limits as Linux has them; AddressSanitizer's allocator cannot run "
    "under one")

# the command in a process of its own, its address space limited to what it holds after the
# imports plus a margin (in MiB)
_LIMITED = (
    "import resource, sys\n"
    "import numpy, pyarrow, pyarrow.parquet\n"
    "from dcpfast.cli import main\n"
    "size = [l for l in open('/proc/self/status') if l.startswith('VmSize')][0]\n"
    "size = int(size.split()[1]) * 1024 + (int(sys.argv[1]) << 20)\n"
    "resource.setrlimit(resource.RLIMIT_AS, (size, resource.RLIM_INFINITY))\n"
    "main(sys.argv[2:])\n")


def _limited_convert(tmp_path, threads: str):
    big = tmp_path / "big.dcp"
    big.write_bytes(SAMPLE.read_bytes() * 200)          # 90 MB
    out = tmp_path / "out.parquet"
    for margin in (60, 80, 100, 120, 150, 200):
        done = subprocess.run([sys.executable, "-c", _LIMITED, str(margin), "convert", "-q",
                               big, "-o", out, "--threads", threads],
                              capture_output=True, env=ENV, timeout=120)
        yield done, out


@_ADDRESS_SPACE
def test_too_little_memory_is_one_line(tmp_path):
    """One thread (and no progress bar, so no thread at all): the error is the only line.
    (A thread started or ended when the address space is exhausted can fail in CPython's
    or the C library's own code, which then writes to standard error itself: the threaded
    case is checked below for what dcpfast controls.)"""
    said = []
    for done, out in _limited_convert(tmp_path, "1"):
        if done.returncode:
            said.append(one_error_line(done.stderr.decode(), done.returncode))
            assert not out.exists()
    assert any(line.endswith("not enough memory") for line in said), said


@_ADDRESS_SPACE
def test_too_little_memory_with_threads_ends_with_the_error(tmp_path):
    """Two threads, a worker or the writer thread among those that run out: the command
    ends (a worker that dies is never waited for), says so, and leaves no output."""
    said = []
    for done, out in _limited_convert(tmp_path, "2"):
        stderr = done.stderr.decode(errors="replace")
        assert done.returncode in (0, 1), stderr
        assert "Traceback" not in stderr, stderr
        if done.returncode:
            assert stderr.rstrip().endswith("not enough memory"), stderr
            assert not out.exists()
            said.append(stderr)
    assert said
