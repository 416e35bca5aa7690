"""The command's outputs (``dcpfast.cli.app``'s one output writer): every file a command
writes (``convert``, ``state``, ``diff -o``, ``report``'s page and JSON) is written to a
temporary file beside it and renamed into place once whole, so that a command killed at
any moment (SIGKILL included) leaves the previous output as it was, or none; a signal it
can handle leaves no temporary either; the temporaries a SIGKILL left are swept by the
next run. Two outputs that are one file are refused, and a standard output closed by its
reader ends the command quietly, by SIGPIPE."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dcpfast.testing import SAMPLE, SAMPLE_CLIENT, SAMPLE_PCAP
from tests.cli.commands import ENV, command, documents, run

#: A bound on every wait for a child: generous, never reached when all is well.
WAIT_S = 180


def temporaries(out: Path) -> list[Path]:
    """dcpfast's temporary files for the output ``out`` (``.NAME.dcpfast-PID-XXXX.tmp``
    beside it)."""
    return sorted(out.parent.glob(f".{out.name}.dcpfast-*.tmp"))


def _stopped(pid: int) -> None:
    """Wait until the process ``pid`` is stopped (or gone)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("T", "t", "Z", "X"):
            return
        time.sleep(0.001)
    raise AssertionError(f"process {pid} did not stop")


def _writing(outs: list[Path]) -> bool:
    """Whether every output has its temporary, the first one holding bytes already."""
    found = [temporaries(out) for out in outs]
    if not all(found):
        return False
    try:
        return any(p.stat().st_size for p in found[0])
    except FileNotFoundError:
        return False


def signalled_while_writing(args, outs: list[Path], signum: int) -> tuple[bool, object]:
    """Run dcpfast with ``args``; once it writes (its temporaries there, the first holding
    bytes), stop it, and if nothing was renamed into place yet, send ``signum``. (True,
    the process) when the signal came while it wrote; (False, it) when it ended first."""
    proc = subprocess.Popen(command(*args), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=ENV)
    try:
        deadline = time.monotonic() + WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            if _writing(outs):
                os.kill(proc.pid, signal.SIGSTOP)
                _stopped(proc.pid)
                caught = all(temporaries(out) for out in outs)
                if caught:
                    proc.send_signal(signum)
                os.kill(proc.pid, signal.SIGCONT)
                proc.wait(timeout=WAIT_S)
                return caught, proc
            time.sleep(0.001)
        proc.wait(timeout=WAIT_S)
        return False, proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Dumps big enough that their outputs take a while to write: by size (key, body)."""
    root = tmp_path_factory.mktemp("big")
    made: dict = {}

    def of(n: int, key: int, body: int) -> Path:
        if (n, key, body) not in made:
            made[n, key, body] = root / f"{n}-{key}-{body}.dcp"
            made[n, key, body].write_bytes(documents(n, key, body))
        return made[n, key, body]
    return of


def _changed(dump: Path) -> Path:
    """A dump beside ``dump`` with the same keys and other bodies, so that every document
    differs (both without a HELLO: their keys read alike)."""
    other = dump.with_name("changed-" + dump.name)
    if not other.exists():
        n, key, body = map(int, dump.stem.split("-"))
        other.write_bytes(documents(n, key, body + 1))
    return other


#: Each command that writes files: (its arguments given the input and the outputs, the
#: outputs' names, the sizes of input it is tried with, the arguments of a small run that
#: makes a previous output).
COMMANDS = {
    "state": (lambda dump, outs: ["state", dump, "-o", outs[0]], ["s.parquet"],
              (20000, 8, 2000), lambda outs: ["state", SAMPLE, "-o", outs[0]]),
    "convert": (lambda dump, outs: ["convert", "-q", dump, "-o", outs[0]], ["c.arrow"],
                (20000, 8, 2000), lambda outs: ["convert", SAMPLE, "-o", outs[0]]),
    "diff": (lambda dump, outs: ["diff", dump, _changed(dump), "-o", outs[0]], ["d.parquet"],
             (20000, 1000, 10), lambda outs: ["diff", SAMPLE, SAMPLE_CLIENT, "-o", outs[0]]),
    "report": (lambda dump, outs: ["report", dump, "--json", outs[0], "-o", outs[1]],
               ["r.json", "r.html"], (20000, 8, 10),
               lambda outs: ["report", SAMPLE_PCAP, "--json", outs[0], "-o", outs[1]]),
}


def _previous(name: str, outs: list[Path]) -> list[bytes]:
    """A previous good output of ``name``'s (from a small input), its bytes."""
    done = subprocess.run(command(*COMMANDS[name][3](outs)), capture_output=True, env=ENV,
                          timeout=WAIT_S)
    assert done.returncode in (0, 1), done.stderr           # diff: 1, they differ
    return [out.read_bytes() for out in outs]


