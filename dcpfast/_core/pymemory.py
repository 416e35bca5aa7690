"""The pure-Python twin of the memory core (``cmemory``), with the same names and
signatures: the twins keep no span caches (their memory is numpy's and Python's), so the
figures are zeros, releasing gives nothing back and ``numpy_spans`` leaves numpy's
handler as it is."""

from __future__ import annotations

#: The caches, by name: the scan's output memory, the state engine's working memory.
_CACHES = ("output", "working")


class numpy_spans:
    """The compiled core's context in which numpy's large arrays come from its working
    cache; the twin has no spans, and numpy's memory stays as it is."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def figures():
    """What each cache holds, by name (``cmemory.figures``): the twin keeps none."""
    return dict.fromkeys(_CACHES, (0, 0, 0, 0))


def untraced():
    """The spans in use that tracemalloc does not see, and their peak: the twin has none."""
    return 0, 0


def reset_peaks():
    """Start the peaks again: the twin keeps none."""


def release():
    """Give back the spans kept for reuse: the twin keeps none."""
    return 0
