"""Files and streams: ``read`` maps a whole dump, ``iter_batches`` walks one in bounded chunks."""

from __future__ import annotations

import mmap
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from . import protocol as P
from .batch import FrameBatch, _byte_view, _scan, _core

DEFAULT_BATCH_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 1024 * 1024
#: A small dump bundled with dcpfast: four vbucket streams with collections and durable writes.
SAMPLE = Path(__file__).parent / "data" / "sample.dcp"


def read(path, *, collections: bool | None = None, columns=None, errors: str = "strict",
         max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> FrameBatch:
    """Scan a whole dump file through a read-only memory map (no copy).

    The file is the complete stream: a frame cut short at its end is an error
    (``DcpFormatError``, or an entry in ``batch.errors`` with ``errors="skip"``).
    """
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            data = f.read()                         # a pipe or device: no map possible
        else:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if info.st_size else b""
    return _scan(data, _byte_view(data), start=0, collections=collections, columns=columns,
                 errors=errors, max_frames=None, max_frame_size=max_frame_size,
                 base_offset=0, final=True)


def iter_batches(source, batch_bytes: int = DEFAULT_BATCH_BYTES, *,
                 collections: bool | None = None, columns=None, errors: str = "strict",
                 max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE) -> Iterator[FrameBatch]:
    """Yield batches over a whole stream, about ``batch_bytes`` of input each.

    ``source`` is a path, a binary file object, an iterable of byte chunks, or one
    buffer. Frames that straddle chunks are carried into the next batch; the input held
    at once stays near ``batch_bytes`` plus the largest frame (each batch owns its input
    bytes and about 175 bytes of columns per frame). Offsets are stream positions. With
    ``collections=None`` the choice is made on the first batch (at least 1 MiB) and kept.
    In skip mode the frames found are the same however the stream is chunked; a damaged
    region that spans two batches is reported by each of them.
    """
    if batch_bytes < 1:
        raise ValueError("batch_bytes must be positive")
    try:
        source = [_byte_view(source)]             # one buffer: a single chunk
    except TypeError:
        pass
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            yield from _batches(_file_chunks(f), batch_bytes, collections, columns, errors,
                                max_frame_size)
    elif hasattr(source, "readinto") or hasattr(source, "read"):
        yield from _batches(_file_chunks(source), batch_bytes, collections, columns, errors,
                            max_frame_size)
    elif isinstance(source, Iterable):
        yield from _batches(_iterable_chunks(source), batch_bytes, collections, columns,
                            errors, max_frame_size)
    else:
        raise TypeError(f"cannot read DCP frames from {type(source).__name__}")


def _file_chunks(f):
    """A filler that reads up to ``size`` bytes of ``f`` into a fresh buffer after ``tail``."""
    readinto = hasattr(f, "readinto")

    def fill(tail, size):
        buf = np.empty(len(tail) + size, np.uint8)
        buf[:len(tail)] = tail
        view, filled = memoryview(buf), len(tail)
        while filled < len(buf):
            if readinto:
                n = f.readinto(view[filled:])
            else:
                chunk = f.read(len(buf) - filled)
                n = len(chunk)
                buf[filled:filled + n] = np.frombuffer(chunk, np.uint8)
            if not n:
                return buf[:filled], True
            filled += n
        return buf, False
    return fill


def _iterable_chunks(chunks):
    """A filler that takes ``size`` new bytes from an iterable of chunks (split as needed)."""
    chunks = iter(chunks)
    rest = memoryview(b"")

    def fill(tail, size):
        nonlocal rest
        parts, got, eof = [tail], 0, False
        while got < size:
            if not rest:
                try:
                    rest = _byte_view(next(chunks))
                except StopIteration:
                    eof = True
                    break
            part, rest = rest[:size - got], rest[size - got:]
            parts.append(part)
            got += len(part)
        buf = np.empty(len(tail) + got, np.uint8)
        at = 0
        for part in parts:
            buf[at:at + len(part)] = np.frombuffer(part, np.uint8)
            at += len(part)
        return buf, eof
    return fill


def _batches(fill, batch_bytes, collections, columns, errors, max_frame_size):
    tail = np.empty(0, np.uint8)
    unverified = False
    # an undecided collections setting is judged on the first MiB at least
    base, want = 0, batch_bytes if collections is not None else max(batch_bytes, SNIFF_BYTES)
    while True:
        buf, eof = fill(tail, want)
        view = _byte_view(buf)
        if collections is None:
            collections = bool(_core.sniff_collections(view, 0))
        batch = _scan(buf, view, start=0, collections=collections, columns=columns,
                      errors=errors, max_frames=None, max_frame_size=max_frame_size,
                      base_offset=base, final=eof, unverified=unverified)
        unverified = batch._unverified
        if len(batch) or batch.errors:
            yield batch
        if eof:
            return
        tail = buf[batch.consumed:]
        base += batch.consumed
        want = max(batch_bytes, _frame_length(tail) - len(tail))


def _frame_length(head) -> int:
    """Length the header at the start of ``head`` announces (0 if there is none)."""
    if len(head) < P.HEADER_SIZE:
        return 0
    return P.HEADER_SIZE + int.from_bytes(bytes(head[8:12]), "big")
