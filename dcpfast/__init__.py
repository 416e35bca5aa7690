"""dcpfast: columnar bulk decoding of Couchbase DCP streams.

The entry points are here (``scan``, ``read``, ``iter_batches``, ``scan_polars``,
``state``, ``diff``, ``report``, the batch, the errors and the protocol's enums); the rest
has one public home each, by concern: ``dcpfast.pcap`` (packet captures),
``dcpfast.streams`` (stream setup and health), ``dcpfast.values`` (document bodies and
xattrs), ``dcpfast.events`` (system events and collection names), ``dcpfast.documents``
(building a state batch by batch), ``dcpfast.compare`` (what ``diff`` compares, and its
summary), ``dcpfast.changes`` (the change feed and the audit of a connector),
``dcpfast.mirror`` (a Delta table of the documents kept current), ``dcpfast.io``
(compressed dumps), ``dcpfast.reporting`` (what ``report`` returns), ``dcpfast.memory``
(the memory kept for reuse), ``dcpfast.spark``,
``dcpfast.testing`` (encoders and the bundled samples) and ``dcpfast.cli``.

Each name is imported on first use (as are the subpackages), so that ``import dcpfast``
and the start of the ``dcpfast`` command cost little.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

__all__ = [
    "COLUMNS", "CaptureFormatError", "Datatype", "DcpFormatError", "DurabilityLevel",
    "Frame", "FrameBatch", "IMPLEMENTATION", "Magic", "Opcode", "SkippedRegion",
    "SnapshotFlag", "Status", "StreamEndStatus", "SystemEventId", "VBucketState",
    "arrow_schema", "diff", "iter_batches", "read", "report", "scan", "scan_polars",
    "skipped_regions", "state",
]

#: The module each name of ``__all__`` comes from (as the imports below say to typing).
_HOMES = {
    **dict.fromkeys(("IMPLEMENTATION", "Frame", "FrameBatch"), "batch"),
    "state": "documents.api",
    "report": "reporting.api",
    "diff": "compare.api",
    **dict.fromkeys(("CaptureFormatError", "DcpFormatError", "SkippedRegion",
                     "skipped_regions"), "errors"),
    **dict.fromkeys(("iter_batches", "read", "scan"), "io.dumps"),
    "scan_polars": "io.lazy",
    **dict.fromkeys(("Datatype", "DurabilityLevel", "Magic", "Opcode", "SnapshotFlag",
                     "Status", "StreamEndStatus", "SystemEventId", "VBucketState"),
                    "protocol"),
    **dict.fromkeys(("COLUMNS", "arrow_schema"), "schema"),
}

if TYPE_CHECKING:
    from .batch import IMPLEMENTATION, Frame, FrameBatch
    from .compare.api import diff
    from .documents.api import state
    from .errors import CaptureFormatError, DcpFormatError, SkippedRegion, skipped_regions
    from .io.dumps import iter_batches, read, scan
    from .io.lazy import scan_polars
    from .protocol import (
        Datatype,
        DurabilityLevel,
        Magic,
        Opcode,
        SnapshotFlag,
        Status,
        StreamEndStatus,
        SystemEventId,
        VBucketState,
    )
    from .reporting.api import report
    from .schema import COLUMNS, arrow_schema


def __getattr__(name: str):
    """A name of ``__all__``, or a subpackage (``dcpfast.io``), imported on first use."""
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
