"""Compressed dumps and sniffed streams: gzip, zstd and lz4 recognised by magic number.

``open_stream`` gives the DCP bytes of a path or file object as a file object, its first
bytes kept for sniffing and, when they start a compressed container, decompressed as it
is read.
"""

from __future__ import annotations

import io
import os

import numpy as np

from ..buffers import byte_view
from ..errors import DcpFormatError, SkippedRegion, checked_mode, text

#: Magic numbers of the compressed containers read transparently, by codec name.
COMPRESSION_MAGIC = {"gzip": b"\x1f\x8b", "zstd": b"\x28\xb5\x2f\xfd", "lz4": b"\x04\x22\x4d\x18"}
_SKIPPABLE = 0x184D2A50          # zstd/lz4 skippable frame: magic 0x184D2A5X, 4-byte size (LE)
HEAD_BYTES = 64                  # bytes sniffed for a magic number
_PIECE = 128 * 1024              # decompressed bytes asked for at once
#: File objects whose ``readinto`` writes every byte it reports (dcpfast's own readers,
#: ``_Replayed`` and ``DecodedStream``, are added below their classes).
_TRUTHFUL_READERS: tuple[type, ...] = (io.FileIO, io.BufferedReader, io.BufferedRandom,
                                       io.BytesIO)


def codec_of(head: bytes | bytearray | memoryview) -> str | None:
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
    checked_mode(errors)
    if isinstance(source, (str, os.PathLike)):
        raw = open(source, "rb")
        try:
            return DecodedStream(raw, errors, owned=True)
        except BaseException:
            raw.close()
            raise
    if not (hasattr(source, "readinto") or hasattr(source, "read")):
        try:
            memoryview(source)
        except TypeError:
            raise TypeError(f"cannot read DCP frames from {type(source).__name__}") from None
        raise TypeError(text("read_buffer", kind=type(source).__name__))
    return DecodedStream(source, errors)


def read_into(f, view, *, zeroed: bool = False) -> int:
    """``f.readinto(view)`` (or ``f.read``) for a file object that may not tell the truth:
    the count it reports is checked against the buffer, and unless ``f`` is of a type known
    to write every byte it reports, ``view`` is zeroed first, so that memory ``f`` did not
    write never holds what an earlier scan left there. A caller that fills a buffer in a
    loop zeroes it once (``zero_for``) and passes ``zeroed=True``: zeroing the rest of it
    at every short read would cost the square of its size."""
    if not hasattr(f, "readinto"):
        data = f.read(len(view))
        n = len(data)
        if n > len(view):
            raise OSError(f"read() returned {n} bytes when {len(view)} were asked for")
        view[:n] = data
        return n
    if not zeroed:
        zero_for(f, view)
    n = f.readinto(view)
    if n is None:                                 # non-blocking, and no bytes ready
        return 0
    if not 0 <= n <= len(view):
        raise OSError(f"readinto() reported {n} bytes for a buffer of {len(view)}")
    return n


def zero_for(f, view) -> None:
    """Zero ``view`` unless ``f`` is known to write every byte it reports (``read_into``)."""
    if type(f) not in _TRUTHFUL_READERS and hasattr(f, "readinto"):
        np.frombuffer(view, np.uint8)[:] = 0


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
        zero_for(self._f, view)
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
        return read_into(self._f, b, zeroed=True)


class ChunkFile(io.RawIOBase):
    """A read-only file over an iterable of byte chunks."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._rest = memoryview(b"")

    def readable(self):
        return True

    def readinto(self, b):
        while not self._rest:
            try:
                self._rest = byte_view(next(self._chunks))
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
        n = read_into(f, view[got:], zeroed=True)       # a fresh bytearray is zeroed
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
        self.codec = codec_of(head)
        #: Where the decompressed stream broke off and why (skip mode), or None.
        self.damage: SkippedRegion | None = None
        self._source = _Replayed(head, raw)
        self._pending = memoryview(b"")
        self._position = 0
        self._decoder = None
        self._deferred: DcpFormatError | None = None      # met while peeking, raised after
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
        if self._deferred is not None and not self._pending:
            error, self._deferred = self._deferred, None
            raise error
        if not self._pending and self._decoder is not None and not self.damage:
            try:                                  # read1: a failure loses no earlier bytes;
                data = self._decoder.read1(_PIECE)    # always the same size, so what is
            except self._damaged as e:            # lost does not depend on the caller
                reason = text("damaged_compressed", codec=self.codec, error=e)
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

    def peek(self, size: int) -> bytes:
        """Up to ``size`` next bytes of the stream (fewer only at its end), which the next
        reads return again: a look at an input that cannot be read twice (a pipe) costs
        nothing of it. Damaged compressed data met on the way (strict mode) is raised by
        the read that reaches it, not here."""
        pieces, got = [], 0
        try:
            while got < size:
                piece = self.read(size - got)
                if not piece:
                    break
                pieces.append(piece)
                got += len(piece)
        except DcpFormatError as e:
            self._deferred = e
        data = b"".join(pieces)
        self._position -= len(data)
        if self._decoder is not None:
            self._pending = memoryview(data + bytes(self._pending))
        else:
            self._source = _Replayed(data, self._source)
        return data

    @property
    def raw(self):
        """The file object the stream reads from."""
        return self._raw

    def plain_file(self):
        """The file under an uncompressed stream and how many of its bytes were sniffed but
        not read again yet, as ``(file, unread)``; None for a compressed stream."""
        if self.codec is not None:
            return None
        source, unread = self._source, 0
        while isinstance(source, _Replayed):      # bytes sniffed but not yet read again
            unread += len(source._head)
            source = source._f
        return source, unread

    def close(self):
        if not self.closed:
            if self._decoder is not None:
                self._decoder.close()             # not the file it reads from
            if self._owned:
                self._raw.close()
        super().close()


_TRUTHFUL_READERS += (_Replayed, DecodedStream)
