"""Dumps named by a directory or a glob: their files, in name order, read as one stream.

A dump rotated into pieces (``dump.000``, ``dump.001``...) is one stream cut at any byte:
read as ``cat`` would join them, a frame split across two pieces decodes whole. Each file
is decompressed on its own (a directory may mix plain and compressed pieces); offsets are
positions in the joined, decompressed stream. As ``pyarrow.dataset`` does, a directory is
walked recursively and names that start with ``.`` or ``_`` are passed over.
"""

from __future__ import annotations

import glob
import io
import os

from ..errors import DcpFormatError, SkippedRegion
from .compression import DecodedStream, open_stream
from .kinds import Kind, classify


def expand(source, kind: Kind | None = None) -> list[str] | None:
    """The files ``source`` names when it is a directory or a glob pattern (sorted by
    path), None when it is anything else (a file, a file object, a buffer...);
    ``FileNotFoundError`` when it names no file. ``kind``: what ``source`` is, where
    already known (``kinds.classify``)."""
    if kind is None:
        kind = classify(source, sniff=False).kind
    if kind not in (Kind.DIRECTORY, Kind.GLOB):
        return None
    path = os.fspath(source)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if kind is Kind.DIRECTORY:
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            found += [os.path.join(root, f) for f in files if not f.startswith((".", "_"))]
        found.sort()
    else:
        found = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
    if not found:
        raise FileNotFoundError(f"no dump files in {path}")
    return found


class FileChain(io.RawIOBase):
    """The DCP bytes of ``paths``, one after the other, each decompressed as
    ``open_stream`` does. In strict mode damaged compressed data raises
    ``DcpFormatError`` at its position in the joined stream, naming the file; in skip
    mode that file's stream ends there, the next file follows, and ``damages`` lists
    each break. ``starts``: the stream position where each file opened so far starts."""

    def __init__(self, paths: list[str], errors: str = "strict"):
        self.paths, self.errors = list(paths), errors
        self.damages: list[SkippedRegion] = []
        self.starts: list[int] = []
        self._at = 0                      # the next file to open
        self._stream: DecodedStream | None = None
        self._base = 0                    # stream position of the current file's start
        self._read = 0                    # bytes read from the current file

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        while True:
            if self._stream is None:
                if self._at == len(self.paths):
                    return 0
                self._stream = open_stream(self.paths[self._at], errors=self.errors)
                self.starts.append(self._base)
                self._at += 1
            try:
                n = self._stream.readinto(view)
            except DcpFormatError as e:
                error = DcpFormatError(self._base + e.offset, e.reason)
                error.add_note(f"in {self.paths[self._at - 1]}")
                raise error from None
            if n:
                self._read += n
                return n
            self._next_file()

    def _next_file(self) -> None:
        """Close the current file, keeping what broke it off (skip mode)."""
        assert self._stream is not None
        damage = self._stream.damage
        if damage is not None:
            self.damages.append(damage._replace(offset=self._base + damage.offset))
        self._stream.close()
        self._stream = None
        self._base += self._read
        self._read = 0

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        super().close()
