"""What kind of source a reader was given (``io.kinds.classify``): every kind, what can be
read twice, and that nothing is read without ``sniff``."""

from __future__ import annotations

import io
import os
import pathlib

import numpy as np
import pyarrow as pa
import pytest

import dcpfast
from dcpfast import testing as t
from dcpfast.io import open_stream
from dcpfast.io.kinds import Kind, classify

DUMP = t.SAMPLE.read_bytes()
CAPTURE = t.SAMPLE_PCAP.read_bytes()


def kind(source, **options) -> tuple[Kind, bool]:
    found = classify(source, **options)
    return found.kind, found.repeated


def test_paths(tmp_path):
    dump = tmp_path / "dump.dcp"
    dump.write_bytes(DUMP)
    pcap = tmp_path / "trace.pcap"
    pcap.write_bytes(CAPTURE)
    assert kind(str(dump)) == kind(dump) == (Kind.PATH, True)
    assert kind(pathlib.PurePath(dump)) == (Kind.PATH, True)
    assert kind(pcap) == (Kind.CAPTURE_PATH, True)
    assert kind(pcap, sniff=False) == (Kind.PATH, True)
    assert kind(tmp_path) == kind(str(tmp_path)) == (Kind.DIRECTORY, True)
    assert kind(str(tmp_path / "*.dcp")) == (Kind.GLOB, True)
    assert kind(tmp_path / "missing.dcp") == (Kind.PATH, True)   # reading it says why
    odd = tmp_path / "a[1].dcp"                 # a file whose name holds a glob character
    odd.write_bytes(DUMP)
    assert kind(odd) == (Kind.PATH, True)
    assert all(k.path for k in (Kind.PATH, Kind.CAPTURE_PATH, Kind.DIRECTORY, Kind.GLOB))
    assert Kind.CAPTURE_PATH.capture and not Kind.PATH.capture


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_is_never_opened_and_not_repeated(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)                 # opening it to read would wait for a writer for ever
    assert kind(fifo, sniff=False) == kind(fifo) == (Kind.PATH, False)


def test_buffers():
    assert kind(DUMP) == kind(bytearray(DUMP)) == kind(memoryview(DUMP)) == \
        kind(np.frombuffer(DUMP, np.uint8)) == (Kind.BUFFER, True)
    assert kind(CAPTURE) == kind(bytearray(CAPTURE)) == (Kind.CAPTURE_BUFFER, True)
    assert kind(CAPTURE, sniff=False) == (Kind.BUFFER, True)
    assert kind(b"") == kind(CAPTURE[:3]) == (Kind.BUFFER, True)
    strided = np.repeat(np.frombuffer(CAPTURE[:64], np.uint8), 2)[::2]   # not contiguous
    assert kind(strided) == (Kind.CAPTURE_BUFFER, True)
    assert Kind.BUFFER.buffer and Kind.CAPTURE_BUFFER.buffer and not Kind.FILE.buffer


def test_file_objects(tmp_path):
    path = tmp_path / "dump.dcp"
    path.write_bytes(DUMP)
    with open(path, "rb") as f:
        assert kind(f) == (Kind.FILE, False)
        assert f.tell() == 0                                   # nothing read
    assert kind(io.BytesIO(CAPTURE)) == (Kind.FILE, False)     # a stream is not sniffed
    with open_stream(io.BytesIO(CAPTURE)) as stream:           # but one already sniffed is
        assert kind(stream) == (Kind.CAPTURE_FILE, False)
        assert kind(stream, sniff=False) == (Kind.FILE, False)
    with open_stream(io.BytesIO(DUMP)) as stream:
        assert kind(stream) == (Kind.FILE, False)


def test_batches_and_the_rest():
    batch = dcpfast.scan(DUMP)
    assert kind(batch) == (Kind.BATCH, True)
    assert kind([batch, batch]) == kind((batch,)) == (Kind.ITERABLE, True)
    assert kind(dcpfast.iter_batches(DUMP)) == (Kind.ITERABLE, False)
    assert kind(b for b in [batch]) == (Kind.ITERABLE, False)
    assert kind(pa.table({"a": [1]})) == (Kind.TABLE, True)
    assert kind(42) == kind(None) == (Kind.OTHER, False)


def test_the_readers_follow_it(tmp_path):
    """``state`` takes each kind as ``classify`` says: a capture's path as a capture, a
    capture's buffer refused, a directory as one stream; it reads again what can be read
    twice, and a file object from what its first read kept."""
    from dcpfast.documents import StateBuilder
    from dcpfast.documents.feeding import fed

    reading = dict(collections=None, batch_bytes=1 << 20, threads=1)

    def again(source):
        with fed(StateBuilder(), source, "strict", reading) as found:
            return found
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "0.dcp").write_bytes(DUMP)
    want = dcpfast.state(DUMP)
    assert dcpfast.state(tmp_path / "d").equals(want)
    assert dcpfast.state(str(tmp_path / "d" / "*.dcp")).equals(want)
    assert dcpfast.state(t.SAMPLE_PCAP).num_rows == want.num_rows
    with pytest.raises(ValueError, match="read_pcap"):
        dcpfast.state(CAPTURE)
    assert again(DUMP) is not None
    assert again([dcpfast.scan(DUMP)]) is not None
    assert again(io.BytesIO(DUMP)) is not None         # kept as it is read
    assert again(iter([dcpfast.scan(DUMP)])) is None
