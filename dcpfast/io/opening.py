"""Opening an input once: a path (or an opened file) opened one time, sniffed from the
opened stream, handed on with the sniffed bytes put back, and read a second time from
what the first read kept where the input cannot be read twice.

A pipe (``<(cat dump)``, ``/dev/fd/N``), a FIFO, a character device and standard input
give their bytes once: whatever looks at their start and then opens them again sees the
rest, nothing, or (a FIFO) waits for ever for a writer. So every reader that must tell a
capture from a dump, or must read an input twice (a state's second pass over the
documents a restart made current again), opens it here: ``open_input`` gives one
``Input`` whose ``stream`` is the (decompressed) bytes, first ones sniffed and read again,
and whose ``again`` reads them once more: a file that can be read twice is opened again;
one that cannot is read from a ``Spool``, the unnamed temporary file (in ``TMPDIR``) that
kept every byte the first read took, compressed as it came.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterator
from typing import Any

from .compression import DecodedStream, open_stream, read_into
from .files import FileChain, expand
from .kinds import capture_kind, rereadable

#: Bytes a ``Spool`` copies at once when it reads the rest of its input itself.
_COPY_BYTES = 1 << 20


class Spool(io.RawIOBase):
    """A reader of the file ``f`` that keeps every byte it reads in an unnamed temporary
    file, so that the input can be read again (``replay``) after ``f`` is gone."""

    def __init__(self, f):
        self._f = f
        self._copy = tempfile.TemporaryFile()
        self._ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        n = read_into(self._f, view)
        if n:
            self._copy.write(view[:n])
        elif len(view):
            self._ended = True
        return n

    def replay(self):
        """A binary file of every byte of the input from its start: what was read, and
        the rest of the input, read (and kept) now."""
        if not self._ended:
            buf = bytearray(_COPY_BYTES)
            while self.readinto(buf):
                pass
        self._copy.flush()
        fileno = self._copy.fileno()
        os.lseek(fileno, 0, os.SEEK_SET)
        return open(os.dup(fileno), "rb")           # a regular file: read at positions

    def close(self) -> None:
        if not self.closed:
            self._copy.close()
        super().close()


class Input:
    """One input opened once: its ``stream`` (decompressed, first bytes sniffed and read
    again), whether it is a ``capture`` (``"pcap"``, ``"pcapng"`` or None), its ``codec``
    and, when opened with ``again``, the same bytes once more (``again``)."""

    def __init__(self, source, raw, stream: DecodedStream, spool: Spool | None,
                 errors: str, files: list[str] | None = None):
        self._source, self._raw, self._spool, self._errors = source, raw, spool, errors
        #: The files of a directory or glob ``source``, read as one stream; else None.
        self.files = files
        self.stream = stream
        #: "pcap" or "pcapng" where the input is a packet capture, else None (DCP frames).
        self.capture = capture_kind(stream.head)
        #: The codec the input was compressed with, or None.
        self.codec = stream.codec

    @property
    def repeatable(self) -> bool:
        """Whether ``again`` can read the input once more."""
        return self._spool is not None or _reopened(self._source)

    def done(self) -> None:
        """The first read is over: a file that ``again`` opens anew is closed now (so that
        inputs held for a second pass hold no file each); a spool is kept."""
        if self._spool is None and _reopened(self._source):
            self.stream.close()
            self._raw.close()

    @contextlib.contextmanager
    def again(self) -> Iterator[DecodedStream]:
        """The input's bytes once more, from its start: the path opened again, or what
        the spool kept. ``ValueError`` for an input opened without ``again`` that cannot
        be read twice."""
        if self._spool is not None:
            with self._spool.replay() as raw, DecodedStream(raw, self._errors) as stream:
                yield stream
        elif self.files is not None:
            with FileChain(self.files, self._errors) as chain, \
                    open_stream(chain, errors=self._errors) as stream:
                yield stream
        elif _reopened(self._source):
            with open_stream(self._source, errors=self._errors) as stream:
                yield stream
        else:
            raise ValueError("an input that cannot be read twice (a pipe, a FIFO, standard "
                             "input, a file object) was read once already")


def _reopened(source) -> bool:
    """Whether ``source`` is a path (or a list of paths: pieces) that can be opened and
    read again."""
    if isinstance(source, (list, tuple)):
        return all(_reopened(piece) for piece in source)
    return isinstance(source, (str, os.PathLike)) and rereadable(source)


def _files(source) -> list[str] | None:
    """The files read as one stream: a directory's or a glob's (``expand``), or those of
    a list of pieces in the order given (each one a file, or a directory or glob
    expanded); None for one file or a file object."""
    if isinstance(source, (list, tuple)):
        return [f for piece in source for f in expand(piece) or [os.fsdecode(piece)]]
    return expand(source) if isinstance(source, (str, os.PathLike)) else None


@contextlib.contextmanager
def open_input(source, *, errors: str = "strict", again: bool = False) -> Iterator[Input]:
    """``source`` (a path, or a binary file object read from where it is) opened once, as
    an ``Input``; a directory or a glob is its files read as one stream (``io.files``: a
    rotated dump, a frame cut across two pieces read whole), and so is a list of paths
    (the pieces of one dump, in the order given); a directory of captures, or pieces of
    them, is an ``IsADirectoryError``. With ``again``, an input that cannot be read twice
    (a pipe's or a FIFO's path, a device, a file object) is kept in a ``Spool`` as it is
    read, for ``Input.again``; a path that can be read twice is opened again instead."""
    with contextlib.ExitStack() as held:
        path = isinstance(source, (str, os.PathLike))
        files = _files(source)
        raw: Any
        if files is not None:                   # a directory or a glob: one stream
            raw = held.enter_context(FileChain(files, errors))
        else:
            raw = held.enter_context(open(source, "rb")) if path else source
        spool = None
        if again and not _reopened(source):
            raw = spool = held.enter_context(Spool(raw))
        stream = held.enter_context(open_stream(raw, errors=errors))
        if files is not None and capture_kind(stream.head) is not None:
            what = "a directory" if path else "pieces"
            raise IsADirectoryError(f"{what} of packet captures: give each capture, "
                                    "they are read one by one")
        yield Input(source, raw, stream, spool, errors, files)
