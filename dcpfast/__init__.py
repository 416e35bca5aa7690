"""dcpfast: columnar bulk decoding of Couchbase DCP streams."""

from .batch import IMPLEMENTATION, Frame, FrameBatch, scan
from .capture import read_pcap
from .content.events import Manifest
from .content.state import state
from .content.streams import StreamTracker, Summary, summarize
from .errors import DcpFormatError, SkippedRegion
from .io import iter_batches, read
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
from .schema import COLUMNS, arrow_schema

__version__ = "0.1.0"

__all__ = [
    "COLUMNS", "Datatype", "DcpFormatError", "DurabilityLevel", "Frame", "FrameBatch",
    "IMPLEMENTATION", "Magic", "Manifest", "Opcode", "SkippedRegion", "SnapshotFlag",
    "Status", "StreamEndStatus", "StreamTracker", "Summary", "SystemEventId", "VBucketState",
    "arrow_schema", "iter_batches", "read", "read_pcap", "scan", "state", "summarize",
]
