"""Damaged input: strict mode names the frame and the problem, skip mode keeps the rest."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import testing as t
from strategies import streams

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
    batch = dcpfast.scan(damaged, collections=collections, errors="skip")
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
    spans = [(int(o) - batch.base_offset, int(b) + 24)
             for o, b in zip(batch["offset"], batch["body_len"])]
    spans += [(e.offset - batch.base_offset, e.length) for e in batch.errors]
    at = start
    for begin, length in sorted(spans):
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
