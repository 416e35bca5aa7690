"""Packet captures: the DCP traffic of pcap/pcapng files, one connection direction a batch.

``reader`` walks the capture and dispatches TCP segments, ``reassembly`` puts each
direction's bytes in order and scans them, ``batch`` holds what comes out. The numbers of
the capture formats and of the link, IP and TCP layers are in ``dcpfast.packets``.
"""

from .batch import CLIENT_TO_SERVER, SERVER_TO_CLIENT, CaptureBatch, Connection
from .reader import CAPTURE_BATCH_BYTES, CaptureReader, read_pcap
from .reassembly import HELD_SEGMENT_COST, REORDER_BUDGET, REORDER_WINDOW

__all__ = ["CAPTURE_BATCH_BYTES", "CLIENT_TO_SERVER", "HELD_SEGMENT_COST", "REORDER_BUDGET",
           "REORDER_WINDOW", "SERVER_TO_CLIENT", "CaptureBatch", "CaptureReader", "Connection",
           "read_pcap"]
