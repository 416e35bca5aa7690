"""Damaged input: strict mode names the frame and the problem, skip mode keeps the rest."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from tests.memory import peak_in_child
from tests.strategies import streams

GOOD = [t.snapshot_marker(1, 3, stream_id=5),
        t.mutation(b"a", b"1", by_seqno=1, collection_id=8, stream_id=5),
        t.deletion(b"b", by_seqno=2, delete_time=9, collection_id=0, stream_id=5)]
TAIL = [t.mutation(b"c", b"3", by_seqno=3, collection_id=9, stream_id=5),
        t.stream_end(0, stream_id=5)]
LAST = 2 ** 32 - 1


def patched(frame: bytes, at: int, new: bytes) -> bytes:
    return frame[:at] + new + frame[at + len(new):]


def leb_key(prefix: bytes, key: bytes = b"k") -> bytes:
    return t.frame(0x57, extras=bytes(31), key=prefix + key)


# (id, damaged frame, reason excerpt); each is put between GOOD and TAIL
CASES = [
    ("magic", patched(t.noop(), 0, b"\x42"), "unknown magic 0x42"),
    ("magic-0x82", patched(t.noop(), 0, b"\x82"), "unknown magic 0x82"),
    ("key-past-body", patched(t.mutation(b"abc", by_seqno=1), 2, b"\x00\x40"),
     "body length 34 is shorter than framing extras + extras + key (95)"),
    ("extras-past-body", patched(t.noop(), 4, b"\x08"), "body length 0 is shorter"),
    ("extras-for-opcode", t.frame(0x57, extras=bytes(30), key=b"\x00k"),
     "extras length 30 impossible for opcode 0x57"),
    ("marker-extras", t.frame(0x56, extras=bytes(21)), "extras length 21 impossible"),
    ("response-extras", t.response(0x53, extras=bytes(4)), "extras length 4 impossible"),
    ("too-large", patched(t.noop(), 8, struct.pack(">I", 0x7FFFFFF0)),
     "frame of 2147483656 bytes exceeds max_frame_size"),
    ("framing-overrun", t.frame(0x57, framing=b"\x23\x00\x01", extras=bytes(31), key=b"\x00k"),
     "framing extras overrun"),
    ("framing-escape-overrun", t.frame(0x55, framing=b"\xf1", extras=bytes(4)),
     "framing extras overrun"),
    ("stream-id-length", t.frame(0x55, framing=b"\x21\x05", extras=bytes(4)),
     "stream-id frame info of length 1"),
    ("datatype", patched(t.mutation(b"k", by_seqno=1), 5, b"\x08"), "invalid datatype 0x08"),
    ("missing-key", t.frame(0x57, extras=bytes(31)), "key length 0 not allowed for opcode 0x57"),
    ("key-on-noop", t.frame(0x5c, key=b"x"), "key length 1 not allowed for opcode 0x5c"),
    ("value-on-stream-end", t.frame(0x55, extras=bytes(4), value=b"x"),
     "value length 1 not allowed for opcode 0x55"),
    ("control-without-value", t.frame(0x5e, key=b"enable_noop"), "value length 0 not allowed"),
    ("marker-version", t.frame(0x56, extras=b"\x03", value=bytes(52)),
     "snapshot marker version 3 with a 52-byte value"),
    ("marker-length", t.frame(0x56, extras=b"\x00", value=bytes(40)),
     "snapshot marker version 0 with a 40-byte value"),
    ("leb-no-stop", leb_key(b"\x80\x80\x80\x80\x80"), "no stop byte in its first 5 bytes"),
    ("leb-key-ends", leb_key(b"\x80\x80", b""), "no stop byte in its first 2 bytes"),
    ("leb-non-canonical", leb_key(b"\x81\x00"), "non-canonical 2-byte encoding"),
    ("leb-overflow", leb_key(b"\xff\xff\xff\xff\x1f"), "exceeds 32 bits (5th byte 0x1f)"),
    ("leb-reserved", leb_key(b"\x07"), "reserved collection id 7"),
    ("leb-empty-key", leb_key(b"\x08", b""), "empty logical key"),
]


@pytest.mark.parametrize("bad, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_strict_names_the_offset_and_reason(bad, reason):
    data = b"".join(GOOD) + bad + b"".join(TAIL)
    with pytest.raises(dcpfast.DcpFormatError) as info:
        dcpfast.scan(data, collections=True)
    assert info.value.offset == len(b"".join(GOOD))
    assert reason in info.value.reason
    assert str(info.value).startswith(f"at byte {info.value.offset}: ")


@pytest.mark.parametrize("bad, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_skip_keeps_every_intact_frame(bad, reason):
    head, tail = b"".join(GOOD), b"".join(TAIL)
    batch = dcpfast.scan(head + bad + tail, collections=True, errors="skip")
    clean = dcpfast.scan(head + tail, collections=True)
    assert len(batch) == len(GOOD) + len(TAIL)
    for name in ("opcode", "by_seqno", "collection_id", "stream_id", "key_len"):
        np.testing.assert_array_equal(batch[name], clean[name])
    assert [b.key(i) for b in (batch,) for i in range(len(b))] == \
           [clean.key(i) for i in range(len(clean))]
    (region,) = batch.errors
    assert region.offset == len(head) and region.length == len(bad)
    assert reason in region.reason
    assert batch.consumed == len(head + bad + tail)


def test_max_frame_size_is_configurable():
    data = t.mutation(b"k", bytes(1000), by_seqno=1)
    assert len(dcpfast.scan(data, max_frame_size=len(data))) == 1
    with pytest.raises(dcpfast.DcpFormatError, match="exceeds max_frame_size 1000"):
        dcpfast.scan(data, max_frame_size=1000)
    with pytest.raises(ValueError):
        dcpfast.scan(data, max_frame_size=10)


def test_errors_mode_is_checked():
    with pytest.raises(ValueError, match="errors must be"):
        dcpfast.scan(b"", errors="ignore")


NOT_MAGIC = st.integers(0, 255).filter(lambda b: b not in (0x08, 0x18, 0x80, 0x81))


@settings(max_examples=150)
@given(streams(min_frames=2, max_frames=10), st.data(),
       st.lists(NOT_MAGIC, min_size=1, max_size=60))
def test_garbage_between_frames(stream, data, garbage):
    collections, raw, expected = stream
    clean = dcpfast.scan(raw, collections=collections)
    # a resynchronising scanner trusts a frame start with a known opcode
    starts = [int(o) for o, op in zip(clean["offset"], clean["opcode"])
              if op in dcpfast.protocol.KNOWN_OPCODES]
    cut = data.draw(st.sampled_from(starts + [len(raw)]))
    damaged = raw[:cut] + bytes(garbage) + raw[cut:]
    with pytest.raises(dcpfast.DcpFormatError) as info:
        dcpfast.scan(damaged, collections=collections)
    assert info.value.offset == cut
    batch = dcpfast.scan(damaged, collections=collections, errors="skip", final=True)
    assert [(e.offset, e.length) for e in batch.errors] == [(cut, len(garbage))]
    assert len(batch) == len(clean)
    for name in clean.columns:
        if name not in ("offset", "key_offset", "value_offset"):
            np.testing.assert_array_equal(batch[name], clean[name], err_msg=name)
    assert [batch.value(i) for i in range(len(batch))] == \
           [clean.value(i) for i in range(len(clean))]


@settings(max_examples=150)
@given(streams(min_frames=3, max_frames=10), st.data())
def test_any_garbage_keeps_the_frames_before_it(stream, data):
    collections, raw, expected = stream
    clean = dcpfast.scan(raw, collections=collections)
    index = data.draw(st.integers(1, len(clean) - 1))
    cut = int(clean["offset"][index])
    garbage = data.draw(st.binary(min_size=1, max_size=80))
    batch = dcpfast.scan(raw[:cut] + garbage + raw[cut:], collections=collections,
                         errors="skip")
    np.testing.assert_array_equal(batch["offset"][:index], clean["offset"][:index])
    assert_tiles(batch, 0)


def assert_tiles(batch, start):
    """Frames and skipped regions cover ``start..consumed`` exactly, without overlap."""
    extents = [(int(o) - batch.base_offset, int(b) + 24)
               for o, b in zip(batch["offset"], batch["body_len"])]
    extents += [(e.offset - batch.base_offset, e.length) for e in batch.errors]
    at = start
    for begin, length in sorted(extents):
        assert begin == at and length > 0
        at += length
    assert at == batch.consumed


@settings(max_examples=300)
@given(st.binary(max_size=400), st.booleans(), st.integers(0, 10))
def test_random_bytes_never_crash(data, collections, start):
    start = min(start, len(data))
    for errors in ("strict", "skip"):
        try:
            batch = dcpfast.scan(data, collections=collections, errors=errors, start=start)
        except dcpfast.DcpFormatError as e:
            assert errors == "strict" and start <= e.offset < len(data)
            continue
        assert start <= batch.consumed <= len(data)
        assert_tiles(batch, start)
        batch.to_arrow()
        batch.to_arrow(binary_view=True)
    batches = list(dcpfast.iter_batches([data], batch_bytes=64, collections=collections,
                                        errors="skip"))
    for batch in batches:
        assert_tiles(batch, 0)
    if data:
        assert batches[-1].base_offset + batches[-1].consumed == len(data)


@settings(max_examples=100)
@given(streams(min_frames=1, max_frames=8), st.data())
def test_bit_flips_and_truncation(stream, data):
    collections, raw, _ = stream
    damaged = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        damaged[data.draw(st.integers(0, len(raw) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    damaged = bytes(damaged[:data.draw(st.integers(0, len(raw)))])
    try:
        dcpfast.scan(damaged, collections=collections)
    except dcpfast.DcpFormatError as e:
        assert 0 <= e.offset < len(damaged)
    batches = list(dcpfast.iter_batches([damaged], collections=collections, errors="skip"))
    assert len(batches) == (1 if damaged else 0)
    for batch in batches:
        assert_tiles(batch, 0)
        assert batch.consumed == len(damaged)


def test_columns_grow_when_early_frames_are_large():
    big = [t.mutation(b"k%d" % i, bytes(5000), by_seqno=i + 1) for i in range(300)]
    small = [t.noop(opaque=i) for i in range(20000)]
    batch = dcpfast.scan(b"".join(big + small), collections=False)
    assert len(batch) == 20300
    assert list(batch["by_seqno"][:300]) == list(range(1, 301))
    assert not batch["by_seqno"][300:].any()
    assert list(batch["opaque"][300:]) == list(range(20000))


def mutations(n, first=1):
    return b"".join(t.mutation(b"key-%d" % i, b"value", by_seqno=i)
                    for i in range(first, first + n))


def test_a_corrupt_length_mid_file_loses_only_its_frame(tmp_path):
    bad = bytearray(t.mutation(b"victim", b"v", by_seqno=999))
    bad[9] ^= 1                                   # body length + 65536: runs past the end
    data = mutations(100) + bytes(bad) + mutations(100, first=1000)
    path = tmp_path / "flip.dcp"
    path.write_bytes(data)
    batch = dcpfast.read(path, errors="skip")
    assert len(batch) == 200
    assert [(e.offset, e.length) for e in batch.errors] == [(len(mutations(100)), len(bad))]
    assert sum(len(b) for b in dcpfast.iter_batches(path, errors="skip")) == 200
    with pytest.raises(dcpfast.DcpFormatError, match="truncated frame") as info:
        dcpfast.read(path)
    assert info.value.offset == len(mutations(100))


def test_an_intact_frame_between_two_damaged_ones_is_kept():
    a, b, c, d, e = (bytearray(t.mutation(b"key-" + n, b"val", by_seqno=i + 1))
                     for i, n in enumerate([b"A", b"B", b"C", b"D", b"E"]))
    b[0] = 0x42                                   # bad magic
    d[5] = 0x09                                   # bad datatype, lengths intact
    batch = dcpfast.scan(bytes(a + b + c + d + e), errors="skip", collections=False)
    assert batch["by_seqno"].tolist() == [1, 3, 5]
    assert [(r.offset, r.length) for r in batch.errors] == [(63, 63), (189, 63)]
    assert "unknown magic" in batch.errors[0].reason
    assert "invalid datatype" in batch.errors[1].reason


def skip_results(batches):
    frames = [(int(o), int(s)) for b in batches for o, s in zip(b["offset"], b["by_seqno"])]
    damaged = set()
    for b in batches:
        for region in b.errors:
            damaged.update(range(region.offset, region.offset + region.length))
    return frames, damaged


SPLIT_CASES = {
    "candidate-cut-by-chunk": (mutations(3) + b"\x42" * 50 + t.noop() + b"\x42" * 50
                               + mutations(3, first=100), [255]),
    "bad-frame-cut-by-chunk": (mutations(3) + patched(
        t.mutation(b"outer", b"x" * 40 + t.mutation(b"inner", b"y", by_seqno=4242), by_seqno=4),
        5, b"\x08") + mutations(3, first=100), [295]),
}


@pytest.mark.parametrize("case", sorted(SPLIT_CASES))
def test_skip_mode_does_not_depend_on_chunking(case):
    data, cuts = SPLIT_CASES[case]
    whole = skip_results(list(dcpfast.iter_batches([data], errors="skip", collections=False)))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    split = skip_results(list(dcpfast.iter_batches(chunks, batch_bytes=cuts[0],
                                                   errors="skip", collections=False)))
    assert split == whole


@settings(max_examples=150, deadline=None)
@given(streams(min_frames=2, max_frames=12), st.data())
def test_any_damage_any_chunking_same_frames(stream, data):
    collections, raw, _ = stream
    damaged = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 5))):
        at = data.draw(st.integers(0, len(raw) - 1))
        damaged[at:at + 1] = data.draw(st.binary(min_size=0, max_size=8))
    damaged = bytes(damaged)
    whole = skip_results(list(dcpfast.iter_batches([damaged], errors="skip",
                                                   collections=collections)))
    size = data.draw(st.integers(24, max(24, len(damaged))))
    chunks = [damaged[i:i + size] for i in range(0, len(damaged), size)]
    split = skip_results(list(dcpfast.iter_batches(chunks, batch_bytes=size, errors="skip",
                                                   collections=collections)))
    assert split == whole


def scan_job(noops: str):
    """A collections-off scan of ``big_values_after_noops(noops)``, counting its frames."""
    data = big_values_after_noops(int(noops))
    return lambda: len(dcpfast.scan(data, collections=False))


def big_values_after_noops(noops):
    return t.noop() * noops + b"".join(t.mutation(b"k%d" % i, bytes(1 << 20), by_seqno=i + 1)
                                       for i in range(40))


def test_small_frames_first_do_not_reserve_for_the_whole_input():
    frames, peak = peak_in_child("tests.core.test_scan_malformed", "scan_job", 256)
    assert frames == 296
    assert peak < 16 << 20, peak


def test_private_copy_helpers_check_their_ranges():
    from tests.cores import every
    cores = every("scan")
    src = np.frombuffer(b"ABCDEFGHIJ", np.uint8)
    for core in cores:
        with pytest.raises(ValueError):
            core.gather(src, np.array([0], np.uint64), np.array([-5, 0], np.int64),
                        np.zeros(10, np.uint8))
        with pytest.raises(ValueError):
            core.gather(src, np.array([8], np.uint64), np.array([0, 5], np.int64),
                        np.zeros(10, np.uint8))
        with pytest.raises(ValueError):
            core.views(src, np.array([8], np.uint64), np.array([5], np.int64),
                       np.zeros(16, np.uint8), 31)


def test_arguments_are_checked():
    data = mutations(3)
    with pytest.raises(ValueError, match="start"):
        dcpfast.scan(data, start=-1)
    with pytest.raises(ValueError, match="start"):
        dcpfast.scan(data, start=len(data) + 1)
    with pytest.raises(ValueError, match="max_frames"):
        dcpfast.scan(data, max_frames=-1)
    assert len(dcpfast.scan(data, max_frame_size=2 ** 70)) == 3


def test_chunked_skip_stays_linear_on_headers_claiming_large_bodies():
    import struct
    good = t.mutation(b"a", b"1", by_seqno=1)
    # extras length 0 is impossible for a mutation: rejected from the header alone
    bogus = bytes([0x80, 0x57]) + struct.pack(">HBBHIIQ", 0, 0, 0, 0, 4_000_000, 0, 0)
    data = good + b"\x42" + bogus * 40_000 + good
    batches = list(dcpfast.iter_batches([data], batch_bytes=4096, errors="skip",
                                        collections=False))
    assert sum(len(b) for b in batches) == 2
    assert sum(len(b.data) for b in batches) < 2 * len(data)     # no tail copied round after round


def test_growing_columns_stays_near_the_input_size():
    frames, peak = peak_in_child("tests.core.test_scan_malformed", "scan_job", 65536)
    assert frames == 65576
    assert peak < 64 << 20, peak
