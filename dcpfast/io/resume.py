"""The one loop state that carries a scan across the chunks of a stream.

A stream read in chunks leaves, at the end of each chunk, an incomplete frame (the
*tail*, scanned again with the next chunk's bytes after it) and, in skip mode, perhaps a
frame found by resynchronising whose believability the next chunk decides (the
*unverified* flag). ``Resume`` holds both with the stream position of the tail, and
whether keys carry collection ids once that is decided. ``iter_batches``, the byte-range
reader of ``io.ranges`` and the capture reader each feed it their own chunks.
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch, byte_view, scan_view

_EMPTY = np.empty(0, np.uint8)


def frame_length(head) -> int:
    """Length the header at the start of ``head`` announces (0 if there is none)."""
    if len(head) < P.HEADER_SIZE:
        return 0
    return P.HEADER_SIZE + int.from_bytes(bytes(head[8:12]), "big")


class Resume:
    """Scan state between chunks: ``tail``, its stream position ``base``, ``unverified``.

    ``scan(buf, final=...)`` takes a buffer that starts with the tail (at stream position
    ``base``) and continues with the chunk's new bytes; it returns the batch of its frames
    and keeps what the scan left for the next call. ``collections=None`` is decided on the
    first buffer scanned.
    """

    def __init__(self, *, collections: bool | None, columns, errors: str,
                 max_frame_size: int, binary_views: bool = False, base: int = 0,
                 unverified: bool = False, threads: int = 1):
        self.collections = collections
        self.columns = columns
        self.errors = errors
        self.max_frame_size = max_frame_size
        self.binary_views = binary_views
        #: Stream position of ``tail[0]``: where the next buffer starts.
        self.base = base
        #: The unconsumed end of the last buffer scanned (an incomplete frame).
        self.tail = _EMPTY
        #: Skip mode: the frame at ``base`` was found by resynchronising and awaits checks.
        self.unverified = unverified
        #: Threads that decode a large buffer (``batch.scan``).
        self.threads = threads

    @property
    def reached(self) -> int:
        """Stream position of the end of the bytes held (``base`` plus the tail)."""
        return self.base + len(self.tail)

    def needed(self) -> int:
        """Bytes the frame at the start of the tail lacks (0 when unknown or whole)."""
        return max(frame_length(self.tail) - len(self.tail), 0)

    def take_tail(self):
        """The tail, released here: the next buffer holds its bytes."""
        tail, self.tail = self.tail, _EMPTY
        return tail

    def restart(self, base: int, *, unverified: bool = True) -> None:
        """Drop the tail and go on at stream position ``base`` (after a gap in the stream)."""
        self.tail, self.base, self.unverified = _EMPTY, base, unverified

    def scan(self, buf, *, final: bool, max_frames: int | None = None,
             errors: str | None = None) -> FrameBatch:
        """The frames of ``buf`` (the tail, then new bytes); ``final``: the stream ends
        with it. ``errors`` overrides the error mode for this one scan."""
        batch, self.unverified = scan_view(
            buf, byte_view(buf), start=0, collections=self.collections,
            columns=self.columns, errors=self.errors if errors is None else errors,
            max_frames=max_frames, max_frame_size=self.max_frame_size, base_offset=self.base,
            final=final, unverified=self.unverified, binary_views=self.binary_views,
            threads=self.threads)
        self.collections = batch.collections
        self.tail = buf[batch.consumed:]
        self.base += batch.consumed
        return batch
