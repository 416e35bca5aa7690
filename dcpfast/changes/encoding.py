"""A column of bytes as base64 text, encoded all at once.

Each value is padded with zero bytes to a multiple of three (one Arrow join), so that the
base64 of all the padded values as one buffer (one ``binascii`` call) is each value's
base64 in turn; the characters that stand for the padding then become ``=`` (numpy):
the text ``base64.b64encode`` gives each value, without a Python object per value.
"""

from __future__ import annotations

import binascii

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PADS = pa.array([b"", b"\0\0", b"\0"], pa.large_binary())
_EMPTY = pa.scalar(b"", pa.large_binary())


def base64_text(array: pa.Array) -> pa.Array:
    """The base64 text (large string) of each value of a binary ``array``; null where
    null."""
    values = array.cast(pa.large_binary())
    n = len(values)
    lengths = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False)
    lengths = lengths.astype(np.int64, copy=False)
    pads = _PADS.take(pa.array(lengths % 3))
    padded = pc.binary_join_element_wise(pc.fill_null(values, _EMPTY), pads, _EMPTY)
    offsets = np.frombuffer(padded.buffers()[1], np.int64)[padded.offset:padded.offset + n + 1]
    data = padded.buffers()[2]
    raw = np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]] if data is not None and n \
        else np.empty(0, np.uint8)
    # values padded to whole groups of three: the base64 of them all is theirs, joined
    text = np.frombuffer(bytearray(binascii.b2a_base64(raw.data, newline=False)), np.uint8)
    out = (offsets - offsets[0]) // 3 * 4 if n else np.zeros(1, np.int64)
    ends = out[1:]
    missing = (3 - lengths % 3) % 3              # characters of padding at each end
    text[ends[missing >= 1] - 1] = ord("=")
    text[ends[missing == 2] - 2] = ord("=")
    validity = values.buffers()[0] if values.null_count else None
    if validity is not None and values.offset:
        validity = pa.array(values.is_valid().to_numpy(zero_copy_only=False)).buffers()[1]
    return pa.Array.from_buffers(pa.large_string(), n, [validity, pa.py_buffer(out),
                                                        pa.py_buffer(text)],
                                 null_count=values.null_count)
