"""Reading dumps: compressed streams, and the constants of reading in chunks.

``scan``, ``read`` and ``iter_batches`` (``dumps``) are the entry points, public as
``dcpfast.scan``, ``dcpfast.read`` and ``dcpfast.iter_batches``; ``compression`` sniffs
and decompresses, ``sources`` feeds chunks, ``resume`` carries a scan across them,
``ranges`` cuts a file into byte ranges that decode independently, ``threaded`` decodes
one buffer with several threads, ``kinds`` tells what kind of source a reader was
given (a path, a directory, a buffer, a capture...) and ``positions`` keeps how far a
file that only grows was read, between runs.
"""

from .compression import COMPRESSION_MAGIC, DecodedStream, codec_of, open_stream
from .dumps import DEFAULT_BATCH_BYTES, DEFAULT_MAX_BYTES
from .kinds import capture_kind, is_capture

__all__ = ["COMPRESSION_MAGIC", "DEFAULT_BATCH_BYTES", "DEFAULT_MAX_BYTES", "DecodedStream",
           "capture_kind", "codec_of", "is_capture", "open_stream"]
