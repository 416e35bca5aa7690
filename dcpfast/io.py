"""Files and streams: ``read`` maps a whole dump, ``iter_batches`` walks one in bounded chunks.

Both take gzip, zstd and lz4 (frame format) dumps as well, recognised by their magic
numbers and decompressed as a stream.
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from . import protocol as P
from .batch import FrameBatch, _byte_view, _core, _recycled, _scan
from .errors import DcpFormatError, SkippedRegion

DEFAULT_BATCH_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 1024 * 1024
#: A small dump bundled with dcpfast: four vbucket streams with collections and durable writes.
SAMPLE = Path(__file__).parent / "data" / "sample.dcp"
#: Magic numbers of the compressed containers read transparently, by codec name.
COMPRESSION_MAGIC = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd", "lz4": b"\x04\x22\x4d\x18"}
_SKIPPABLE = 0x184D2A50          # zstd/lz4 skippable frame: magic 0x184D2A5X, 4-byte size (LE)
HEAD_BYTES = 64                  # bytes sniffed for a magic number
_DRAIN = 1024 * 1024
_PIECE = 128 * 1024              # decompressed bytes asked for at once
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)   # drops a mapping's pages, not its data
#: Smallest ``batch_bytes`` for which ``iter_batches`` maps a regular file rather than read
#: it: a smaller window costs more to map than to copy, and a process has a limited number
#: of maps (each batch holds one).
MAP_MIN_BYTES = 1024 * 1024


def compression(head: bytes) -> str | None:
    """The codec ("gzip", "zstd" or "lz4") whose magic number starts ``head``, or None.

    Leading skippable frames (zstd and lz4 share them; pzstd writes one first) are
    stepped over. DCP frames never start with one of these bytes.
    """
    head, at = bytes(head), 0
    while len(head) - at >= 8 and int.from_bytes(head[at:at + 4], "little") & ~0xF == _SKIPPABLE:
        at += 8 + int.from_bytes(head[at + 4:at + 8], "little")
    for codec, magic in COMPRESSION_MAGIC.items():
        if head[at:at + len(magic)] == magic:
            return codec
    return None


def open_stream(source, *, errors: str = "strict") -> DecodedStream:
    """A binary reader of the bytes of ``source`` (a path or a binary file object),
    decompressed when they start with a gzip, zstd or lz4 magic number.

    The reader's ``head`` holds its first bytes (for sniffing; they are read again),
    ``codec`` the codec found, or None. Damaged compressed data (corrupt or cut short)
    raises ``DcpFormatError`` at the decompressed position with ``errors="strict"``;
    with ``"skip"`` the stream ends there and ``damage`` records it.
    """
    if errors not in ("strict", "skip"):
        raise ValueError(f"errors must be 'strict' or 'skip', not {errors!r}")
    if isinstance(source, (str, os.PathLike)):
        raw = open(source, "rb")
        try:
            return DecodedStream(raw, errors, owned=True)
        except BaseException:
            raw.close()
            raise
    if not (hasattr(source, "readinto") or hasattr(source, "read")):
        raise TypeError(f"cannot read DCP frames from {type(source).__name__}")
    return DecodedStream(source, errors)


class _Replayed(io.RawIOBase):
    """A read-only file that returns ``head`` first, then reads on from ``f``. A read
    fills the buffer unless ``f`` ends, so what a decompressor sees does not depend on how
    ``f`` hands out its bytes.

    While ``recorded`` is a list, the bytes read are also kept in it.
    """

    def __init__(self, head: bytes, f):
        self._head = memoryview(head)
        self._f = f
        self.recorded: list[bytes] | None = None

    def readable(self):
        return True

    def readinto(self, b):
        view, n = memoryview(b).cast("B"), 0
        while n < len(view):
            got = self._read_some(view[n:])
            if not got:
                break
            n += got
        if self.recorded is not None:
            self.recorded.append(bytes(view[:n]))
        return n

    def _read_some(self, b) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        if hasattr(self._f, "readinto"):
            return self._f.readinto(b) or 0
        data = self._f.read(len(b))
        b[:len(data)] = data
        return len(data)


class _Chunks(io.RawIOBase):
    """A read-only file over an iterable of byte chunks."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._rest = memoryview(b"")

    def readable(self):
        return True

    def readinto(self, b):
        while not self._rest:
            try:
                self._rest = _byte_view(next(self._chunks))
            except StopIteration:
                return 0
        n = min(len(b), len(self._rest))
        b[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


def _read_head(f, size: int) -> bytes:
    """Up to ``size`` first bytes of ``f`` (fewer only at its end)."""
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        if hasattr(f, "readinto"):
            n = f.readinto(view[got:])
        else:
            part = f.read(size - got)
            n = len(part)
            view[got:got + n] = part
        if not n:
            break
        got += n
    return bytes(buf[:got])


def _decompressor(codec: str, f):
    """A file object decompressing ``f``, and the exceptions that mean damaged data."""
    if codec == "gzip":
        import gzip
        import zlib
        return gzip.GzipFile(fileobj=f, mode="rb"), (EOFError, gzip.BadGzipFile, zlib.error)
    if codec == "zstd":
        try:
            from compression import zstd
        except ImportError:                      # Python < 3.14
            from backports import zstd
        return zstd.ZstdFile(f, mode="rb"), (EOFError, zstd.ZstdError)
    import lz4.frame
    return lz4.frame.LZ4FrameFile(f, mode="rb"), (EOFError, RuntimeError)


class DecodedStream(io.RawIOBase):
    """The DCP bytes of a file object: itself, or its decompressed content (see ``open_stream``)."""

    def __init__(self, raw, errors: str = "strict", *, owned: bool = False):
        self._raw, self._owned, self._errors = raw, owned, errors
        head = _read_head(raw, HEAD_BYTES)
        #: The codec of the compressed input ("gzip", "zstd", "lz4"), or None.
        self.codec = compression(head)
        #: Where the decompressed stream broke off and why (skip mode), or None.
        self.damage: SkippedRegion | None = None
        self._source = _Replayed(head, raw)
        self._pending = memoryview(b"")
        self._position = 0
        self._decoder = None
        if self.codec:
            source = self._source
            source.recorded = []
            self._decoder, self._damaged = _decompressor(self.codec, source)
            decoded = _read_head(self, HEAD_BYTES)
            consumed, source.recorded = source.recorded, None
            if self.damage and not decoded:       # skip mode, nothing decompresses at all:
                self._decoder.close()             # the bytes are taken as they are
                self._source = _Replayed(b"".join(consumed), source)
                self.codec = self.damage = self._decoder = None
            else:                                 # read again: the head, then the rest
                head = decoded                    # of the piece it was decoded from
                self._pending = memoryview(head + bytes(self._pending))
            self._position = 0
        #: The first bytes of the (decompressed) stream; reading starts with them again.
        self.head = head

    def readable(self):
        return True

    def readinto(self, b):
        if not self._pending and self._decoder is not None and not self.damage:
            try:                                  # read1: a failure loses no earlier bytes;
                data = self._decoder.read1(_PIECE)    # always the same size, so what is
            except self._damaged as e:            # lost does not depend on the caller
                reason = f"damaged {self.codec} data: {e}"
                if self._errors == "strict":
                    raise DcpFormatError(self._position, reason) from None
                self.damage = SkippedRegion(self._position, 0, reason)
                return 0
            self._pending = memoryview(data)
        if self._pending:
            n = min(len(b), len(self._pending))
            b[:n] = self._pending[:n]
            self._pending = self._pending[n:]
        elif self._decoder is None:
            n = self._source.readinto(b) or 0
        else:
            return 0
        self._position += n
        return n

    def close(self):
        if not self.closed:
            if self._decoder is not None:
                self._decoder.close()             # not the file it reads from
            if self._owned:
                self._raw.close()
        super().close()


def _read_all(stream: DecodedStream) -> bytes:
    """Everything left in ``stream``, read in large pieces."""
    parts = []
    while chunk := stream.read(_DRAIN):
        parts.append(chunk)
    return b"".join(parts)


def read(path, *, collections: bool | None = None, columns=None, errors: str = "strict",
         max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
         binary_views: bool = False) -> FrameBatch:
    """Scan a whole dump file through a read-only memory map (no copy).

    The file is the complete stream: a frame cut short at its end is an error
    (``DcpFormatError``, or an entry in ``batch.errors`` with ``errors="skip"``).
    A gzip, zstd or lz4 file is decompressed into memory first; damaged compressed
    data is an error too (in skip mode: the stream ends there, and ``batch.errors``
    says so). The options are those of ``scan``.
    """
    with open_stream(path, errors=errors) as stream:
        info = os.fstat(stream._raw.fileno())
        if stream.codec is None and stat.S_ISREG(info.st_mode):
            data = mmap.mmap(stream._raw.fileno(), 0, access=mmap.ACCESS_READ) \
                if info.st_size else b""
        else:
            data = _read_all(stream)                # compressed, a pipe or a device
        damage = stream.damage
    batch = _scan(data, _byte_view(data), start=0, collections=collections, columns=columns,
                  errors=errors, max_frames=None, max_frame_size=max_frame_size,
                  base_offset=0, final=True, binary_views=binary_views)
    if damage:
        batch.errors.append(damage)
    return batch


def iter_batches(source, batch_bytes: int = DEFAULT_BATCH_BYTES, *,
                 collections: bool | None = None, columns=None, errors: str = "strict",
                 max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
                 binary_views: bool = False) -> Iterator[FrameBatch]:
    """Yield batches over a whole stream, about ``batch_bytes`` of input each.

    ``source`` is a path, a binary file object, an iterable of byte chunks, or one buffer.
    Frames that straddle chunks are carried into the next batch; the input held at once
    stays near ``batch_bytes`` plus the largest frame (each batch owns its input bytes and
    about 175 bytes of columns per frame, 32 more with ``binary_views``). A plain regular
    file is read through read-only memory-mapped windows, one per batch, so nothing is
    copied; a window's pages leave the process when the next batch is asked for, and are
    faulted in again from the page cache if the batch is read later. Offsets are stream
    positions. With ``collections=None`` the choice is made on the first batch (at least 1
    MiB) and kept. In skip mode the frames found are the same however the stream is chunked;
    a damaged region that spans two batches is reported by each of them. A source that
    starts with a gzip, zstd or lz4 magic number is decompressed as it is read (offsets are
    then positions in the decompressed stream); see ``open_stream`` for damaged data.
    """
    if batch_bytes < 1:
        raise ValueError("batch_bytes must be positive")
    options = (batch_bytes, collections, columns, errors, max_frame_size, binary_views)
    try:
        view = _byte_view(source)
    except TypeError:
        pass
    else:                                         # one buffer: a single chunk
        if compression(view[:HEAD_BYTES]) is None:
            yield from _batches(_iterable_chunks([view]), *options)
            return
        source = io.BytesIO(view)
    if isinstance(source, DecodedStream):         # already sniffed (and maybe decompressing)
        yield from _batches(_stream_chunks(source, batch_bytes), *options, stream=source)
    elif isinstance(source, (str, os.PathLike)) or hasattr(source, "readinto") \
            or hasattr(source, "read"):
        with open_stream(source, errors=errors) as stream:
            yield from _batches(_stream_chunks(stream, batch_bytes), *options, stream=stream)
    elif isinstance(source, Iterable):
        chunks, head = iter(source), []
        while sum(map(len, head)) < HEAD_BYTES:   # enough leading bytes to sniff a codec
            chunk = next(chunks, None)
            if chunk is None:
                break
            head.append(_byte_view(chunk))
        chunks = itertools.chain(head, chunks)
        if compression(b"".join(head)) is None:
            yield from _batches(_iterable_chunks(chunks), *options)
        else:
            with DecodedStream(_Chunks(chunks), errors) as stream:
                yield from _batches(_file_chunks(stream), *options, stream=stream)
    else:
        raise TypeError(f"cannot read DCP frames from {type(source).__name__}")


def _stream_chunks(stream: DecodedStream, batch_bytes: int):
    """The filler for ``stream``: mapped windows when it is a plain regular file opened by
    ``open`` (whose descriptor and position are those of the bytes it reads) and batches
    are at least ``MAP_MIN_BYTES``, else reads."""
    if stream.codec is None and batch_bytes >= MAP_MIN_BYTES:
        source, unread = stream._source, 0
        while isinstance(source, _Replayed):      # bytes sniffed but not yet read again
            unread += len(source._head)
            source = source._f
        if isinstance(source, (io.FileIO, io.BufferedReader, io.BufferedRandom)):
            try:
                fileno = source.fileno()
                if stat.S_ISREG(os.fstat(fileno).st_mode):
                    return _mapped_chunks(fileno, source.tell() - unread)
            except (OSError, ValueError):         # closed, or not seekable
                pass
    return _file_chunks(stream)


def _mapped_chunks(fileno: int, position: int):
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


def _file_chunks(f):
    """A filler that reads up to ``size`` bytes of ``f`` into a fresh buffer after ``tail``."""

    def fill(tail, size):
        buf = _recycled(len(tail) + size, np.uint8)
        buf[:len(tail)] = tail
        view, filled = memoryview(buf), len(tail)
        while filled < len(buf):
            n = f.readinto(view[filled:])
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
        buf = _recycled(len(tail) + got, np.uint8)
        at = 0
        for part in parts:
            buf[at:at + len(part)] = np.frombuffer(part, np.uint8)
            at += len(part)
        return buf, eof
    return fill


def _batches(fill, batch_bytes, collections, columns, errors, max_frame_size, binary_views,
             stream=None):
    tail = np.empty(0, np.uint8)
    unverified = False
    # an undecided collections setting is judged on the first MiB at least
    base, want = 0, batch_bytes if collections is not None else max(batch_bytes, SNIFF_BYTES)
    while True:
        buf, eof = fill(tail, want)
        tail = None                               # its bytes are in ``buf`` now
        view = _byte_view(buf)
        if collections is None:
            collections = bool(_core.sniff_collections(view, 0))
        batch = _scan(buf, view, start=0, collections=collections, columns=columns,
                      errors=errors, max_frames=None, max_frame_size=max_frame_size,
                      base_offset=base, final=eof, unverified=unverified,
                      binary_views=binary_views)
        unverified = batch._unverified
        if eof and stream is not None and stream.damage:
            batch.errors.append(stream.damage)
        if len(batch) or batch.errors:
            yield batch
        if eof:
            return
        tail = buf[batch.consumed:]
        base += batch.consumed
        want = max(batch_bytes, _frame_length(tail) - len(tail))
        buf = view = batch = None                 # the caller alone decides how long it lives


def _frame_length(head) -> int:
    """Length the header at the start of ``head`` announces (0 if there is none)."""
    if len(head) < P.HEADER_SIZE:
        return 0
    return P.HEADER_SIZE + int.from_bytes(bytes(head[8:12]), "big")
