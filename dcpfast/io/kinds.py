"""What kind of source a reading function was given: a path (of a dump or of a capture), a
directory or a glob, a buffer, a file object, a batch, an iterable, a table; the one place
that tells them apart, and the one place that looks inside a path or a buffer to tell a
capture from a dump.

The order of the tests is the readers' own: a path before anything else, a buffer before
a file object (an ``mmap`` is both: its bytes are taken as they are), a batch before an
iterable.
"""

from __future__ import annotations

import enum
import os
import stat
import sys
from collections.abc import Iterable
from typing import NamedTuple

from ..batch import FrameBatch
from ..formats import capture_kind
from .compression import DecodedStream

#: Characters that make a path that names no file a glob pattern.
GLOB_CHARACTERS = frozenset("*?[")
#: Bytes of a path or a buffer looked at to tell a capture from a dump.
SNIFF_BYTES = 8


#: What starts and ends a Parquet file.
PARQUET_MAGIC = b"PAR1"


def is_parquet_path(path) -> bool:
    """Whether ``path`` names a regular file that starts and ends as a Parquet file does
    (a table, such as ``dcpfast state`` writes); a pipe's path is never opened here."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as f:
            if f.read(len(PARQUET_MAGIC)) != PARQUET_MAGIC:
                return False
            f.seek(-len(PARQUET_MAGIC), os.SEEK_END)
            return f.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC
    except (OSError, ValueError, TypeError):
        return False


def is_capture(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a file) starts a pcap or pcapng capture."""
    return capture_kind(head) is not None


class Kind(enum.Enum):
    """What a source is."""

    PATH = "path"                       #: a file's path: a dump (raw or compressed)
    CAPTURE_PATH = "capture path"       #: a pcap or pcapng capture's path
    DIRECTORY = "directory"             #: a directory: its files read as one stream
    GLOB = "glob"                       #: a glob pattern: the files it matches, likewise
    BUFFER = "buffer"                   #: a buffer in memory holding a dump
    CAPTURE_BUFFER = "capture buffer"   #: a buffer in memory holding a capture
    FILE = "file"                       #: a binary file object, read once as it comes
    CAPTURE_FILE = "capture file"       #: an opened stream whose first bytes start a capture
    BATCH = "batch"                     #: a ``FrameBatch``
    ITERABLE = "iterable"               #: of batches (``state``) or of chunks (``iter_batches``)
    TABLE = "table"                     #: a ``pyarrow.Table`` (a state ``diff`` is given)
    OTHER = "other"                     #: nothing dcpfast reads

    @property
    def path(self) -> bool:
        """Whether the source is named by a path (a file, a directory or a glob)."""
        return self in _PATHS

    @property
    def buffer(self) -> bool:
        """Whether the source is a buffer in memory."""
        return self in _BUFFERS

    @property
    def capture(self) -> bool:
        """Whether the source is known to be a pcap or pcapng capture."""
        return self in _CAPTURES


_PATHS = frozenset({Kind.PATH, Kind.CAPTURE_PATH, Kind.DIRECTORY, Kind.GLOB})
_BUFFERS = frozenset({Kind.BUFFER, Kind.CAPTURE_BUFFER})
_CAPTURES = frozenset({Kind.CAPTURE_PATH, Kind.CAPTURE_BUFFER, Kind.CAPTURE_FILE})


class Source(NamedTuple):
    """A source's ``kind``, and whether it can be ``repeated``: read a second time from
    its beginning (a path that is ``rereadable``, a buffer, a batch, a list or tuple; not
    a pipe's path, a file object or an iterator)."""

    kind: Kind
    repeated: bool


def classify(source, *, sniff: bool = True) -> Source:
    """What ``source`` is. With ``sniff``, a regular file's path is opened and its first
    bytes read to tell a capture from a dump (a path that cannot be read twice, a pipe's
    or a FIFO's, is never opened here: it is ``PATH``, not ``repeated``, and
    ``io.opening.open_input`` opens it once and sniffs the opened stream), a buffer's
    first bytes likewise,
    and an opened stream (``io.DecodedStream``) is judged by the bytes it sniffed already;
    without, nothing is read and a path is ``PATH``, a buffer ``BUFFER``, whatever they
    hold. Only the file system's entries are looked at to tell a directory and a glob."""
    if isinstance(source, (str, os.PathLike)):
        kind = _path_kind(source)
        again = kind is not Kind.PATH or rereadable(source)
        if sniff and again and kind is Kind.PATH and _is_capture_path(source):
            kind = Kind.CAPTURE_PATH
        return Source(kind, again)
    if _is_buffer(source):
        capture = sniff and is_capture(_head(source))
        return Source(Kind.CAPTURE_BUFFER if capture else Kind.BUFFER, True)
    if isinstance(source, FrameBatch):
        return Source(Kind.BATCH, True)
    if hasattr(source, "readinto") or hasattr(source, "read"):
        capture = sniff and isinstance(source, DecodedStream) and is_capture(source.head)
        return Source(Kind.CAPTURE_FILE if capture else Kind.FILE, False)
    arrow = sys.modules.get("pyarrow")      # not imported: no table can have been made
    if arrow is not None and isinstance(source, arrow.Table):
        return Source(Kind.TABLE, True)
    if isinstance(source, Iterable):
        return Source(Kind.ITERABLE, isinstance(source, (list, tuple)))
    return Source(Kind.OTHER, False)


def rereadable(path) -> bool:
    """Whether the input a path names can be read again from its start: a regular file, a
    block device, a directory or a glob (or a path that names nothing: opening it says
    why). A pipe (``<(cat dump)``, ``/dev/fd/N``), a FIFO, a character device, a socket
    and ``-`` (standard input, where a command takes it) give their bytes once."""
    text = os.fspath(path)
    if text in ("-", b"-"):
        return False
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError):
        return True
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISBLK(mode)


def _path_kind(path) -> Kind:
    """``DIRECTORY``, ``GLOB`` (a path that names nothing and holds a glob character) or
    ``PATH``."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if os.path.isdir(text):
        return Kind.DIRECTORY
    if not os.path.exists(text) and GLOB_CHARACTERS & set(text):
        return Kind.GLOB
    return Kind.PATH


def _is_capture_path(path) -> bool:
    """Whether the file at ``path`` starts a pcap or pcapng capture (an unreadable one does
    not: reading it says why)."""
    try:
        with open(path, "rb") as f:
            return is_capture(f.read(SNIFF_BYTES))
    except OSError:
        return False


def _is_buffer(source) -> bool:
    try:
        memoryview(source)
    except TypeError:
        return False
    return True


def _head(buffer) -> bytes:
    """The first bytes of ``buffer``."""
    view = memoryview(buffer)
    return view.tobytes()[:SNIFF_BYTES] if view.nbytes <= SNIFF_BYTES or not view.c_contiguous \
        else bytes(view.cast("B")[:SNIFF_BYTES])
