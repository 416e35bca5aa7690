"""Dump files and streams: ``read`` maps a whole dump, ``iter_batches`` walks one in chunks.

Both take gzip, zstd and lz4 (frame format) dumps as well, recognised by their magic
numbers and decompressed as a stream (``io.compression``).
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from .. import packets
from .. import protocol as P
from ..batch import FrameBatch, byte_view, scan_view
from ..errors import DcpFormatError, text
from .compression import HEAD_BYTES, ChunkFile, DecodedStream, compression, open_stream, read_all
from .resume import Resume
from .sources import chunk_filler, read_filler, stream_filler

DEFAULT_BATCH_BYTES = 64 * 1024 * 1024
#: Bytes judged at least before ``collections=None`` is decided for a stream.
SNIFF_BYTES = 1024 * 1024
_DATA = Path(__file__).parent.parent / "data"
#: A small dump bundled with dcpfast, the server's side of a DCP conversation: four vbucket
#: streams with collections and durable writes (``dcpfast.testing.sample_files`` makes it).
SAMPLE = _DATA / "sample.dcp"
#: The client's side of the same conversation: HELLO, DCP Open, Controls, Stream Requests,
#: Noop responses and Buffer Acknowledgements.
SAMPLE_CLIENT = _DATA / "sample-client.dcp"
#: A pcap capture of the same conversation, both directions (``read_pcap``).
SAMPLE_PCAP = _DATA / "sample.pcap"


def read(path, *, collections: bool | None = None, columns=None, errors: str = "strict",
         max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE,
         binary_views: bool = False) -> FrameBatch:
    """Scan a whole dump file through a read-only memory map (no copy).

    The file is the complete stream: a frame cut short at its end is an error
    (``DcpFormatError``, or an entry in ``batch.errors`` with ``errors="skip"``).
    A gzip, zstd or lz4 file is decompressed into memory first; damaged compressed
    data is an error too (in skip mode: the stream ends there, and ``batch.errors``
    says so). A pcap or pcapng capture is refused (``DcpFormatError`` at byte 0, in
    either mode) with a pointer to ``read_pcap``. The options are those of ``scan``.
    """
    with open_stream(path, errors=errors) as stream:
        kind = capture_kind(stream.head)
        if kind is not None:
            raise DcpFormatError(0, text("capture_not_dump", kind=kind))
        info = os.fstat(stream.raw.fileno())
        if stream.codec is None and stat.S_ISREG(info.st_mode):
            data = mmap.mmap(stream.raw.fileno(), 0, access=mmap.ACCESS_READ) \
                if info.st_size else b""
        else:
            data = read_all(stream)                # compressed, a pipe or a device
        damage = stream.damage
    batch, _ = scan_view(data, byte_view(data), start=0, collections=collections,
                         columns=columns, errors=errors, max_frames=None,
                         max_frame_size=max_frame_size, base_offset=0, final=True,
                         binary_views=binary_views)
    if damage:
        batch.errors.append(damage)
    return batch


def capture_kind(head: bytes) -> str | None:
    """"pcap" or "pcapng" when ``head`` (the first bytes of a file) starts such a packet
    capture (``read_pcap`` reads them), else None."""
    if len(head) < 4:
        return None
    magic = int.from_bytes(head[:4], "little")
    if magic == packets.PCAPNG_SECTION:
        return "pcapng"
    if {magic, int.from_bytes(head[:4], "big")} & {packets.PCAP_MAGIC_US, packets.PCAP_MAGIC_NS}:
        return "pcap"
    return None


def is_capture(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a file) starts a pcap or pcapng capture."""
    return capture_kind(head) is not None


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
        view = byte_view(source)
    except TypeError:
        pass
    else:                                         # one buffer: a single chunk
        if compression(view[:HEAD_BYTES]) is None:
            yield from _batches(chunk_filler([view]), *options)
            return
        source = io.BytesIO(view)
    if isinstance(source, DecodedStream):         # already sniffed (and maybe decompressing)
        yield from _batches(stream_filler(source, batch_bytes), *options, stream=source)
    elif isinstance(source, (str, os.PathLike)) or hasattr(source, "readinto") \
            or hasattr(source, "read"):
        with open_stream(source, errors=errors) as stream:
            yield from _batches(stream_filler(stream, batch_bytes), *options, stream=stream)
    elif isinstance(source, Iterable):
        chunks, head = iter(source), list[memoryview]()
        while sum(len(part) for part in head) < HEAD_BYTES:   # enough bytes to sniff a codec
            chunk = next(chunks, None)
            if chunk is None:
                break
            head.append(byte_view(chunk))
        chunks = itertools.chain(head, chunks)
        if compression(b"".join(head)) is None:
            yield from _batches(chunk_filler(chunks), *options)
        else:
            with DecodedStream(ChunkFile(chunks), errors) as stream:
                yield from _batches(read_filler(stream), *options, stream=stream)
    else:
        raise TypeError(f"cannot read DCP frames from {type(source).__name__}")


def _batches(fill, batch_bytes, collections, columns, errors, max_frame_size, binary_views,
             stream=None):
    resume = Resume(collections=collections, columns=columns, errors=errors,
                    max_frame_size=max_frame_size, binary_views=binary_views)
    # an undecided collections setting is judged on the first MiB at least
    want = batch_bytes if collections is not None else max(batch_bytes, SNIFF_BYTES)
    while True:
        buf, eof = fill(resume.take_tail(), want)
        batch = resume.scan(buf, final=eof)
        if eof and stream is not None and stream.damage:
            batch.errors.append(stream.damage)
        if len(batch) or batch.errors:
            yield batch
        if eof:
            return
        want = max(batch_bytes, resume.needed())
        buf = batch = None                        # the caller alone decides how long it lives
