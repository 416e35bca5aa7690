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

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dcpfast
from dcpfast import testing as t
from dcpfast.cli import main
from dcpfast.cli.app import native_panics_hidden
from dcpfast.testing import SAMPLE
from tests.cli.commands import ENV, command


def run(*args, input=None):
    return CliRunner().invoke(main, [os.fspath(a) for a in args], input=input)


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


def test_state_refuses_to_write_over_an_input(dump, tmp_path):
    """``state X -o X`` once destroyed the dump: every command that writes refuses an output
    that is one of its inputs (by name, through a link, from standard input)."""
    data = dump.read_bytes()
    named = tmp_path / "dump.parquet"
    named.write_bytes(data)
    link = tmp_path / "link.parquet"
    link.symlink_to(named)
    for inputs, output in (([named], named), ([named], link), ([link], named)):
        result = run("state", *inputs, "-o", output, "--force")
        assert "the output is also an input" in one_error_line(result.output, result.exit_code)
        assert named.read_bytes() == data
    with open(named, "rb") as stdin:
        done = subprocess.run(command("state", "-", "-o", named, "--force"), stdin=stdin,
                              capture_output=True, env=ENV, timeout=120)
    assert "the output is also an input (<stdin>)" in one_error_line(
        done.stderr.decode(), done.returncode)
    assert named.read_bytes() == data


@pytest.mark.parametrize("command_", [["convert"], ["state"]])
def test_an_existing_output_is_replaced_only_with_force(dump, tmp_path, command_):
    out = tmp_path / "out.parquet"
    out.write_bytes(b"a user's file")
    result = run(*command_, dump, "-o", out)
    assert one_error_line(result.output, result.exit_code) == \
        f"Error: {out} already exists: choose another output, or replace it with --force"
    assert out.read_bytes() == b"a user's file"
    assert run(*command_, dump, "-o", out, "--force").exit_code == 0
    assert pq.read_metadata(out).num_rows > 0


@pytest.mark.parametrize("command_", [["convert"], ["state"]])
def test_the_output_extension_names_a_format_it_writes(dump, tmp_path, command_):
    result = run(*command_, dump, "-o", tmp_path / "out.txt")
    assert result.exit_code == 2 and "unknown extension" in result.output
    assert not (tmp_path / "out.txt").exists()
    if command_ == ["state"]:
        result = run("state", dump, "-o", tmp_path / "out.csv")
        assert result.exit_code == 2 and not (tmp_path / "out.csv").exists()


