"""dcpfast: columnar bulk decoding of Couchbase DCP streams.

The entry points are here (``scan``, ``read``, ``iter_batches``, ``state``, ``report``,
the batch, the errors and the protocol's enums); the rest has one public home each, by
concern:
``dcpfast.pcap`` (packet captures), ``dcpfast.streams`` (stream setup and health),
``dcpfast.values`` (document bodies and xattrs), ``dcpfast.events`` (system events and
collection names), ``dcpfast.documents`` (building a state batch by batch),
``dcpfast.io`` (compressed dumps), ``dcpfast.reporting`` (what ``report`` returns),
``dcpfast.spark``, ``dcpfast.testing`` (encoders and the bundled samples) and
``dcpfast.cli``.
"""

from .batch import IMPLEMENTATION, Frame, FrameBatch
from .documents.build import state
from .errors import CaptureFormatError, DcpFormatError, SkippedRegion
from .io.dumps import iter_batches, read, scan
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
from .reporting.build import report
from .schema import COLUMNS, arrow_schema

__version__ = "0.1.0"

__all__ = [
    "COLUMNS", "CaptureFormatError", "Datatype", "DcpFormatError", "DurabilityLevel",
    "Frame", "FrameBatch", "IMPLEMENTATION", "Magic", "Opcode", "SkippedRegion",
    "SnapshotFlag", "Status", "StreamEndStatus", "SystemEventId", "VBucketState",
    "arrow_schema", "iter_batches", "read", "report", "scan", "state",
]
