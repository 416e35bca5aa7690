"""Growing dumps read to frame boundaries, for the ``dcp`` stream reader
(``stream_reader``): the driver's walk over the frames of a file from a boundary
(``walk``: the scan core, offsets only), the frames of a range between two boundaries
read in a task as record batches (``read_range``), and the frames a stream has waited
long for the rest of (``Waiting``). Needs no pyspark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from .. import protocol as P
from ..io.resume import Resume, frame_length
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


#: How long a stream waits for the rest of a frame before it says so (once a frame).
WAIT_WARNING_SECONDS = 60.0

log = logging.getLogger("dcpfast.spark")


class Waiting:
    """The frame each file's stream waits for the rest of (the one its end cuts): once
    one has waited ``WAIT_WARNING_SECONDS`` (a writer cut off, or a header whose length
    is damage), one warning says so; what the stream reads does not change."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._since: dict[str, tuple[int, float, bool]] = {}    # at, since, said

    def look(self, uri: str, f, at: int, size: int) -> None:
        """The stream of ``uri`` (open as ``f``, ``size`` bytes long) stands at byte
        ``at``: a frame there whose end lies past ``size`` is waited for."""
        claimed = frame_length(bytes(f.read_at(P.HEADER_SIZE, at)))
        if not size - at < claimed:
            self._since.pop(uri, None)
            return
        seen = self._since.get(uri)
        if seen is None or seen[0] != at:
            self._since[uri] = (at, self.clock(), False)
            return
        since, said = seen[1], seen[2]
        waited = self.clock() - since
        if not said and waited >= WAIT_WARNING_SECONDS:
            log.warning("%s: the frame at byte %d claims %s bytes, %s of them written in "
                        "%.0f s: the stream waits for the rest (a writer cut off, or a "
                        "damaged length?)", uri, at, f"{claimed:,}", f"{size - at:,}", waited)
            self._since[uri] = (at, since, True)
