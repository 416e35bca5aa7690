"""Where ``iter_batches`` gets its bytes: fillers over mapped files, reads and chunk iterables.

A filler is called as ``fill(tail, size)`` with the unconsumed end of the previous buffer
and returns ``(buffer, eof)``: a buffer that starts with ``tail`` and holds up to ``size``
new bytes, and whether the input ended.
"""

from __future__ import annotations

import io
import mmap
import os
import stat

import numpy as np

from ..batch import byte_view, recycled
from .compression import DecodedStream

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)   # drops a mapping's pages, not its data
#: Smallest ``batch_bytes`` for which ``iter_batches`` maps a regular file rather than read
#: it: a smaller window costs more to map than to copy, and a process has a limited number
#: of maps (each batch holds one).
MAP_MIN_BYTES = 1024 * 1024


def stream_filler(stream: DecodedStream, batch_bytes: int):
    """The filler for ``stream``: mapped windows when it is a plain regular file opened by
    ``open`` (whose descriptor and position are those of the bytes it reads) and batches
    are at least ``MAP_MIN_BYTES``, else reads."""
    plain = stream.plain_file()
    if plain is not None and batch_bytes >= MAP_MIN_BYTES:
        source, unread = plain
        if isinstance(source, (io.FileIO, io.BufferedReader, io.BufferedRandom)):
            try:
                fileno = source.fileno()
                if stat.S_ISREG(os.fstat(fileno).st_mode):
                    return mapped_filler(fileno, source.tell() - unread)
            except (OSError, ValueError):         # closed, or not seekable
                pass
    return read_filler(stream)


def mapped_filler(fileno: int, position: int):
    """A filler over a regular file from ``position``: each fill maps a read-only window
    from the start of ``tail`` (the unconsumed end of the previous window, so a frame cut
    by the window's end is whole in the next) to ``size`` bytes further. Nothing is copied;
    each batch keeps its own window, which is unmapped when the batch is dropped.

    When the next window is asked for, the loop is done with the previous batch as a rule:
    that window's pages are handed back to the page cache (they stay readable, and are
    faulted in again if touched), so a batch still held costs its columns, not its input.
    """
    end, previous = position, None

    def fill(tail, size):
        nonlocal end, previous
        if previous is not None and _DONTNEED is not None:
            previous.madvise(_DONTNEED)
        start = end - len(tail)
        total = os.fstat(fileno).st_size          # a file that grows is read on
        stop = min(end + size, total)
        if stop <= start:
            return tail, True
        low = start - start % mmap.ALLOCATIONGRANULARITY
        previous = mmap.mmap(fileno, stop - low, access=mmap.ACCESS_READ, offset=low)
        end = stop
        return memoryview(previous)[start - low:], stop >= total
    return fill


def read_filler(f):
    """A filler that reads up to ``size`` bytes of ``f`` into a fresh buffer after ``tail``."""

    def fill(tail, size):
        buf = recycled(len(tail) + size, np.uint8)
        buf[:len(tail)] = tail
        view, filled = memoryview(buf), len(tail)
        while filled < len(buf):
            n = f.readinto(view[filled:])
            if not n:
                return buf[:filled], True
            filled += n
        return buf, False
    return fill


def chunk_filler(chunks):
    """A filler that takes ``size`` new bytes from an iterable of chunks (split as needed)."""
    chunks = iter(chunks)
    rest = memoryview(b"")

    def fill(tail, size):
        nonlocal rest
        parts, got, eof = [tail], 0, False
        while got < size:
            if not rest:
                try:
                    rest = byte_view(next(chunks))
                except StopIteration:
                    eof = True
                    break
            part, rest = rest[:size - got], rest[size - got:]
            parts.append(part)
            got += len(part)
        buf = recycled(len(tail) + got, np.uint8)
        at = 0
        for part in parts:
            buf[at:at + len(part)] = np.frombuffer(part, np.uint8)
            at += len(part)
        return buf, eof
    return fill
