"""The memory dcpfast keeps for reuse (docs/memory.md): what each of its two caches holds,
and a way to give back what they keep.

The compiled cores keep their large memory in spans that go back to a cache when dropped,
so that the next scan or state writes into resident pages: ``"output"``, the scan's output
memory (a batch's columns, read buffers), and ``"working"``, the state engine's working
memory (its numpy arrays and key index). A cache keeps no more than was in use at once
lately, and nothing idle for more than two seconds; ``release`` gives it all back now.
The pure-Python cores keep none: their figures are zeros.
"""

from __future__ import annotations

from typing import NamedTuple

from . import _core

__all__ = ["Cache", "caches", "release", "reset_peaks"]


class Cache(NamedTuple):
    """What one cache holds now, in bytes (``cached_spans``: a count)."""

    #: the bytes of its spans in use (a batch's columns, a state's arrays)
    in_use: int
    #: the most in use at once since the last ``reset_peaks``
    peak: int
    #: the bytes kept for reuse, none of them in use
    cached: int
    #: the spans kept for reuse
    cached_spans: int


def caches() -> dict[str, Cache]:
    """Each cache by name: ``"output"`` (the scan's output memory) and ``"working"`` (the
    state engine's working memory)."""
    return {name: Cache(*figures) for name, figures in _core.memory.figures().items()}


def release() -> int:
    """Give back to the system now the memory the caches keep for reuse (after a large
    state or scan, before other work that needs the memory); the bytes given back. The
    memory in use stays; the next scan or state maps fresh pages."""
    return int(_core.memory.release())


def reset_peaks() -> None:
    """Start each cache's ``peak`` again from what it has in use now."""
    _core.memory.reset_peaks()
