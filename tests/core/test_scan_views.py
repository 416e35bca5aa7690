"""The scan cores' binary view structs (``views``), both cores: short slices up to the end
of the buffer, inline bytes zero-padded, rows walked together, every row checked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest


def _scan_cores():
    from tests.cores import every
    return every("scan")


@pytest.mark.parametrize("bits", [31, 4])
def test_view_structs_of_short_slices_up_to_the_end_of_the_buffer(bits):
    data = np.frombuffer(bytes(range(1, 41)), np.uint8)
    ranges = [(start, size) for start in range(len(data) + 1)
              for size in range(min(15, len(data) - start) + 1)]
    starts = np.array([r[0] for r in ranges], np.uint64)
    lengths = np.array([r[1] for r in ranges], np.int64)
    # two rows walked together, the second one reversed
    starts2, lengths2 = np.stack([starts, starts[::-1]]), np.stack([lengths, lengths[::-1]])
    found = []
    for core in _scan_cores():
        out = np.full((2, 16 * len(ranges)), 0xEE, np.uint8)
        core.views(data, starts2, lengths2, out, bits)
        windows = [pa.py_buffer(data[lo:lo + 2 * (1 << bits)])
                   for lo in range(0, len(data), 1 << bits)]
        for row in range(2):
            array = pa.Array.from_buffers(pa.binary_view(), len(ranges),
                                          [None, pa.py_buffer(out[row]), *windows])
            array.validate(full=True)
            pairs = zip(starts2[row].tolist(), lengths2[row].tolist())
            assert array.to_pylist() == [data[s:s + n].tobytes() for s, n in pairs]
        inline = out.reshape(2, -1, 16)[lengths2 <= 12]
        sizes = lengths2[lengths2 <= 12]
        for struct, size in zip(inline, sizes):         # inline bytes are zero-padded
            assert not struct[4 + size:].any()
        one = np.empty(16 * len(ranges), np.uint8)      # 1-D arrays: one row
        core.views(data, starts, lengths, one, bits)
        assert (one == out[0]).all()
        found.append(out)
    assert all((out == found[0]).all() for out in found)


def test_view_structs_check_every_row():
    data = np.zeros(40, np.uint8)
    for core in _scan_cores():
        for starts, lengths, message in (([[0, 8], [30, 38]], [[4, 4], [4, 4]], "range 1 outside"),
                                         ([[0, 8], [30, 8]], [[4, 4], [4, -1]], "range 1 outside"),
                                         ([[0, 8], [0, 8]], [[4, 4], [20, 4]], "longer than")):
            with pytest.raises(ValueError, match=message):
                core.views(data, np.array(starts, np.uint64), np.array(lengths, np.int64),
                           np.empty((2, 32), np.uint8), 4)
        with pytest.raises(ValueError, match="sizes"):
            core.views(data, np.zeros((2, 2), np.uint64), np.zeros((2, 2), np.int64),
                       np.empty((2, 16), np.uint8), 31)
