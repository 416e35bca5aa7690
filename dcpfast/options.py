"""``ScanOptions``: what every scan of one stream is asked, checked once where a caller
gives it and then handed down whole (to chunked reads, byte ranges, captures, threads)."""

from __future__ import annotations

import dataclasses
import numbers

from . import protocol as P
from . import schema as S
from .errors import checked_mode
from .threads import threads_of

#: Bytes of a stream judged at least before ``collections=None`` is decided for it.
SNIFF_BYTES = 1024 * 1024
_LARGEST_FRAME = P.HEADER_SIZE + 0xFFFFFFFF   # the body length is 32 bits


@dataclasses.dataclass(frozen=True)
class ScanOptions:
    """The options of ``dcpfast.scan`` that hold for a whole stream.

    ``collections``: whether keys carry a LEB128 collection id (None: decided on the
    stream's first bytes); ``columns``: the scanner columns, in schema order;
    ``errors``: ``"strict"`` or ``"skip"``; ``max_frame_size``: the largest frame taken;
    ``binary_views``: whether the scan writes Arrow views of keys and values;
    ``threads``: how many threads decode a large buffer.
    """

    collections: bool | None = None
    columns: tuple[str, ...] = S.NAMES
    errors: str = "strict"
    max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE
    binary_views: bool = False
    threads: int = 1

    @classmethod
    def of(cls, *, collections: bool | None = None, columns=None, errors: str = "strict",
           max_frame_size: int = P.DEFAULT_MAX_FRAME_SIZE, binary_views: bool = False,
           threads: int | None = 1) -> ScanOptions:
        """The options as the public functions take them, checked: ``columns`` as
        ``scan`` takes them (None: all), ``threads`` None for every core."""
        if collections is not None and not isinstance(collections, (bool, numbers.Integral)):
            raise TypeError(f"collections must be None, True or False, not {collections!r}")
        if isinstance(max_frame_size, bool) or not isinstance(max_frame_size, numbers.Integral):
            raise TypeError(f"max_frame_size must be an integer, not {max_frame_size!r}")
        if max_frame_size < P.HEADER_SIZE:
            raise ValueError(f"max_frame_size must be at least {P.HEADER_SIZE}")
        return cls(None if collections is None else bool(collections), S.resolve(columns),
                   checked_mode(errors), min(int(max_frame_size), _LARGEST_FRAME),
                   bool(binary_views), threads_of(threads))

    def but(self, **changes) -> ScanOptions:
        """These options with ``changes`` (fields already checked by the caller)."""
        return dataclasses.replace(self, **changes)

    def with_columns(self, *names: str) -> ScanOptions:
        """These options, scanning ``names`` too."""
        return self.but(columns=S.resolve((*self.columns, *names)))
