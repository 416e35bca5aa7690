"""Every command given a real pipe (``/dev/fd/N`` handed to the child process, as
``<(cat dump)`` does), a FIFO with a writer, or standard input: each reads it once and
says what it says of the regular file (the name aside), a state's second pass included;
none waits for ever (every child process has a time limit)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from dcpfast import testing as t
from dcpfast.documents.output import metadata
from tests.cli.commands import ENV
from tests.pipes import WAIT, fifo, pipe
from tests.state_scenarios import scenario

DUMP = t.SAMPLE.read_bytes()
CAPTURE = t.SAMPLE_PCAP.read_bytes()
#: A dump whose streams restart: its state needs a second pass over the input.
RESTARTS = scenario(1, restarts=0.25)


def command(*args, fds=(), stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """``dcpfast ARGS`` in a child process (``fds``: descriptors it inherits)."""
    return subprocess.run([sys.executable, "-m", "dcpfast", *map(str, args)],
                          capture_output=True, env=ENV, pass_fds=fds, timeout=WAIT,
                          input=stdin)


@pytest.fixture(params=["pipe", "fifo"])
def piped(request, tmp_path):
    """A function giving a pipe's path (``/dev/fd/N``) or a FIFO's that holds the bytes it
    is given, and the descriptors a child needs for it."""
    with contextlib.ExitStack() as held:
        def make(data: bytes, name: str = "input.fifo") -> tuple[str, tuple[int, ...]]:
            if request.param == "pipe":
                path, fd = held.enter_context(pipe(data))
                return path, (fd,)
            return held.enter_context(fifo(tmp_path, data, name)), ()
        yield make


def regular(folder, data: bytes, name: str) -> str:
    """A regular file of ``data`` named ``name`` (a pipe's or a FIFO's file name: the
    report names its inputs so), in a folder of its own."""
    os.makedirs(os.path.join(folder, "files"), exist_ok=True)
    path = os.path.join(folder, "files", name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def said(done: subprocess.CompletedProcess, name: str) -> str:
    """What a command printed, ``name`` (its input's, where given) replaced by
    ``INPUT``."""
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    out = (done.stdout + done.stderr).decode()
    return out.replace(name, "INPUT") if name else out


@pytest.mark.parametrize("packed", [False, True])
def test_info(tmp_path, piped, packed):
    data = gzip.compress(DUMP) if packed else DUMP
    path, fds = piped(data)
    want = said(command("info", regular(tmp_path, data, "d"), "--json"),
                regular(tmp_path, data, "d"))
    assert said(command("info", path, "--json", fds=fds), path) == want
    assert json.loads(want)[0]["frames"] == 1171


def test_info_of_a_capture(tmp_path, piped):
    path, fds = piped(CAPTURE)
    reference = regular(tmp_path, CAPTURE, "c")
    assert said(command("info", path, fds=fds), path) == said(command("info", reference),
                                                                reference)


def test_head(tmp_path, piped):
    path, fds = piped(DUMP)
    reference = regular(tmp_path, DUMP, "d")
    want = said(command("head", "-n", "50", reference), reference)
    assert said(command("head", "-n", "50", path, fds=fds), path) == want


def test_convert(tmp_path, piped):
    path, fds = piped(DUMP)
    said(command("convert", regular(tmp_path, DUMP, "d"), "-o", tmp_path / "a.parquet"), "")
    said(command("convert", path, "-o", tmp_path / "b.parquet", fds=fds), "")
    assert pq.read_table(tmp_path / "b.parquet").equals(pq.read_table(tmp_path / "a.parquet"))


@pytest.mark.parametrize("processes", [1, 2])
def test_state_reads_a_pipe_twice_from_what_it_kept(tmp_path, piped, processes):
    """The restarts need a second pass: over a pipe it is made over the first one's copy,
    and the table is the file's, every vbucket restored."""
    path, fds = piped(RESTARTS)
    reference = regular(tmp_path, RESTARTS, "r.dcp")
    options = ("--errors", "skip", "--processes", processes)
    said(command("state", reference, "-o", tmp_path / "a.parquet", *options), "")
    out = said(command("state", path, "-o", tmp_path / "b.parquet", *options, fds=fds), "")
    assert "may lack" not in out
    want = pq.read_table(tmp_path / "a.parquet")
    assert pq.read_table(tmp_path / "b.parquet").equals(want, check_metadata=True)
    assert metadata(want)["unrestored"] == []


def test_state_of_standard_input_is_exact(tmp_path):
    reference = regular(tmp_path, RESTARTS, "r.dcp")
    said(command("state", reference, "-o", tmp_path / "a.parquet", "--errors", "skip"), "")
    out = said(command("state", "-", "-o", tmp_path / "b.parquet", "--errors", "skip",
                       stdin=RESTARTS), "")
    assert "may lack" not in out
    assert pq.read_table(tmp_path / "b.parquet").equals(pq.read_table(tmp_path / "a.parquet"),
                                                        check_metadata=True)


def test_diff_of_identical_inputs(tmp_path, piped):
    reference = regular(tmp_path, RESTARTS, "r.dcp")
    path, fds = piped(RESTARTS)
    out = said(command("diff", path, reference, "--errors", "skip", fds=fds), "")
    assert out.rstrip().endswith("no differences")
    path, fds = piped(RESTARTS, "second.fifo")
    out = said(command("diff", reference, path, "--errors", "skip", fds=fds), "")
    assert out.rstrip().endswith("no differences")


@pytest.mark.parametrize("data", [DUMP, CAPTURE], ids=["dump", "capture"])
def test_report(tmp_path, piped, data):
    path, fds = piped(data)
    reference = regular(tmp_path, data, os.path.basename(path))
    said(command("report", reference, "--json", tmp_path / "a.json"), "")
    out = said(command("report", path, "--json", tmp_path / "b.json", fds=fds), "")
    want = json.loads((tmp_path / "a.json").read_text())
    assert want["frames"] > 0 and f"{want['frames']:,} frames" in out
    assert json.loads((tmp_path / "b.json").read_text()) == want


def test_report_of_standard_input(tmp_path):
    said(command("report", t.SAMPLE, "--json", tmp_path / "a.json"), "")
    said(command("report", "-", "--json", tmp_path / "b.json", stdin=DUMP), "")
    want = json.loads((tmp_path / "a.json").read_text())
    got = json.loads((tmp_path / "b.json").read_text())
    assert json.dumps(got).replace("<stdin>", "sample.dcp") == json.dumps(want)
