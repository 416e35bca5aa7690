"""What the scan core is asked and what it answers: named types instead of positional tuples.

Both scan cores (``cscan`` and its twin ``pyscan``) take a ``ScanRequest`` and return a
``ScanResult``. The core never raises for malformed input: it reports the first problem
of a strict scan in ``failure``, and ``batch`` turns that into ``DcpFormatError``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: Rows a scan reserves before it has measured the frames, when its first frames are no
#: guide: frames shorter than ``MIN_MEAN`` bytes on average would need more rows than the
#: input's size at that mean plus ``FIRST_ROWS``. The compiled core reserves so, and a
#: threaded scan (``io.threaded``) sizes the columns of a whole buffer by the same rule.
FIRST_ROWS = 65536
MIN_MEAN = 48


class ScanRequest(NamedTuple):
    """One scan of ``buf[start:]``."""

    #: Where in the buffer the scan starts.
    start: int
    #: The columns to fill (names of ``schema.NAMES``, in schema order).
    names: tuple[str, ...]
    #: Whether document keys start with a LEB128 collection id.
    collections: bool
    #: Step over damage (``errors="skip"``) instead of stopping at it.
    skip: bool
    #: Most frames to take; -1 for no limit.
    max_frames: int
    #: Frames longer than this (header included) are malformed.
    max_frame_size: int
    #: Stream position of ``buf[0]``, added to every offset.
    base: int
    #: No bytes follow the buffer: a frame cut short is damage.
    final: bool
    #: Skip mode: the frame at ``start`` was found by resynchronising at the end of the
    #: previous chunk and must still show a plausible frame after it.
    unverified: bool = False
    #: 0, or the log2 size of the data buffers of the Arrow binary views to write.
    view_bits: int = 0
    #: -1, or a position from which no frame is taken: the walk ends at the first frame
    #: boundary at or past it (a resynchronisation may still look beyond it).
    stop: int = -1


class ScanResult(NamedTuple):
    """What a scan found."""

    #: Frames decoded.
    frames: int
    #: End of the complete frames (where the next chunk resumes).
    consumed: int
    #: A numpy column for each requested name.
    arrays: dict[str, np.ndarray]
    #: The kind of each frame (an index into ``protocol.KINDS``).
    kinds: np.ndarray
    #: Skipped bytes as ``(start, length, code, a, b)`` (``code``: a ``protocol.Problem``).
    regions: list[tuple[int, int, int, int, int]]
    #: Skip mode: the frame at ``consumed`` awaits the resynchronisation checks.
    unverified: bool
    #: The binary-view structs of ``key`` and ``value`` (``(count, 16)`` uint8) when asked
    #: for and every value fits a data buffer, else None.
    views: dict[str, np.ndarray] | None
    #: The first problem of a strict scan as ``(position, code, a, b)``, else None; the
    #: other fields then describe no frames.
    failure: tuple[int, int, int, int] | None = None
