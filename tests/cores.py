"""The compiled cores and their pure-Python twins, for the tests that hold one against the
other (``dcpfast._core`` picks the one the library uses)."""

from __future__ import annotations

from dcpfast import _core

#: The twin of every core, by role ("scan", "pcap", "values").
TWINS = _core.twins()
#: The compiled module of every core, by role, or None where none was built.
COMPILED = _core.compiled()


def every(role: str) -> list:
    """The twin, then the compiled module where there is one, of a core."""
    return [TWINS[role]] + ([COMPILED[role]] if COMPILED else [])
