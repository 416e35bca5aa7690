"""The one loop state that carries a scan across the chunks of a stream.

A stream read in chunks leaves, at the end of each chunk, an incomplete frame (the
*tail*, scanned again with the next chunk's bytes after it) and, in skip mode, perhaps a
frame found by resynchronising whose believability the next chunk decides (the
*unverified* flag). ``Resume`` holds both with the stream position of the tail, and
whether keys carry collection ids once that is decided. ``iter_batches``, the byte-range
reader of ``io.ranges`` and the capture reader each feed it their own chunks, and hand it
the function that scans a buffer (the core, or threads).
"""

from __future__ import annotations

import numpy as np

from .. import protocol as P
from ..batch import FrameBatch, Scanner, scan_view
from ..buffers import byte_view
from ..options import ScanOptions

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
    and keeps what the scan left for the next call. ``options.collections=None`` is
    decided on the first buffer scanned. ``scanner`` scans each buffer (None: the core,
    one thread).
    """

    def __init__(self, options: ScanOptions, *, base: int = 0, unverified: bool = False,
                 scanner: Scanner | None = None):
        #: The scan's options (``collections`` decided by the first scan).
        self.options = options
        #: Stream position of ``tail[0]``: where the next buffer starts.
        self.base = base
        #: The unconsumed end of the last buffer scanned (an incomplete frame).
        self.tail = _EMPTY
        #: Skip mode: the frame at ``base`` was found by resynchronising and awaits checks.
        self.unverified = unverified
        self.scanner = scanner

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
        options = self.options if errors is None else self.options.but(errors=errors)
        batch, self.unverified = scan_view(
            buf, byte_view(buf), options, max_frames=max_frames, base_offset=self.base,
            final=final, unverified=self.unverified, scanner=self.scanner)
        if self.options.collections is None:
            self.options = self.options.but(collections=batch.collections)
        self.tail = buf[batch.consumed:]
        self.base += batch.consumed
        return batch
