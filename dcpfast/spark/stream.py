"""Growing dumps read to frame boundaries, for the ``dcp`` stream reader
(``stream_reader``): the driver's walk over the frames of a file from a boundary
(``walk``: the scan core, offsets only), and the frames of a range between two
boundaries read in a task as record batches (``read_range``). Needs no pyspark.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..io.resume import Resume
from ..options import ScanOptions
from .convert import noted, reported, scanner_columns, to_record_batch
from .source import ReadOptions, filesystem, source_name


def walk(f, lo: int, limit: int, size: int, options: ScanOptions, *, unverified: bool,
         batch_bytes: int, progress: bool) -> tuple[list[tuple[int, bool]], bool | None]:
    """Walk the frames of ``f`` from ``lo`` (a frame boundary) up to ``limit``: the
    boundaries reached, one per scanned buffer (``(position, unverified)``, the first
    ``lo``, the last the end of the last complete frame), and the collections decision.

    ``progress``: when no whole frame fits before ``limit``, go on to the end of the first
    one (a limit below one frame's size still moves the stream)."""
    resume = Resume(options.but(columns=("offset",), threads=1), base=lo,
                    unverified=unverified)
    bounds = [(lo, unverified)]
    while True:
        reached = resume.reached
        room = min(limit, size)
        if progress and resume.base == lo:    # the first frame, whatever the limit
            held = len(resume.tail)
            want = resume.needed() or (max(24 - held, 0) if held < 24 else 0)
            room = min(size, max(room, reached + want))
        n = min(max(batch_bytes, resume.needed()), room - reached)
        if n <= 0:
            break
        buf = bytes(resume.take_tail()) + bytes(f.read_at(n, reached))
        resume.scan(buf, final=False)
        if resume.base != bounds[-1][0]:
            bounds.append((resume.base, resume.unverified))
    return bounds, resume.options.collections


def read_range(uri: str, lo: int, hi: int, collections: bool, unverified: bool,
               options: ReadOptions) -> Iterator:
    """Record batches of the frames in ``[lo, hi)`` of a file, both frame boundaries
    (found by the driver's walk)."""
    schema = options.schema
    names = scanner_columns(schema.names)
    scan_options = ScanOptions.of(collections=collections, columns=names,
                                  errors=options.errors, max_frame_size=options.max_frame_size)
    where = f"{uri} (bytes {lo} to {hi})"
    source = source_name(uri)

    def batches():
        resume = Resume(scan_options.but(threads=1), base=lo, unverified=unverified)
        store, path = filesystem(uri)
        with store.open_input_file(path) as f:
            while resume.reached < hi:
                reached = resume.reached
                n = min(options.batch_bytes, hi - reached)
                buf = bytes(resume.take_tail()) + bytes(f.read_at(n, reached))
                yield resume.scan(buf, final=reached + n >= hi)

    with noted(where):
        for fb in reported(batches(), where):
            if len(fb):
                yield to_record_batch(fb, source, schema, errors=options.errors)
