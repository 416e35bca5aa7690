"""Document values decoded by several threads: the table, the problems listed and the
strict error of one thread, and ``iter_values``' pieces within their bound, in order."""

from __future__ import annotations

import pytest

import dcpfast
from dcpfast import testing as t


def test_values_with_threads_equal_one_thread():
    frames = t.synthetic_frames(20_000, seed=31, snappy_ratio=0.6, xattr_ratio=0.4,
                                value_size=400)
    data = b"".join(f.data for f in frames)
    bad = bytearray(data)
    snappy_at = [f for f in frames if f.fields.get("datatype", 0) & 2]
    assert snappy_at
    for at in range(len(data) // 5, len(data), len(data) // 5):    # some blocks broken
        bad[at:at + 4] = b"\xff\xff\xff\xff"
    for buf, errors in ((data, "strict"), (bytes(bad), "skip")):
        batch = dcpfast.scan(buf, collections=True, errors=errors, final=True)
        scanned = list(batch.errors)
        one = batch.values(threads=1)
        listed = dcpfast.skipped_regions(one)
        assert len(listed) > 0 or errors == "strict"
        for threads in (2, 5):
            got = batch.values(threads=threads)
            assert got.equals(one) and got.schema == one.schema
            assert dcpfast.skipped_regions(got) == listed
            assert batch.errors == scanned                         # the batch's own
    batch = dcpfast.scan(bytes(bad), collections=True, errors="skip", final=True)
    raised = []
    for threads in (1, 2, 5):
        with pytest.raises(dcpfast.DcpFormatError) as e:
            batch.values(errors="strict", threads=threads)
        raised.append(str(e.value))
    assert raised[0] == raised[1] == raised[2]


def test_values_pieces_with_threads_keep_their_bound_and_order():
    """With threads, each piece of iter_values is cut again into one a thread: the pieces
    stay within piece_bytes, come in stream order, and damage is listed as with one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dcpfast import values as V
    frames = t.synthetic_frames(20_000, seed=32, snappy_ratio=0.6, xattr_ratio=0.4,
                                value_size=400)
    data = bytearray(b"".join(f.data for f in frames))
    for at in range(len(data) // 7, len(data), len(data) // 7):
        data[at:at + 4] = b"\xff\xff\xff\xff"
    got = {}
    for threads in (1, 3):
        batch = dcpfast.scan(bytes(data), collections=True, errors="skip", final=True)
        pieces = list(V.iter_values(batch, piece_bytes=3 << 20, threads=threads))
        assert all(pc.sum(pc.binary_length(p["body"])).as_py() <= 3 << 20 for p in pieces)
        got[threads] = (pieces, [r for p in pieces for r in dcpfast.skipped_regions(p)])
    (one, one_errors), (many, many_errors) = got[1], got[3]
    assert len(many) > len(one) > 1
    assert pa.concat_tables(many).equals(pa.concat_tables(one))
    assert many_errors == one_errors and len(one_errors) > 0
    assert one_errors == dcpfast.skipped_regions(V.values(dcpfast.scan(
        bytes(data), collections=True, errors="skip", final=True)))
