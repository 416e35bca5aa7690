"""Reading dumps: whole files, bounded chunks, compressed streams, byte ranges.

``read`` and ``iter_batches`` are the entry points (``dumps``); ``open_stream`` and
``compression`` sniff and decompress (``compression``); ``sources`` feeds chunks,
``resume`` carries a scan across them and ``ranges`` cuts a file into byte ranges that
decode independently.
"""

from .compression import COMPRESSION_MAGIC, HEAD_BYTES, DecodedStream, compression, open_stream
from .dumps import (
    DEFAULT_BATCH_BYTES,
    SAMPLE,
    SAMPLE_CLIENT,
    SAMPLE_PCAP,
    SNIFF_BYTES,
    capture_kind,
    is_capture,
    iter_batches,
    read,
)

__all__ = ["COMPRESSION_MAGIC", "DEFAULT_BATCH_BYTES", "HEAD_BYTES", "SAMPLE", "SAMPLE_CLIENT",
           "SAMPLE_PCAP", "SNIFF_BYTES", "DecodedStream", "capture_kind", "compression",
           "is_capture", "iter_batches", "open_stream", "read"]
