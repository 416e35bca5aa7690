"""Compressed dumps (``dcpfast.io.compression``): gzip, zstd and lz4 told by magic number, read
as the raw dump however they arrive, in bounded memory; cut, damaged or followed by
garbage, raised or skipped alike; ``open_stream`` sniffs and replays."""

from __future__ import annotations

import io

import numpy as np
import pytest

import dcpfast
from dcpfast import testing as t
from tests.io.test_dumps import assert_columns_equal


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
