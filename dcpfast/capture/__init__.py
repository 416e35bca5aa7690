"""Packet captures: the DCP traffic of pcap/pcapng files, one connection direction a batch.

``reader`` walks the capture and dispatches TCP segments, ``reassembly`` puts each
direction's bytes in order and scans them, ``batch`` holds what comes out. The numbers of
the capture formats and of the link, IP and TCP layers are in ``dcpfast.packets``.
"""

from ..errors import CaptureFormatError
from .batch import CLIENT_TO_SERVER, SERVER_TO_CLIENT, CaptureBatch, Connection
from .reader import DEFAULT_BATCH_BYTES, CaptureReader, is_capture, read_pcap
from .reassembly import HELD_SEGMENT_COST, REORDER_BUDGET, REORDER_WINDOW, SNIFF_BYTES

__all__ = ["CLIENT_TO_SERVER", "DEFAULT_BATCH_BYTES", "HELD_SEGMENT_COST", "REORDER_BUDGET",
           "REORDER_WINDOW", "SERVER_TO_CLIENT", "SNIFF_BYTES", "CaptureBatch",
           "CaptureFormatError", "CaptureReader", "Connection", "is_capture", "read_pcap"]