def test_convert_writes_to_standard_output_with_a_format(dump):
    done = subprocess.run(command("convert", dump, "-o", "-", "--format", "csv", "--columns",
                                  "offset,opcode"), capture_output=True, env=ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    frames = dcpfast.read(dump)
    assert lines[0] == '"offset","opcode","opcode_name"'
    assert len(lines) == len(frames) + 1 and lines[1].endswith(',"hello"')
    parquet = subprocess.run(command("convert", dump, "-o", "-", "--format", "parquet"),
                             capture_output=True, env=ENV, timeout=120)
    assert pq.read_table(pa.BufferReader(parquet.stdout)).num_rows == len(frames)
    assert run("convert", dump, "-o", "-").exit_code == 2         # which format?


def test_damage_says_how_to_keep_going(tmp_path):
    """A dump cut short (a consumer killed mid-write) fails every reading command in one
    line that says --errors skip keeps every intact frame; skip mode then reads them."""
    data = SAMPLE.read_bytes()
    cut = tmp_path / "cut.dcp"
    cut.write_bytes(data[:-10])
    for args in (["info"], ["convert", "-o", tmp_path / "c.parquet"],
                 ["state", "-o", tmp_path / "s.parquet"]):
        result = run(*args, cut)
        line = one_error_line(result.output, result.exit_code)
        assert line.endswith("(--errors skip keeps every intact frame)"), line
    kept = run("convert", cut, "-o", tmp_path / "c.parquet", "--errors", "skip")
    assert kept.exit_code == 0
    assert pq.read_metadata(tmp_path / "c.parquet").num_rows == len(dcpfast.read(SAMPLE)) - 1


def test_an_output_that_cannot_be_written_is_one_line(dump):
    """Standard output on a full disk: the command names the output, not its input."""
    for args in (["info", dump], ["head", dump], ["info", dump, "--json"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(command(*args), stdout=full, stderr=subprocess.PIPE,
                                  env=ENV, timeout=120)
        line = one_error_line(done.stderr.decode(), done.returncode)
        assert line == f"Error: <stdout>: {os.strerror(errno.ENOSPC)}", line


# -- signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_during_convert_removes_the_partial_output(tmp_path, signum):
    out = tmp_path / "out.parquet"
    body = b"".join(f.data for f in t.synthetic_frames(400, seed=3)[20:])
    # two threads: the output is written by a thread beside the decoding
    # the signal's default action in the child, whatever this process was started with
    # (under nohup SIGHUP is ignored, and dcpfast keeps it so)
    proc = subprocess.Popen(command("convert", "-q", "-", "-o", out, "--threads", "2"),
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    try:
        # more than one 64 MiB batch, then the input stays open: convert has written the
        # first batch and waits for more when the signal comes
        for _ in range((80 << 20) // len(body)):
            proc.stdin.write(body)
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while not _written(out) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
        assert _written(out)
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
    said = proc.stderr.read()
    assert b"Traceback" not in said and b"Aborted" not in said
    assert not out.exists() and not list(tmp_path.iterdir())     # nor its temporary


def _written(out: Path) -> bool:
    """Whether the temporary ``out`` is written to (beside it) holds bytes."""
    return any(p.stat().st_size for p in out.parent.glob(f".{out.name}.dcpfast-*.tmp"))


# a writer of convert's, interrupted at random moments while a row group is written beside
# (SIGALRM raising KeyboardInterrupt, as SIGINT does; SIGTERM and SIGHUP unwind alike)
_INTERRUPTED_WRITES = """
import os, random, signal, sys, time
import numpy as np, pyarrow as pa
from dcpfast.cli.convert import _Writer

def interrupt(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGALRM, interrupt)
path, rounds = sys.argv[1], int(sys.argv[2])
rng = random.Random(5)
table = pa.table({"k": pa.array([os.urandom(64) for _ in range(20000)]),
                  "n": np.arange(20000)})

def write_all(writer):
    for _ in range(4):
        writer.write(table)
        writer.flush()
    writer.close()

# the moments are drawn within what a whole round takes on this machine (the fastest of
# five uninterrupted ones: a process's first rounds, its memory still fresh, can take
# several times the later ones), so that most rounds are interrupted however fast it is
took = []
for _ in range(5):
    start = time.perf_counter()
    write_all(_Writer(path, "parquet", background=True))
    took.append(time.perf_counter() - start)
    os.unlink(path)
whole = min(took)
interrupted = 0
for _ in range(rounds):
    writer = _Writer(path, "parquet", background=True)
    try:
        try:               # armed inside: an early moment then lands in these blocks too
            signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.0001, 0.9 * whole))
            write_all(writer)
        finally:                  # the timer may fire here too: then the round is abandoned
            signal.setitimer(signal.ITIMER_REAL, 0)
    except KeyboardInterrupt:
        interrupted += 1
        writer.abandon()
    os.unlink(path)
print(interrupted)
"""


def test_interrupts_at_random_moments_never_crash_a_threaded_write(tmp_path):
    """Hundreds of interrupts, each at a random moment of writing a file whose row groups
    are written by a thread beside: the file is never closed under a write still running
    (that crashed with SIGSEGV or a corrupted heap), so the process ends normally."""
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_WRITES,
                           str(tmp_path / "out.parquet"), "300"],
                          capture_output=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert int(done.stdout) > 100            # most rounds were interrupted mid-way


# the command started as its entry point starts it, interrupted once it has begun loading
# (Python's own start is not dcpfast's)
_INTERRUPTED_START = """
import os, signal, sys, threading, time
import dcpfast.__main__ as launcher

delay = float(sys.argv[1])

def interrupt():
    while "dcpfast.cli" not in sys.modules:
        time.sleep(0.0005)
    time.sleep(delay)
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=interrupt, daemon=True).start()
sys.argv = ["dcpfast", "info", "--sample"]
launcher.main()
"""


def _interruptible():
    """In a child: Ctrl-C as a terminal gives it, even where the tests run with SIGINT
    ignored (a background job)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupt_while_the_command_starts_ends_it_quietly():
    """Ctrl-C at any moment of the command's start (its imports included) or run: no
    traceback, no "Aborted!", the process ends by SIGINT."""
    for delay in (0, 0.01, 0.03, 0.06, 0.1, 0.2, 0.4):
        done = subprocess.run([sys.executable, "-c", _INTERRUPTED_START, str(delay)],
                              capture_output=True, env=ENV, timeout=120,
                              preexec_fn=_interruptible)
        assert done.returncode in (0, -signal.SIGINT), done.stderr
        assert b"Traceback" not in done.stderr and b"Aborted" not in done.stderr, done.stderr


_INTERRUPTED_IMPORT = """
import sys, time
sys.path.insert(0, sys.argv[1])
from dcpfast.cli.app import ended_by_signals
with ended_by_signals():
    import interrupts_itself
    print("imported", interrupts_itself.WHOLE, flush=True)
    time.sleep(60)
"""

_INTERRUPTING_MODULE = """
import os, signal, time
os.kill(os.getpid(), signal.SIGINT)
for _ in range(100):
    time.sleep(0.001)           # the interrupt is handled here, inside the import
WHOLE = True
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_an_import_waits_for_its_end(tmp_path, signum):
    """A signal that comes while a module is imported (a compiled one would print the
    interrupt and lose it) ends the command only once the import is over."""
    (tmp_path / "interrupts_itself.py").write_text(
        _INTERRUPTING_MODULE.replace("SIGINT", signum.name))
    done = subprocess.run([sys.executable, "-c", _INTERRUPTED_IMPORT, str(tmp_path)],
                          capture_output=True, env=ENV, timeout=120,
                          preexec_fn=_interruptible)
    assert done.stdout == b"imported True\n", done.stderr
    assert done.returncode == -signum, done.stderr
    assert b"Traceback" not in done.stderr and b"ignored" not in done.stderr, done.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_state_leaves_no_partial_output(tmp_path, signum):
    """``state`` ended by a signal at any moment (its write included) leaves no output, or
    (when it finished first) a whole one; and ends by that signal."""
    dump = tmp_path / "big.dcp"
    dump.write_bytes(SAMPLE.read_bytes() * 60)
    out = tmp_path / "state.parquet"
    for delay in (0.9, 1.2, 1.5, 1.8, 2.1, 2.4):
        out.unlink(missing_ok=True)
        proc = subprocess.Popen(command("state", dump, "-o", out),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        time.sleep(delay)
        proc.send_signal(signum)
        _, said = proc.communicate(timeout=120)
        assert b"Traceback" not in said and b"Aborted" not in said, said
        assert proc.returncode in (0, -signum), said
        assert not list(tmp_path.glob(".state.parquet.dcpfast-*"))     # no temporary left
        if out.exists():            # the write was over before the signal: a whole file
            assert pq.read_metadata(out).num_rows > 0
        else:
            assert proc.returncode == -signum


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
    sys.platform != "linux" or "libasan" in os.environ.get("LD_PRELOAD", "")
    or bool(os.environ.get("DCPFAST_PUREPYTHON")),
    reason="address-space limits as Linux has them; AddressSanitizer's allocator cannot run "
    "under one; the pure-Python twin, when its memory happens to fit the limit, takes "
    "minutes over the 90 MB dump (the command's errors are checked with the compiled core)")

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


#: How the C library's dynamic loader ends a process when a thread's first touch of a
#: loaded module's thread-local storage finds no memory: exit status 127 and this line,
#: written by the loader itself (no Python code runs).
_LOADER_FATAL, _NO_TLS = 127, "cannot allocate memory for thread-local data"


def _limited_convert(tmp_path, threads: str):
    big = tmp_path / "big.dcp"
    big.write_bytes(SAMPLE.read_bytes() * 200)          # 90 MB
    out = tmp_path / "out.parquet"
    for margin in (60, 80, 100, 120, 150, 200):
        out.unlink(missing_ok=True)
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
        if done.returncode == _LOADER_FATAL and _NO_TLS in stderr:
            continue                # the C library's own end, before dcpfast could speak
        assert done.returncode in (0, 1), stderr
        assert "Traceback" not in stderr, stderr
        if done.returncode:
            assert stderr.rstrip().endswith("not enough memory"), stderr
            assert not out.exists()
            said.append(stderr)
    assert said


_PANIC_TEXT = ("\nthread 'tokio-rt-worker' (723) panicked at src/buffered.rs:369:41:\n"
               "Already shut down\nstack backtrace:\nnote: Some details are omitted\n")


def test_native_panics_are_dropped_only_from_a_block_that_failed(capfd):
    """What a native library writes to standard error's descriptor comes back after the
    block, less its panic reports where the block failed (the command's one line says
    why); a block that succeeds keeps everything."""
    def block(fail: bool) -> None:
        with native_panics_hidden():
            os.write(2, b"kept before\n" + _PANIC_TEXT.encode() + b"kept after\n")
            if fail:
                raise OSError("the write failed")

    with pytest.raises(OSError, match="the write failed"):
        block(True)
    assert capfd.readouterr().err == "kept before\nkept after\n"
    block(False)
    assert capfd.readouterr().err == "kept before\n" + _PANIC_TEXT + "kept after\n"


def test_what_was_held_aside_is_written_when_a_signal_ends_the_command():
    """A signal that ends the command inside ``native_panics_hidden`` writes what the
    block had written first."""
    code = ("import os, signal\n"
            "from dcpfast.cli.app import _end_by, native_panics_hidden\n"
            "with native_panics_hidden():\n"
            "    os.write(2, b'said before the signal\\n')\n"
            "    _end_by(signal.SIGTERM)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, env=ENV,
                          timeout=120)
    assert done.returncode == -signal.SIGTERM
    assert done.stderr == b"said before the signal\n"
