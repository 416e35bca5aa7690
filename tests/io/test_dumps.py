"""The entry points (``dcpfast.io.dumps``): synthetic conversations through scan, read and
iter_batches, split every way; paths, file objects, buffers and pipes; collections
inferred; iter_batches as an Arrow stream; base offsets."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from dcpfast.io import is_capture
from tests.pcap.test_reader import SERVER_BYTES

CONFIGS = {
    "collections": dict(collections=True),
    "stream-ids": dict(collections=True, stream_ids=True, marker_version=2),
    "sync-writes": dict(collections=True, sync_writes=True, marker_version=0),
    "legacy": dict(collections=False, delete_times=False),
}


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def conversation(request):
    frames = t.synthetic_frames(120, seed=7, **CONFIGS[request.param])
    return CONFIGS[request.param]["collections"], frames


def assert_columns_equal(batches, whole):
    for name in whole.columns:
        np.testing.assert_array_equal(np.concatenate([b[name] for b in batches]), whole[name],
                                      err_msg=name)
    assert sum(len(b) for b in batches) == len(whole)


def test_synthetic_conversation_decodes_to_its_fields(conversation):
    collections, frames = conversation
    data = b"".join(f.data for f in frames)
    batch = dcpfast.scan(data)                    # collections inferred from the HELLO
    assert batch.collections == collections
    assert len(batch) == len(frames) and batch.consumed == len(data)
    for i, f in enumerate(frames):
        got = batch.frame(i)
        assert {k: got.get(k) for k in f.fields} == f.fields, i


def test_every_split_point_gives_the_same_columns(conversation):
    collections, frames = conversation
    data = b"".join(f.data for f in frames[:40])
    whole = dcpfast.scan(data)
    for cut in range(len(data) + 1):
        batches = list(dcpfast.iter_batches([data[:cut], data[cut:]], batch_bytes=max(cut, 24),
                                            collections=collections))
        assert_columns_equal(batches, whole)
        if batches:
            assert batches[0].collections == collections


@settings(max_examples=40, deadline=None)
@given(st.integers(24, 4096), st.lists(st.integers(0, 5000), max_size=6))
def test_any_chunking_and_batch_size(batch_bytes, cuts):
    data = t.synthetic_stream(60, seed=3)
    whole = dcpfast.scan(data)
    cuts = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    batches = list(dcpfast.iter_batches(chunks, batch_bytes=batch_bytes, collections=True))
    assert_columns_equal(batches, whole)
    assert_columns_equal(list(dcpfast.iter_batches(chunks, batch_bytes=batch_bytes)), whole)
    for batch in batches:                         # offsets are stream positions
        for i in range(0, len(batch), 7):
            start = int(batch["offset"][i])
            assert batch.key(i) == whole.key(int(np.searchsorted(whole["offset"], start)))


def test_read_maps_a_file(tmp_path):
    data = t.synthetic_stream(200, seed=5)
    path = tmp_path / "dump.dcp"
    path.write_bytes(data)
    batch = dcpfast.read(path)
    assert_columns_equal([batch], dcpfast.scan(data))
    assert batch.value(5) == dcpfast.scan(data).value(5)


def test_read_empty_file(tmp_path):
    path = tmp_path / "empty.dcp"
    path.write_bytes(b"")
    batch = dcpfast.read(path)
    assert len(batch) == 0 and batch.consumed == 0
    assert list(dcpfast.iter_batches(path)) == []


def test_read_reports_a_truncated_last_frame(tmp_path):
    data = t.synthetic_stream(20, seed=5)
    path = tmp_path / "cut.dcp"
    path.write_bytes(data[:-3])
    with pytest.raises(dcpfast.DcpFormatError, match="truncated frame") as info:
        dcpfast.read(path)
    last = int(dcpfast.scan(data)["offset"][-1])
    assert info.value.offset == last
    batch = dcpfast.read(path, errors="skip")
    assert len(batch) == len(dcpfast.scan(data)) - 1
    assert batch.errors == [dcpfast.SkippedRegion(last, len(data) - 3 - last,
                                                  batch.errors[0].reason)]


def test_iter_batches_from_path_and_file_objects(tmp_path):
    data = t.synthetic_stream(300, seed=9)
    path = tmp_path / "dump.dcp"
    path.write_bytes(data)
    whole = dcpfast.scan(data)

    class ReadOnly:                               # a stream with read() but no readinto()
        def __init__(self, raw):
            self.raw = io.BytesIO(raw)

        def read(self, n):
            return self.raw.read(min(n, 1000))

    for source in (path, str(path), open(path, "rb"), io.BytesIO(data), ReadOnly(data)):
        batches = list(dcpfast.iter_batches(source, batch_bytes=4096, collections=True))
        assert len(batches) > 5
        assert_columns_equal(batches, whole)


def test_a_dropped_batch_is_not_held_while_the_next_is_read():
    import weakref
    data = t.synthetic_stream(300, seed=3)
    previous, held = None, []

    def chunks():
        for at in range(0, len(data), 2000):
            held.append(previous is not None and previous() is not None)
            yield data[at:at + 2000]

    batches = dcpfast.iter_batches(chunks(), batch_bytes=2000, collections=True)
    for batch in batches:
        previous = weakref.ref(batch)
        del batch
    assert len(held) > 5 and not any(held)


def test_iter_batches_memory_is_bounded(tmp_path):
    big = t.mutation(b"big", os.urandom(300_000), by_seqno=1)
    data = t.synthetic_stream(300, seed=2) + big + t.synthetic_stream(50, seed=4,
                                                                      handshake=False)
    batches = list(dcpfast.iter_batches(io.BytesIO(data), batch_bytes=8192, collections=True))
    assert_columns_equal(batches, dcpfast.scan(data))
    for batch in batches:
        assert len(batch.data) <= 8192 + len(big)


def test_iter_batches_rejects_what_it_cannot_read():
    with pytest.raises(TypeError):
        list(dcpfast.iter_batches(42))
    with pytest.raises(ValueError):
        list(dcpfast.iter_batches([b""], batch_bytes=0))


def test_collections_are_inferred_once_for_a_stream():
    head = t.synthetic_stream(5, seed=1, collections=True)
    data = head + t.noop() * (2 * dcpfast.options.SNIFF_BYTES // 24)
    batches = list(dcpfast.iter_batches([head[:30], data[30:]], batch_bytes=2000))
    assert len(batches) > 100 and all(b.collections for b in batches)
    late = t.noop() * (dcpfast.options.SNIFF_BYTES // 24 + 1) + t.seqno_advanced(1)
    assert not any(b.collections for b in dcpfast.iter_batches([late], batch_bytes=1000))


@pytest.mark.parametrize("prefix, expected", [
    (t.hello_response([0x12, 0x0a]), True),
    (t.hello_response([0x0a]) + t.seqno_advanced(5), False),
    (t.hello([0x12]), True),
    (t.hello([0x12]) + t.hello_response([0x0a]), False),
    (t.open(b"conn", 0x10), True),
    (t.open(b"conn", 0x01) + t.system_event(0, by_seqno=1, key=b"c", value=bytes(16)), True),
    (t.seqno_advanced(5), True),
    (t.noop() + t.snapshot_marker(0, 1), False),
    (b"", False),
])
def test_collections_auto_detection(prefix, expected):
    data = prefix + t.mutation(b"\x08k", by_seqno=1)
    assert dcpfast.scan(data).collections is expected


def test_iter_batches_takes_one_buffer():
    data = t.synthetic_stream(30, seed=8)
    for source in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert_columns_equal(list(dcpfast.iter_batches(source, batch_bytes=500,
                                                       collections=True)),
                             dcpfast.scan(data))


def test_read_from_a_pipe(tmp_path):
    import threading
    data = t.synthetic_stream(30, seed=8)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    batch = dcpfast.read(fifo)
    writer.join()
    assert_columns_equal([batch], dcpfast.scan(data))


# -- iter_batches as an Arrow stream; base offsets ----------------------------------------


def test_iter_batches_is_an_arrow_stream_with_its_schema_up_front():
    import duckdb
    import pyarrow as pa

    data = t.synthetic_stream(2000, seed=41)
    whole = dcpfast.scan(data, final=True).to_arrow()
    batches = dcpfast.iter_batches(data, 50_000, columns=["opcode", "vbucket", "key"],
                                   collections=True)
    assert batches.schema == dcpfast.arrow_schema(["opcode", "vbucket", "key"])
    reader = pa.RecordBatchReader.from_stream(batches)
    assert reader.schema == batches.schema            # known before a batch is read
    table = reader.read_all()
    assert table.column(0).num_chunks > 1
    assert table.equals(whole.select(table.column_names))
    counted = duckdb.from_arrow(dcpfast.iter_batches(data, 50_000)).aggregate(
        "count(*), sum(by_seqno)").fetchall()
    assert counted == [(len(whole), int(dcpfast.scan(data, final=True)["by_seqno"].sum()))]


def test_scan_refuses_a_base_offset_that_wraps():
    data = t.synthetic_stream(20, seed=5)
    with pytest.raises(ValueError, match="base_offset"):
        dcpfast.scan(data, base_offset=2**64 - 100)
    with pytest.raises(ValueError, match="base_offset"):
        dcpfast.scan(data, base_offset=-1)
    batch = dcpfast.scan(data, base_offset=2**64 - 1 - len(data))
    assert int(batch["offset"][-1]) < 2**64 - 1
    assert batch.key(len(batch) - 1) == dcpfast.scan(data).key(len(batch) - 1)


# -- captures told from dumps ------------------------------------------------------------

def test_is_capture_knows_every_magic():
    for big in (False, True):
        for nanoseconds in (False, True):
            assert is_capture(t.pcap_file([], big_endian=big, nanoseconds=nanoseconds)[:4])
        assert is_capture(t.pcapng_file([], big_endian=big)[:4])
    for head in (b"", b"\xd4\xc3", SERVER_BYTES[:24], b"\x1f\x8b\x08\x00", b"PK\x03\x04"):
        assert not is_capture(head)
