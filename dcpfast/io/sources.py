"""Where ``iter_batches`` gets its bytes: fillers over buffers, reads, chunk iterables and
(on request) mapped files.

A filler is called as ``fill(tail, size)`` with the unconsumed end of the previous buffer
and returns ``(buffer, eof)``: a buffer that starts with ``tail`` and holds up to ``size``
new bytes, and whether the input ended.

Files are read into memory by default, not mapped: a mapped file that another process
truncates kills the reading process with SIGBUS when a page past the new end is touched,
by the scan or by anything that reads a batch's bytes later. Reading copies the bytes
once; what a batch holds is then its own whatever happens to the file.
"""

from __future__ import annotations

import io
import mmap
import numbers
import os
import stat

import numpy as np

from ..buffers import byte_view, recycled
from ..threads import parts_for, run
from .compression import DecodedStream, read_into, zero_for

_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)   # drops a mapping's pages, not its data
#: Bytes a thread reads at least: a smaller read is one thread's.
READ_SHARE_BYTES = 4 << 20
#: Smallest ``batch_bytes`` for which ``iter_batches(..., memory_map=True)`` maps a regular
#: file rather than read it: a smaller window costs more to map than to copy, and a process
#: has a limited number of maps (each batch holds one).
MAP_MIN_BYTES = 1024 * 1024


def checked_size(name: str, value, minimum: int) -> int:
    """``value`` as a size of at least ``minimum``; ``ValueError`` for anything else
    (a float, a bool, NaN, a smaller number)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
            or value < minimum:
        raise ValueError(f"{name} must be an integer of at least {minimum}, not {value!r}")
    return int(value)


def view_filler(view):
    """A filler over one buffer in memory: each fill is a view of it, nothing copied."""
    end = 0

    def fill(tail, size):
        nonlocal end
        start = end - len(tail)
        end = min(end + size, len(view))
        return view[start:end], end == len(view)
    return fill


def regular_file(stream: DecodedStream):
    """The descriptor and position of the file under ``stream`` when it is a plain regular
    file opened by ``open`` (whose descriptor and position are those of the bytes it
    reads), else None."""
    plain = stream.plain_file()
    if plain is None:
        return None
    source, unread = plain
    if not isinstance(source, (io.FileIO, io.BufferedReader, io.BufferedRandom)):
        return None
    try:
        fileno = source.fileno()
        if stat.S_ISREG(os.fstat(fileno).st_mode):
            return fileno, source.tell() - unread
    except (OSError, ValueError):         # closed, or not seekable
        pass
    return None


def stream_filler(stream: DecodedStream, batch_bytes: int, *, mapped: bool = False,
                  threads: int = 1):
    """The filler for ``stream``: for a plain regular file, reads at positions by up to
    ``threads`` threads (``file_filler``), or with ``mapped`` mapped windows when batches
    are at least ``MAP_MIN_BYTES``; else reads of the stream."""
    found = regular_file(stream)
    if found is None:
        return read_filler(stream)
    if mapped and batch_bytes >= MAP_MIN_BYTES:
        return mapped_filler(*found)
    return file_filler(*found, threads=threads)


def read_at(fileno: int, buf, position: int, threads: int = 1) -> int:
    """Fill ``buf`` (a writable byte array) with the bytes of the file ``fileno`` from
    ``position``, by up to ``threads`` threads, each reading its share at its position;
    returns how many bytes were read before the first short share (a file that shrank)."""
    size = len(buf)
    shares = parts_for(size, threads, READ_SHARE_BYTES)
    cuts = [size * k // shares for k in range(shares + 1)]
    view = memoryview(buf)

    def share(k):
        def task():
            at, stop = cuts[k], cuts[k + 1]
            while at < stop:
                n = _pread_into(fileno, view[at:stop], position + at)
                if not n:
                    break
                at += n
            return at
        return task
    ends = run([share(k) for k in range(shares)], threads)
    for end, stop in zip(ends, cuts[1:]):
        if end < stop:
            return end
    return size


def _pread_into(fileno: int, view, position: int) -> int:
    """``os.preadv`` into ``view`` where the platform has it (no copy), else ``os.pread``."""
    if hasattr(os, "preadv"):
        return os.preadv(fileno, [view], position)
    data = os.pread(fileno, len(view), position)
    view[:len(data)] = data
    return len(data)


def file_filler(fileno: int, position: int, *, threads: int = 1):
    """A filler over a regular file from ``position``: each fill reads the next ``size``
    bytes into recycled memory after ``tail``, as far as the file goes when it is asked
    (a file that grows is read on, one that shrinks ends where it ends)."""
    end = position

    def fill(tail, size):
        nonlocal end
        total = os.fstat(fileno).st_size
        size = max(min(size, total - end), 0)
        buf = recycled(len(tail) + size, np.uint8)
        buf[:len(tail)] = tail
        got = read_at(fileno, buf[len(tail):], end, threads)
        end += got
        return buf[:len(tail) + got], got < size or end >= total
    return fill


def mapped_filler(fileno: int, position: int):
    """A filler over a regular file from ``position``: each fill maps a read-only window
    from the start of ``tail`` (the unconsumed end of the previous window, so a frame cut
    by the window's end is whole in the next) to ``size`` bytes further. Nothing is copied;
    each batch keeps its own window, which is unmapped when the batch is dropped.

    When the next window is asked for, the loop is done with the previous batch as a rule:
    that window's pages are handed back to the page cache (they stay readable, and are
    faulted in again if touched), so a batch still held costs its columns, not its input.
    A file truncated by another process while a window is mapped kills this process
    (SIGBUS) when the lost pages are touched: ``iter_batches`` maps only on request.
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
    """A filler that reads up to ``size`` bytes of ``f`` into recycled memory after
    ``tail`` (see ``read_into``)."""

    def fill(tail, size):
        buf = recycled(len(tail) + size, np.uint8)
        buf[:len(tail)] = tail
        view, filled = memoryview(buf), len(tail)
        zero_for(f, view[filled:])
        while filled < len(buf):
            n = read_into(f, view[filled:], zeroed=True)
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
