"""Synthetic conversations through scan, read and iter_batches, split every way."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t

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


def _keys_and_values(batches):
    tables = [b.to_arrow() for b in batches]
    return [sum((tb.column(name).to_pylist() for tb in tables), []) for name in ("key", "value")]


@pytest.mark.parametrize("batch_bytes", [100, 999, 4096])
def test_a_regular_file_is_read_through_windows_that_stay_valid(tmp_path, batch_bytes,
                                                                monkeypatch):
    import mmap
    monkeypatch.setattr(dcpfast.io.sources, "MAP_MIN_BYTES", 1)       # map even tiny windows
    damaged = bytearray(t.synthetic_stream(200, seed=12))
    damaged[5000:5003] = b"\xff\xff\xff"           # skip mode resynchronises past it
    path = tmp_path / "dump.dcp"
    path.write_bytes(damaged)
    options = dict(batch_bytes=batch_bytes, collections=True, errors="skip")
    mapped = list(dcpfast.iter_batches(path, memory_map=True, **options))
    copied = list(dcpfast.iter_batches(io.BytesIO(bytes(damaged)), **options))
    assert all(isinstance(b.data.obj, mmap.mmap) for b in mapped)     # no bytes copied
    assert_columns_equal(mapped, dcpfast.scan(damaged, errors="skip", final=True))
    assert [e for b in mapped for e in b.errors] == [e for b in copied for e in b.errors]
    # the loop has moved on: the first windows were handed back, and still read the same
    assert _keys_and_values(mapped) == _keys_and_values(copied)
    for b in mapped[:3]:
        assert bytes(b.data) == damaged[b.base_offset:b.base_offset + len(b.data)]


def test_a_file_object_is_read_from_its_position(tmp_path, monkeypatch):
    import mmap
    monkeypatch.setattr(dcpfast.io.sources, "MAP_MIN_BYTES", 1)
    data = t.synthetic_stream(100, seed=13)
    whole = dcpfast.scan(data)
    cut = int(whole["offset"][40])
    path = tmp_path / "dump.dcp"
    path.write_bytes(data)
    with open(path, "rb") as f:
        f.seek(cut)
        batches = list(dcpfast.iter_batches(f, batch_bytes=1000, collections=True,
                                            memory_map=True))
    rest = dcpfast.scan(data[cut:], collections=True)
    assert all(isinstance(b.data.obj, mmap.mmap) for b in batches)
    assert_columns_equal(batches, rest)
    assert _keys_and_values(batches) == _keys_and_values([rest])
    for mapped in (True, False):
        with open(path, "rb") as f, dcpfast.io.open_stream(f) as stream:
            first = int(whole["offset"][1])
            assert stream.read(first) == data[:first]  # a frame already read, sniffed too
            batches = list(dcpfast.iter_batches(stream, batch_bytes=1000, collections=True,
                                                memory_map=mapped))
        assert_columns_equal(batches, dcpfast.scan(data[first:], collections=True))
        assert bytes(batches[0].data[:20]) == data[first:first + 20]
    with open(path, "rb") as f:                    # read, not mapped: from its position too
        f.seek(cut)
        batches = list(dcpfast.iter_batches(f, batch_bytes=1000, collections=True))
    assert not any(isinstance(b.data, memoryview) for b in batches)
    assert_columns_equal(batches, rest)
    monkeypatch.setattr(dcpfast.io.sources, "MAP_MIN_BYTES", 1001)    # small batches are copied
    with open(path, "rb") as f:
        batches = list(dcpfast.iter_batches(f, batch_bytes=1000, collections=True,
                                            memory_map=True))
    assert not isinstance(batches[0].data, memoryview)
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


# -- compressed input -----------------------------------------------------------------------

def _gzip(parts):
    import gzip
    return b"".join(gzip.compress(p) for p in parts)        # concatenated members


def _zstd(parts):
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    return b"".join(zstd.compress(p) for p in parts)        # one frame per part


def _lz4(parts):
    import lz4.frame
    return b"".join(lz4.frame.compress(p) for p in parts)


CODECS = {"gzip": _gzip, "zstd": _zstd, "lz4": _lz4}


@pytest.fixture(scope="module")
def stream():
    return t.synthetic_stream(400, seed=11)


def _parts(data):
    """Three pieces cut inside frames, so frames straddle compressed members/frames."""
    return [data[:5001], data[5001:40007], data[40007:]]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_inputs_equal_raw(tmp_path, stream, codec):
    packed = CODECS[codec](_parts(stream))
    assert dcpfast.io.codec_of(packed) == codec
    path = tmp_path / f"dump.{codec}"
    path.write_bytes(packed)
    whole = dcpfast.scan(stream)
    assert_columns_equal([dcpfast.read(path)], whole)
    assert dcpfast.read(path).value(7) == whole.value(7)
    chunks = [packed[i:i + 997] for i in range(0, len(packed), 997)]
    for source in (path, str(path), open(path, "rb"), io.BytesIO(packed), packed, chunks):
        batches = list(dcpfast.iter_batches(source, batch_bytes=4096, collections=True))
        assert len(batches) > 5
        assert_columns_equal(batches, whole)
    auto = list(dcpfast.iter_batches(path, batch_bytes=4096))
    assert all(b.collections for b in auto)
    assert_columns_equal(auto, whole)


def test_compression_is_told_by_magic_not_by_name(tmp_path, stream):
    path = tmp_path / "dump.dcp"                  # a zstd file with a raw dump's name
    path.write_bytes(_zstd([stream]))
    assert_columns_equal([dcpfast.read(path)], dcpfast.scan(stream))
    # a pzstd-style skippable frame in front of the first zstd frame
    skippable = (0x184D2A50).to_bytes(4, "little") + (4).to_bytes(4, "little") + bytes(4)
    assert dcpfast.io.codec_of(skippable + _zstd([b"x"])) == "zstd"
    assert dcpfast.io.codec_of(skippable + _lz4([b"x"])) == "lz4"
    assert dcpfast.io.codec_of(stream) is None
    assert dcpfast.io.codec_of(b"") is None


def test_compressed_stream_memory_is_bounded(stream):
    data = stream * 20
    batches = list(dcpfast.iter_batches(io.BytesIO(_zstd([data])), batch_bytes=8192,
                                        collections=True))
    assert sum(len(b) for b in batches) == 20 * len(dcpfast.scan(stream))
    assert max(len(b.data) for b in batches) <= 8192 + 1024 * 1024


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_truncated_compressed_input(tmp_path, stream, codec):
    packed = CODECS[codec](_parts(stream))
    path = tmp_path / "cut"
    path.write_bytes(packed[:-9])
    with pytest.raises(dcpfast.DcpFormatError, match=f"damaged {codec} data") as info:
        dcpfast.read(path)
    assert 0 < info.value.offset <= len(stream)
    with pytest.raises(dcpfast.DcpFormatError, match=f"damaged {codec} data"):
        list(dcpfast.iter_batches(path, batch_bytes=4096))
    batch = dcpfast.read(path, errors="skip")
    last = batch.errors[-1]
    assert last.length == 0 and f"damaged {codec} data" in last.reason
    assert last.offset == info.value.offset
    whole = dcpfast.scan(stream)
    kept = len(batch)
    assert 0 < kept <= len(whole)
    assert_columns_equal([batch], whole.filter(np.arange(kept)))
    batches = list(dcpfast.iter_batches(path, batch_bytes=4096, errors="skip"))
    assert sum(len(b) for b in batches) == kept and batches[-1].errors[-1] == last


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_damaged_compressed_input_is_read_alike_however_it_arrives(codec, stream):
    """What skip mode keeps of a damaged compressed dump does not depend on how its bytes
    arrive: one buffer, a file object, or chunks of any size."""
    packed = bytearray(CODECS[codec](_parts(stream)))
    packed[len(packed) // 2] ^= 0x10
    packed = bytes(packed)

    def found(source):
        batches = list(dcpfast.iter_batches(source, batch_bytes=4096, errors="skip"))
        return ([o for b in batches for o in b["offset"].tolist()],
                sorted({e for b in batches for e in b.errors}))

    whole = found(packed)
    if codec == "gzip":                           # CRC-checked: the flip is found
        assert whole[1], "the flipped bit damaged nothing"
    for size in (1, 7, 4096, 100_000):
        assert found([packed[i:i + size] for i in range(0, len(packed), size)]) == whole, size
    assert found(io.BytesIO(packed)) == whole


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_garbage_after_compressed_data(codec, stream):
    packed = CODECS[codec]([stream]) + b"\x01garbage!" * 3
    with pytest.raises(dcpfast.DcpFormatError, match=f"damaged {codec} data"):
        list(dcpfast.iter_batches(packed))
    batches = list(dcpfast.iter_batches(packed, errors="skip"))
    assert_columns_equal(batches, dcpfast.scan(stream))


def test_open_stream_sniffs_and_replays(stream):
    with dcpfast.io.open_stream(io.BytesIO(_gzip([stream]))) as s:
        assert s.codec == "gzip" and s.head == stream[:dcpfast.io.compression.HEAD_BYTES]
        assert s.read() == stream
    with dcpfast.io.open_stream(io.BytesIO(stream)) as s:
        assert s.codec is None and s.read() == stream
    with pytest.raises(TypeError):
        dcpfast.io.open_stream(42)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_a_magic_number_alone_is_not_a_compressed_stream(codec):
    fake = dcpfast.io.COMPRESSION_MAGIC[codec] + b"\x00not compressed" * 1000
    with pytest.raises(dcpfast.DcpFormatError, match=f"at byte 0: damaged {codec} data"):
        list(dcpfast.iter_batches(fake))
    # skip mode: nothing decompresses, so the bytes are read as they are (all damage)
    for source in (fake, io.BytesIO(fake), [fake[:3], fake[3:]]):
        batches = list(dcpfast.iter_batches(source, errors="skip", batch_bytes=100))
        assert sum(len(b) for b in batches) == 0
        assert sum(e.length for b in batches for e in b.errors) == len(fake)


# -- iter_batches as an Arrow stream; directories and globs; the lazy polars source -------


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


def test_a_directory_or_a_glob_is_one_stream_of_its_files(tmp_path):
    """Rotated pieces of one dump, cut mid-frame, one of them compressed: read, in name
    order, as one stream; names starting with "." or "_" are passed over."""
    import gzip

    data = t.synthetic_stream(3000, seed=42)
    cuts = [0, len(data) // 3 + 7, 2 * len(data) // 3 - 5, len(data)]   # inside frames
    pieces = tmp_path / "dumps"
    (pieces / "sub").mkdir(parents=True)
    (pieces / "dump.000").write_bytes(data[cuts[0]:cuts[1]])
    (pieces / "sub" / "dump.001.gz").write_bytes(gzip.compress(data[cuts[1]:cuts[2]]))
    (pieces / "sub" / "dump.002").write_bytes(data[cuts[2]:])
    (pieces / "_SUCCESS").write_bytes(b"not a dump")
    (pieces / ".hidden").write_bytes(b"not a dump")
    whole = dcpfast.scan(data, final=True)
    for source in (pieces, str(pieces), f"{pieces}/**/dump.*"):
        read = dcpfast.read(source)
        assert read["offset"].tolist() == whole["offset"].tolist() and not read.errors
        batches = list(dcpfast.iter_batches(source, 20_000, collections=True))
        assert len(batches) > 2
        assert [o for b in batches for o in b["offset"].tolist()] == whole["offset"].tolist()
    with pytest.raises(FileNotFoundError, match="no dump files"):
        dcpfast.read(tmp_path / "nothing-*.dcp")


def test_damage_in_a_file_of_a_directory_names_it(tmp_path):
    import gzip

    data = t.synthetic_stream(400, seed=43)
    pieces = tmp_path / "dumps"
    pieces.mkdir()
    (pieces / "a.dcp").write_bytes(data)
    (pieces / "b.dcp.gz").write_bytes(gzip.compress(data)[:-30])        # cut short
    (pieces / "c.dcp").write_bytes(data)
    with pytest.raises(dcpfast.DcpFormatError) as failure:
        dcpfast.read(pieces)
    assert failure.value.offset >= len(data)
    assert any("b.dcp.gz" in note for note in failure.value.__notes__)
    kept = dcpfast.read(pieces, errors="skip")
    assert len(kept) > 2 * len(dcpfast.scan(data, final=True)) - 5
    assert any("damaged gzip" in e.reason for e in kept.errors)


def test_scan_polars_is_lazy_with_projection_and_predicate_pushdown():
    import polars as pl

    data = t.synthetic_stream(3000, seed=44, vbuckets=4)
    chunks_read = []

    def chunks():
        for at in range(0, len(data), 10_000):
            chunks_read.append(at)
            yield data[at:at + 10_000]

    eager = pl.from_arrow(dcpfast.scan(data, final=True).to_arrow())
    vb = int(eager["vbucket"][100])
    lazy = dcpfast.scan_polars(data, batch_bytes=20_000)
    query = lazy.filter((pl.col("opcode") == 0x57) & (pl.col("vbucket") == vb)) \
        .select("by_seqno", "key")
    expected = eager.filter((pl.col("opcode") == 0x57) & (pl.col("vbucket") == vb)) \
        .select("by_seqno", "key")
    assert query.collect().equals(expected)
    assert lazy.select(pl.len()).collect().item() == eager.height
    assert "SELECTION" in query.explain()                 # the filter reaches the source
    first = dcpfast.scan_polars(chunks(), batch_bytes=20_000, collections=True).head(5) \
        .collect()
    assert first.height == 5 and first["offset"].to_list() == eager["offset"][:5].to_list()
    assert len(chunks_read) < len(data) // 10_000         # stopped early


def test_scan_refuses_a_base_offset_that_wraps():
    data = t.synthetic_stream(20, seed=5)
    with pytest.raises(ValueError, match="base_offset"):
        dcpfast.scan(data, base_offset=2**64 - 100)
    with pytest.raises(ValueError, match="base_offset"):
        dcpfast.scan(data, base_offset=-1)
    batch = dcpfast.scan(data, base_offset=2**64 - 1 - len(data))
    assert int(batch["offset"][-1]) < 2**64 - 1
    assert batch.key(len(batch) - 1) == dcpfast.scan(data).key(len(batch) - 1)