def _whole(out: Path) -> bool:
    """Whether ``out`` is a whole output of its kind."""
    if out.suffix == ".parquet":
        return pq.read_metadata(out).num_rows >= 0
    if out.suffix == ".arrow":
        with pa.ipc.open_file(str(out)) as reader:
            return reader.num_record_batches >= 0
    if out.suffix == ".json":
        return isinstance(json.loads(out.read_text()), dict)
    return out.read_text().rstrip().endswith("</html>")


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("case", ["SIGKILL, first run", "SIGKILL over an output",
                                  "SIGTERM over an output"])
def test_a_command_killed_while_it_writes_leaves_the_previous_output(name, case, big,
                                                                     tmp_path):
    """SIGKILL (or SIGTERM) while the output is being written: the final name holds what it
    held before (nothing, or the previous output byte for byte), never a part; after
    SIGTERM no temporary is left, after SIGKILL the one left is swept by the next run."""
    if name == "report":
        pytest.importorskip("bokeh")
    arguments, names, (n, key, body), _ = COMMANDS[name]
    outs = [tmp_path / out for out in names]
    force = case != "SIGKILL, first run"
    before = _previous(name, outs) if force else [None] * len(outs)
    signum = signal.SIGKILL if case.startswith("SIGKILL") else signal.SIGTERM
    for attempt in range(4):             # a bigger input where the write ended too soon
        args = arguments(big(n << attempt, key, body), outs) + (["--force"] if force else [])
        caught, proc = signalled_while_writing(args, outs, signum)
        said = proc.stderr.read()
        assert b"Traceback" not in said, said
        kept = all(out.read_bytes() == data if data is not None else not out.exists()
                   for out, data in zip(outs, before))
        if caught and kept:
            break
        assert not caught or signum != signal.SIGKILL, "a killed run replaced the output"
        # it ended first, or SIGTERM came as the outputs were being renamed into place
        # (it waits for the renames): the outputs are then the new ones, whole
        assert proc.returncode in ((0, 1) if not caught else (-signum,)), said
        assert all(_whole(out) for out in outs)
        assert not [p for out in outs for p in temporaries(out)]
        for out, data in zip(outs, before):               # as it was before, and again
            if data is None:
                out.unlink()
            else:
                out.write_bytes(data)
    else:
        raise AssertionError(f"{name} never seen writing")
    assert proc.returncode == -signum, said
    left = [p for out in outs for p in temporaries(out)]
    if signum == signal.SIGTERM:
        assert not left
        return
    assert left                                          # what SIGKILL left, named as dcpfast's
    again = subprocess.run(command(*COMMANDS[name][3](outs), "--force"), capture_output=True,
                           env=ENV, timeout=WAIT_S)
    assert again.returncode in (0, 1), again.stderr
    assert not [p for out in outs for p in temporaries(out)]     # swept
    assert all(_whole(out) for out in outs)


def test_a_temporary_is_swept_only_when_its_process_is_gone(tmp_path):
    out = tmp_path / "s.parquet"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = tmp_path / f".s.parquet.dcpfast-{gone.pid}-0a1b2c3d.tmp"
    alive = tmp_path / f".s.parquet.dcpfast-{os.getpid()}-0a1b2c3d.tmp"  # a run going on
    other = tmp_path / f".t.parquet.dcpfast-{gone.pid}-0a1b2c3d.tmp"     # another output's
    for path in (stale, alive, other):
        path.write_bytes(b"part of a Parquet file")
    result = run("state", "--sample", "-o", out)
    assert result.exit_code == 0, result.output
    assert not stale.exists() and alive.exists() and other.exists()
    assert pq.read_metadata(out).num_rows > 0


