"""The entry points: ``scan`` decodes a buffer, ``read`` a whole dump, ``iter_batches``
walks one in chunks.

``read`` and ``iter_batches`` take gzip, zstd and lz4 (frame format) dumps as well,
recognised by their magic numbers and decompressed as a stream (``io.compression``).
All three decode a large buffer with threads (``io.threaded``).
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from .. import protocol as P
from ..batch import FrameBatch, scan_view
from ..buffers import byte_view, recycled
from ..errors import DcpFormatError, text
from ..options import SNIFF_BYTES, ScanOptions
from ..schema import arrow_schema
from .compression import HEAD_BYTES, ChunkFile, DecodedStream, codec_of, open_stream
from .files import FileChain, expand
from .kinds import Kind, capture_kind, classify
from .resume import Resume
from .sources import (
    checked_size,
    chunk_filler,
    read_at,
    read_filler,
    regular_file,
    stream_filler,
    view_filler,
)
from .threaded import scanner

DEFAULT_BATCH_BYTES = 64 * 1024 * 1024
#: The smallest ``batch_bytes``: a frame header.
MIN_BATCH_BYTES = P.HEADER_SIZE
#: The most bytes of DCP stream ``read`` decompresses (or reads from a pipe) by default.
DEFAULT_MAX_BYTES = 4 << 30
_FIRST_READ = 1 << 20           # bytes ``read`` first reserves for a stream of unknown size


def scan(data, *, collections: bool | None = None, columns=None, errors: str = "strict",
         start: int = 0, max_frames: int | None = None,
         max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, base_offset: int = 0,
         final: bool = False, binary_views: bool = False,
         threads: int | None = None) -> FrameBatch:
    """Decode the concatenated DCP frames in ``data[start:]`` into columns.

    ``data`` is any contiguous buffer; it is not copied, and the batch keeps it alive.
    A trailing incomplete frame is left alone: ``batch.consumed`` says where to resume.
    ``collections``: whether document keys carry a LEB128 collection id (None: infer
    from a HELLO exchange, a DCP Open flag, or system events / seqno-advanced messages).
    ``columns``: the columns to fill (None: all; ``"key"``/``"value"`` name their
    offset/length pairs). ``errors="strict"`` raises ``DcpFormatError`` at the first
    malformed frame; ``"skip"`` steps over damaged bytes and lists them in
    ``batch.errors``. ``base_offset`` is the stream position of ``data[0]``: it is added
    to every offset column and error offset. ``final=True`` says ``data`` ends the
    stream: a frame cut short there is damage, and skip mode may rely on the end of the
    data when it resynchronises (otherwise it stops where more bytes would decide).
    ``binary_views=True`` also writes the Arrow views of keys and values (those the columns
    include) while each frame is in cache, so ``to_arrow(binary_view=True)`` and
    ``to_polars()`` need no pass of their own over the data (the scan takes up to a fifth
    longer; the conversion then costs a few per cent of the scan instead of about half).
    ``threads``: how many threads decode a large buffer (None: the cores this process may
    use; see ``dcpfast.io.threaded``); the batch is the same whatever the number.
    """
    options = ScanOptions.of(collections=collections, columns=columns, errors=errors,
                             max_frame_size=max_frame_size, binary_views=binary_views,
                             threads=threads)
    batch, _ = scan_view(data, byte_view(data), options, start=start, max_frames=max_frames,
                         base_offset=base_offset, final=final,
                         scanner=scanner(options.threads))
    return batch


def read(path, *, collections: bool | None = None, columns=None, errors: str = "strict",
         max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, binary_views: bool = False,
         threads: int | None = None, memory_map: bool = False,
         max_bytes: int | None = DEFAULT_MAX_BYTES) -> FrameBatch:
    """Scan a whole dump file (or the files of a directory or a glob, in name order, read
    as one stream: ``io.files``), read into memory.

    The file is the complete stream: a frame cut short at its end is an error
    (``DcpFormatError``, or an entry in ``batch.errors`` with ``errors="skip"``).
    A regular file is read as it is when ``read`` opens it: if another process shortens
    it meanwhile, the batch holds what was read. ``memory_map=True`` maps the file instead
    of copying it (no copy, nothing resident but what is read); then the batch reads the
    file itself, and a file truncated by another process while the batch is alive kills
    this process with SIGBUS when its lost pages are touched (by ``to_arrow()``, ``key()``,
    ``values()``...). A gzip, zstd or lz4 file is decompressed into memory first, and a
    pipe or device read to its end: at most ``max_bytes`` of DCP stream (None: no limit),
    beyond which ``ValueError`` points to ``iter_batches``, which reads any size in
    bounded memory. Damaged compressed data is an error too (in skip mode: the stream ends
    there, and ``batch.errors`` says so). A pcap or pcapng capture is refused
    (``DcpFormatError`` at byte 0, in either mode) with a pointer to ``read_pcap``. The
    other options are those of ``scan``; ``threads`` read and decode a large file in
    parallel.
    """
    if max_bytes is not None:
        max_bytes = checked_size("max_bytes", max_bytes, 0)
    options = ScanOptions.of(collections=collections, columns=columns, errors=errors,
                             max_frame_size=max_frame_size, binary_views=binary_views,
                             threads=threads)
    files = expand(path)
    source = path if files is None else FileChain(files, errors)
    with open_stream(source, errors=errors) as stream:
        capture = capture_kind(stream.head)
        if capture is not None:
            raise DcpFormatError(0, text("capture_not_dump", kind=capture))
        found = regular_file(stream)
        if found is not None and memory_map:
            data = _mapped(*found)
        elif found is not None:
            data = _read_file(*found, threads=options.threads)
        else:
            data = _read_stream(stream, max_bytes)  # compressed, a pipe or a device
        damage = _damages(stream, source)
    batch, _ = scan_view(data, byte_view(data), options, final=True,
                         scanner=scanner(options.threads))
    batch.errors.extend(damage)
    return batch


def _mapped(fileno: int, position: int):
    """The file from ``position``, mapped read-only (empty bytes for an empty file)."""
    size = os.fstat(fileno).st_size
    if size <= position:
        return b""
    return memoryview(mmap.mmap(fileno, 0, access=mmap.ACCESS_READ))[position:]


def _read_file(fileno: int, position: int, *, threads: int):
    """The regular file from ``position`` to its size now, read into recycled memory (what
    there is, if the file is shortened meanwhile)."""
    size = max(os.fstat(fileno).st_size - position, 0)
    buf = recycled(size, np.uint8)
    return buf[:read_at(fileno, buf, position, threads)]


def _read_stream(stream: DecodedStream, max_bytes: int | None):
    """Everything left in ``stream``, read into recycled memory that grows as it fills;
    ``ValueError`` past ``max_bytes``."""
    limit = None if max_bytes is None else max_bytes + 1      # one byte more tells
    buf, filled = recycled(_FIRST_READ if limit is None else min(_FIRST_READ, limit),
                           np.uint8), 0
    while True:
        if filled == len(buf):
            if limit is not None and filled >= limit:
                raise ValueError(f"the stream holds more than max_bytes={max_bytes:,} "
                                 "bytes: read it in bounded memory with iter_batches, or "
                                 "pass a larger max_bytes (None: no limit)")
            size = 2 * len(buf) if limit is None else min(2 * len(buf), limit)
            grown = recycled(size, np.uint8)
            grown[:filled] = buf
            buf = grown
        n = stream.readinto(buf.data[filled:])
        if not n:
            return buf[:filled]
        filled += n


def iter_batches(source, batch_bytes: int = DEFAULT_BATCH_BYTES, *,
                 collections: bool | None = None, columns=None, errors: str = "strict",
                 max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
                 binary_views: bool = False, threads: int | None = None,
                 memory_map: bool = False) -> Batches:
    """Yield batches over a whole stream, about ``batch_bytes`` of input each; the
    iterator is also an Arrow stream of their tables (``Batches``).

    ``source`` is a path, a directory or a glob (its files in name order, read as one
    stream: ``io.files``), a binary file object, an iterable of byte chunks, or one buffer.
    Frames that straddle chunks are carried into the next batch. Each batch owns its input
    bytes (a view of the buffer when ``source`` is one) and about 175 bytes of columns per
    frame (32 more with ``binary_views``); while a batch is held the next one is read, so
    the memory in use stays near twice that (see docs/usage.md for the bound, threads and
    the recycled memory included). A regular file is read, not mapped, so that another
    process changing it cannot harm a batch; ``memory_map=True`` maps it instead, through
    read-only windows, one per batch (no copy; a window's pages leave the process when the
    next batch is asked for, and are faulted in again from the page cache if the batch is
    read later; a file truncated meanwhile kills the process with SIGBUS when a lost page
    is touched). Offsets are stream positions. With ``collections=None`` the choice is
    made on the first batch (at least 1 MiB) and kept. In skip mode the frames found are
    the same however the stream is chunked; a damaged region that spans two batches is
    reported by each of them. A source that starts with a gzip, zstd or lz4 magic number
    is decompressed as it is read (offsets are then positions in the decompressed
    stream); see ``open_stream`` for damaged data. ``threads`` decode each large batch
    (and read it from a regular file) in parallel; batches come in stream order.
    """
    batch_bytes = checked_size("batch_bytes", batch_bytes, MIN_BATCH_BYTES)
    options = ScanOptions.of(collections=collections, columns=columns, errors=errors,
                             max_frame_size=max_frame_size, binary_views=binary_views,
                             threads=threads)
    kind = classify(source, sniff=False).kind     # read once: nothing looked at before
    return Batches(_walk(source, kind, expand(source, kind), batch_bytes, options,
                         memory_map), options)


def _walk(source, kind: Kind, files, batch_bytes: int, options: ScanOptions,
          memory_map: bool) -> Iterator[FrameBatch]:
    """``iter_batches``' batches (``kind``: what ``source`` is; ``files``: those of a
    directory or glob ``source``)."""
    threads, errors = options.threads, options.errors
    if kind.buffer:                               # one buffer: views of it, no copy
        view = byte_view(source)
        if codec_of(view[:HEAD_BYTES]) is None:
            yield from _batches(view_filler(view), batch_bytes, options)
            return
        source, kind = io.BytesIO(view), Kind.FILE
    if files is not None:                         # a directory or a glob: one stream
        source = FileChain(files, errors)
        with open_stream(source, errors=errors) as stream:
            yield from _batches(read_filler(stream), batch_bytes, options, stream=stream,
                                chain=source)
    elif isinstance(source, DecodedStream):       # already sniffed (and maybe decompressing)
        yield from _batches(stream_filler(source, batch_bytes, mapped=memory_map,
                                          threads=threads), batch_bytes, options, stream=source)
    elif kind.path or kind is Kind.FILE:
        with open_stream(source, errors=errors) as stream:
            yield from _batches(stream_filler(stream, batch_bytes, mapped=memory_map,
                                              threads=threads), batch_bytes, options,
                                stream=stream)
    elif kind in (Kind.ITERABLE, Kind.BATCH):     # chunks (a batch is no chunk: refused)
        chunks, head = iter(source), list[memoryview]()
        while sum(len(part) for part in head) < HEAD_BYTES:   # enough bytes to sniff a codec
            chunk = next(chunks, None)
            if chunk is None:
                break
            head.append(byte_view(chunk))
        chunks = itertools.chain(head, chunks)
        if codec_of(b"".join(head)) is None:
            yield from _batches(chunk_filler(chunks), batch_bytes, options)
        else:
            with DecodedStream(ChunkFile(chunks), errors) as stream:
                yield from _batches(read_filler(stream), batch_bytes, options, stream=stream)
    else:
        raise TypeError(f"cannot read DCP frames from {type(source).__name__}")


class Batches(Iterator[FrameBatch]):
    """The batches ``iter_batches`` yields, in stream order; also an Arrow C stream of their
    ``to_arrow()`` tables (``pa.RecordBatchReader.from_stream(batches)``, DuckDB, polars),
    with the projection's ``schema`` known before the first batch is read: a dump larger
    than memory streams into them in bounded memory. Either way the batches are read once.
    """

    def __init__(self, batches: Iterator[FrameBatch], options: ScanOptions):
        self._batches = batches
        self._columns = options.columns

    @property
    def schema(self):
        """The Arrow schema of the stream: ``dcpfast.arrow_schema`` of the columns scanned
        (pyarrow is imported only when asked for)."""
        return arrow_schema(self._columns)

    def __iter__(self) -> Batches:
        return self

    def __next__(self) -> FrameBatch:
        return next(self._batches)

    def close(self) -> None:
        """Stop reading (the source is closed)."""
        self._batches.close()              # type: ignore[attr-defined]

    def __arrow_c_stream__(self, requested_schema=None):
        reader = pa.RecordBatchReader.from_batches(self.schema, _record_batches(self))
        return reader.__arrow_c_stream__(requested_schema)


def _record_batches(batches: Batches):
    """The Arrow record batches of ``batches`` in their stream's schema (a batch whose
    keys or values pass 2 GiB, which ``to_arrow`` makes ``large_binary``, is cut)."""
    schema = batches.schema
    for batch in batches:
        yield from _fitting(batch, schema)


def _fitting(batch: FrameBatch, schema):
    if len(batch) > 1 and not batch.schema.equals(schema):
        half = len(batch) // 2
        yield from _fitting(batch[:half], schema)
        yield from _fitting(batch[half:], schema)
        return
    yield from batch.to_arrow().to_batches()


def _damages(stream: DecodedStream, source) -> list:
    """Where the decompressed data of ``stream`` (and of each file of a ``FileChain``
    ``source``) broke off in skip mode."""
    chain = source if isinstance(source, FileChain) else stream.raw   # one opened elsewhere
    found = list(chain.damages) if isinstance(chain, FileChain) else []
    return found + ([stream.damage] if stream.damage else [])


def _batches(fill, batch_bytes: int, options: ScanOptions, stream=None, chain=None):
    resume = Resume(options, scanner=scanner(options.threads))
    # an undecided collections setting is judged on the first MiB at least
    want = batch_bytes if options.collections is not None else max(batch_bytes, SNIFF_BYTES)
    while True:
        buf, eof = fill(resume.take_tail(), want)
        batch = resume.scan(buf, final=eof)
        if eof and stream is not None:
            batch.errors.extend(_damages(stream, chain))
        if len(batch) or batch.errors:
            yield batch
        if eof:
            return
        want = max(batch_bytes, resume.needed())
        del buf, batch                            # the caller alone decides how long it lives
