"""dcpfast: columnar bulk decoding of Couchbase DCP streams."""

from .batch import IMPLEMENTATION, Frame, FrameBatch, scan
from .errors import DcpFormatError, SkippedRegion
from .io import iter_batches, read
from .protocol import (Datatype, DurabilityLevel, Magic, Opcode, SnapshotFlag, Status,
                       StreamEndStatus, SystemEventId, VBucketState)
from .schema import COLUMNS, arrow_schema

__version__ = "0.1.0"

__all__ = [
    "COLUMNS", "Datatype", "DcpFormatError", "DurabilityLevel", "Frame", "FrameBatch",
    "IMPLEMENTATION", "Magic", "Opcode", "SkippedRegion", "SnapshotFlag", "Status",
    "StreamEndStatus", "SystemEventId", "VBucketState", "arrow_schema", "iter_batches",
    "read", "scan",
]