@pytest.mark.parametrize("name", ["state", "convert"])
def test_the_output_keeps_its_mode_and_its_link(tmp_path, name):
    """Replacing an output (--force) keeps the file's permissions, and an output named
    through a symbolic link replaces the file it points to, the link kept."""
    target = tmp_path / "real.parquet"
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    result = run(name, "--sample", "-o", link, "--force")
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and pq.read_metadata(target).num_rows > 0
    assert target.stat().st_mode & 0o777 == 0o640
    assert not temporaries(target) and not temporaries(link)


def test_a_directory_that_cannot_be_written_is_found_before_the_work(tmp_path):
    """The temporary is made first: an output folder that is not there (or not writable)
    fails the command at once, naming the output."""
    out = tmp_path / "no" / "s.parquet"
    result = run("state", "--sample", "-o", out)
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {out}: {os.strerror(errno.ENOENT)}"


# -- report: the page and the JSON, all or none ----------------------------------------------


@pytest.mark.parametrize("previous", [False, True], ids=["first run", "over outputs"])
@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
                                     RuntimeError("the page failed")], ids=["OSError", "bug"])
def test_a_page_that_fails_leaves_neither_output(tmp_path, monkeypatch, failure, previous):
    from dcpfast.reporting.api import Report

    page, figures = tmp_path / "r.html", tmp_path / "r.json"
    if previous:
        page.write_bytes(b"the page before")
        figures.write_bytes(b"the figures before")

    def fails(self, path=None):
        Path(path).write_text("<html>half a page")
        raise failure
    monkeypatch.setattr(Report, "to_html", fails)
    result = run("report", SAMPLE_PCAP, "--json", figures, "-o", page, "--force")
    assert result.exit_code == 1
    if isinstance(failure, OSError):
        assert result.output.strip() == f"Error: {page}: {os.strerror(errno.ENOSPC)}"
    if previous:
        assert page.read_bytes() == b"the page before"
        assert figures.read_bytes() == b"the figures before"
    else:
        assert not page.exists() and not figures.exists()
    assert not temporaries(page) and not temporaries(figures)


def test_two_outputs_that_are_one_file_are_refused(tmp_path):
    """``-o X.html --json X.json`` where one names the other (a link, dangling or not, or a
    hard link): the JSON would be overwritten by the page."""
    page = tmp_path / "same.html"
    figures = tmp_path / "same.json"
    figures.symlink_to(page)                                  # dangling: page not there yet
    result = run("report", SAMPLE_PCAP, "-o", page, "--json", figures)
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {figures}: the same file as {page}: "
                                     "choose two outputs")
    assert not page.exists()
    page.write_bytes(b"kept")
    figures.unlink()
    os.link(page, figures)                                    # a hard link
    result = run("report", SAMPLE_PCAP, "-o", page, "--json", figures, "--force")
    assert result.exit_code == 1 and "the same file as" in result.output
    assert page.read_bytes() == b"kept"


# -- a standard output closed by its reader --------------------------------------------------


@pytest.mark.parametrize("args", [
    ["info", SAMPLE], ["info", SAMPLE, "--json"], ["head", SAMPLE], ["head", SAMPLE, "--json"],
    ["diff", SAMPLE, SAMPLE_CLIENT], ["diff", SAMPLE, SAMPLE],
    ["convert", SAMPLE, "-o", "-", "--format", "csv"],
    ["convert", SAMPLE, "-o", "-", "--format", "parquet", "--threads", "2"],
    ["state", SAMPLE, "-o", "{tmp}/s.parquet"], ["report", SAMPLE_PCAP, "--json", "{tmp}/r.json"],
], ids=lambda a: " ".join(Path(str(x)).name for x in a))
def test_a_closed_pipe_ends_the_command_by_sigpipe(args, tmp_path):
    """``dcpfast diff a b | head -1``: the reader gone, the command ends as the Unix tools
    do, by SIGPIPE (status 141 in a shell), silently: no error, no traceback."""
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in args]
    read, write = os.pipe()
    os.close(read)                                 # the reader is gone before any write
    try:
        done = subprocess.run(command(*args), stdout=write, stderr=subprocess.PIPE, env=ENV,
                              timeout=WAIT_S)
    finally:
        os.close(write)
    assert done.returncode == -signal.SIGPIPE, done.stderr
    assert done.stderr == b""
