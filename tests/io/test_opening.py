"""An input opened once (``io.opening``), and every reading function of the API given a
real pipe's path (``/dev/fd/N``, as ``<(cat dump)`` names one) or a FIFO's: each reads it
exactly once and answers as for the regular file, a state's second pass included."""

from __future__ import annotations

import contextlib
import gzip
import io
import os

import pyarrow as pa
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.documents import consistency
from dcpfast.documents.output import metadata
from dcpfast.errors import DcpFormatError
from dcpfast.io import open_stream
from dcpfast.io.kinds import Kind, classify, rereadable
from dcpfast.io.opening import Spool, open_input
from tests.pipes import bounded, fifo, pipe
from tests.state_scenarios import scenario

DUMP = t.SAMPLE.read_bytes()
CAPTURE = t.SAMPLE_PCAP.read_bytes()
#: A dump whose streams restart: its state needs a second pass over the input.
RESTARTS = scenario(1, restarts=0.25)


@pytest.fixture(params=["pipe", "fifo"])
def piped(request, tmp_path):
    """A function giving the path of a pipe (``/dev/fd/N``) or a FIFO that holds the
    bytes it is given, written once; each ends with the test."""
    with contextlib.ExitStack() as held:
        def make(data: bytes, name: str = "input.fifo") -> str:
            if request.param == "pipe":
                return held.enter_context(pipe(data))[0]
            return held.enter_context(fifo(tmp_path, data, name))
        yield make


def test_rereadable(tmp_path):
    dump = tmp_path / "d.dcp"
    dump.write_bytes(b"")
    os.mkfifo(tmp_path / "f")
    assert rereadable(dump) and rereadable(tmp_path) and rereadable(tmp_path / "*.dcp")
    assert not rereadable(tmp_path / "f") and not rereadable("-")
    assert not rereadable("/dev/null")                     # a character device
    with pipe(b"") as (path, _):
        assert not rereadable(path)


def test_classify_never_opens_what_cannot_be_read_twice(tmp_path):
    """A FIFO without a writer would block an ``open``: classify looks at its entry only."""
    os.mkfifo(tmp_path / "f")
    found = bounded(classify, str(tmp_path / "f"))
    assert (found.kind, found.repeated) == (Kind.PATH, False)


def test_peek_gives_the_bytes_again():
    for data in (DUMP, gzip.compress(DUMP)):
        stream = open_stream(io.BytesIO(data))
        assert stream.peek(5000) == DUMP[:5000] == stream.peek(5000)
        assert stream.read(10) == DUMP[:10]
        assert stream.peek(10**9) == DUMP[10:]
        assert stream.read() == DUMP[10:]


def test_peek_defers_damaged_compressed_data_to_the_read_that_reaches_it():
    cut = gzip.compress(DUMP)[:-20]
    stream = open_stream(io.BytesIO(cut))
    head = stream.peek(10**9)
    assert head and DUMP.startswith(head)
    assert stream.read(len(head)) == head
    with pytest.raises(DcpFormatError):
        stream.read(1)
    skipping = open_stream(io.BytesIO(cut), errors="skip")
    assert skipping.peek(10**9) == head and skipping.read() == head
    assert skipping.damage is not None


def test_a_spool_keeps_what_it_read_and_reads_the_rest_when_replayed():
    spool = Spool(io.BytesIO(DUMP))
    assert spool.read(100) == DUMP[:100]
    with spool.replay() as again:
        assert again.read() == DUMP
    with spool.replay() as again:
        assert again.read() == DUMP
    spool.close()


def test_open_input_reads_a_pipe_once_and_again_from_what_it_kept(piped):
    path = piped(gzip.compress(DUMP))
    with open_input(path, again=True) as opened:
        assert opened.codec == "gzip" and opened.capture is None and opened.repeatable
        assert opened.stream.read() == DUMP
        opened.done()
        for _ in range(2):
            with opened.again() as stream:
                assert stream.read() == DUMP


def test_open_input_without_again_refuses_a_second_read(piped):
    with open_input(piped(CAPTURE)) as opened:
        assert opened.capture == "pcap" and not opened.repeatable
        assert opened.stream.read() == CAPTURE
        with pytest.raises(ValueError, match="cannot be read twice"):
            with opened.again():
                pass


def test_a_regular_file_is_opened_again_not_kept(tmp_path):
    dump = tmp_path / "d.dcp"
    dump.write_bytes(DUMP)
    with open_input(dump, again=True) as opened:
        assert opened.repeatable and opened._spool is None
        opened.done()
        assert opened.stream.closed
        with opened.again() as stream:
            assert stream.read() == DUMP


# -- the API on pipes ---------------------------------------------------------------------


def test_scan_read_and_iter_batches(piped):
    whole = dcpfast.read(t.SAMPLE).to_arrow()
    path = piped(DUMP)
    with pytest.raises(TypeError, match="dcpfast.read"):   # a buffer's reader: no path opened
        bounded(dcpfast.scan, path)
    assert bounded(dcpfast.read, path).to_arrow().equals(whole)
    batches = bounded(lambda: [b.to_arrow() for b in
                               dcpfast.iter_batches(piped(gzip.compress(DUMP), "z"), 4096)])
    assert pa.concat_tables(batches).equals(whole)


def test_state_makes_its_second_pass_over_what_it_kept(tmp_path, piped):
    """A dump whose restarts need a second pass: a pipe's path gives the state of the
    file, every vbucket restored, with processes too."""
    dump = tmp_path / "r.dcp"
    dump.write_bytes(RESTARTS)
    want = dcpfast.state(dump, errors="skip")
    read_once = dcpfast.state(iter(dcpfast.iter_batches(RESTARTS, 2000, errors="skip")),
                              errors="skip")
    assert metadata(read_once)["unrestored"], "the dump needs no second pass"
    for options in ({}, {"processes": 2}):
        got = bounded(dcpfast.state, piped(RESTARTS, f"r{len(options)}"), errors="skip",
                      **options)
        assert got.equals(want, check_metadata=True), options
        assert metadata(got)["unrestored"] == []
        assert all(consistency(got)["restored"].to_pylist())


def test_state_of_a_file_object_is_exact_too():
    want = dcpfast.state(RESTARTS, errors="skip")
    assert dcpfast.state(io.BytesIO(RESTARTS), errors="skip").equals(want,
                                                                      check_metadata=True)


def test_state_of_a_capture_on_a_pipe(piped):
    assert bounded(dcpfast.state, piped(CAPTURE)).equals(dcpfast.state(t.SAMPLE_PCAP),
                                                         check_metadata=True)


def test_diff_of_identical_inputs(tmp_path, piped):
    dump = tmp_path / "r.dcp"
    dump.write_bytes(RESTARTS)
    table = bounded(dcpfast.diff, piped(RESTARTS), dump, errors="skip")
    assert table.num_rows == 0


def _beside(folder, path: str, data: bytes) -> str:
    """A regular file of ``data`` whose name is that of ``path`` (a report names its
    inputs by their file names)."""
    os.makedirs(os.path.join(folder, "files"), exist_ok=True)
    regular = os.path.join(folder, "files", os.path.basename(path))
    with open(regular, "wb") as f:
        f.write(data)
    return regular


def test_report(tmp_path, piped):
    for data, name in ((DUMP, "d"), (gzip.compress(DUMP), "z"), (CAPTURE, "c")):
        path = piped(data, name)
        want = dcpfast.report(_beside(tmp_path, path, data)).figures
        assert want["frames"] > 0
        assert bounded(dcpfast.report, path).figures == want


def test_report_pairs_a_client_dump_on_a_pipe_with_its_server(tmp_path, piped):
    """Which side a dump holds is told from its first MiB, peeked at, not read."""
    client = t.SAMPLE_CLIENT.read_bytes()
    path = piped(client)
    want = dcpfast.report([_beside(tmp_path, path, client), t.SAMPLE]).figures
    assert [i["side"] for i in want["inputs"]] == ["client", "server"]
    assert bounded(dcpfast.report, [path, t.SAMPLE]).figures == want
