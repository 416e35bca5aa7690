"""Every test vector of the wire reference, and the frames captured from a real server."""

from __future__ import annotations

from pathlib import Path

import pytest

import dcpfast
from dcpfast import testing as t
from tests.conftest import scan_stream
from tests.spec_vectors import VECTORS

REAL_SERVER = Path(__file__).parent / "data" / "real-server"


def check_fields(frame, expect):
    got = {name: frame.get(name) for name in expect}
    assert got == expect


@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
def test_vector_decodes(vector):
    batch = dcpfast.scan(vector.data, collections=vector.collections, errors="skip")
    assert len(batch) == vector.frames
    if vector.frames:
        check_fields(batch.frame(0), vector.expect)
        assert batch["offset"][0] == 0


@pytest.mark.parametrize("vector", VECTORS, ids=[v.id for v in VECTORS])
def test_vector_strict_errors(vector):
    if vector.error is None:
        batches = scan_stream(vector.data, collections=vector.collections)
        assert sum(map(len, batches)) == vector.frames
        assert batches[-1].consumed == len(vector.data)
        return
    offset, reason = vector.error
    with pytest.raises(dcpfast.DcpFormatError) as info:
        scan_stream(vector.data, collections=vector.collections)
    assert info.value.offset == offset
    assert reason in info.value.reason
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.error],
                         ids=[v.id for v in VECTORS if v.error])
def test_vector_skip_reports_damage(vector):
    offset, reason = vector.error
    (batch,) = scan_stream(vector.data, collections=vector.collections, errors="skip")
    assert len(batch) == vector.frames
    assert batch.errors[0].offset == offset
    assert reason in batch.errors[0].reason
    covered = sum(e.length for e in batch.errors) + int(batch["body_len"].sum()) + 24 * len(batch)
    assert covered == len(vector.data)


def test_scan_leaves_truncated_tail_for_the_next_chunk():
    e2 = next(v for v in VECTORS if v.id == "E2").data
    c1 = next(v for v in VECTORS if v.id == "C1").data
    batch = dcpfast.scan(c1 + e2)
    assert len(batch) == 1 and batch.consumed == len(c1) and not batch.errors


def real_server_stream():
    return b"".join((REAL_SERVER / f"frame_0x{op}.bin").read_bytes() for op in ("56", "57", "5f"))


def test_real_server_frames():
    data = real_server_stream()
    assert len(data) == 279
    batch = dcpfast.scan(data)
    assert batch.collections        # inferred from the system event
    assert len(batch) == 3 and batch.consumed == 279
    common = dict(magic=0x08, vbucket=874, opaque=0x0001036A, stream_id=1, framing_len=3)
    check_fields(batch.frame(0), dict(kind="snapshot_marker_v1", opcode=0x56, snap_start=0,
                                      snap_end=24, snap_flags=0x06, extras_len=20, **common))
    check_fields(batch.frame(1), dict(
        kind="mutation", opcode=0x57, datatype=0x01, cas=0x15C7C2B955AB0000, by_seqno=24,
        rev_seqno=1, flags=0, expiration=0, lock_time=0, collection_id=8, key_len=26,
        key=b"xdcrProvCollections_C29854", value_len=87, **common))
    assert batch.value(1) == (b'{"name": "xdcrProvCollections_C29854", "age": 57, '
                              b'"index": "9854", "body":"0000000000"}')
    check_fields(batch.frame(2), dict(kind="system_event", opcode=0x5F, by_seqno=4, event_id=0,
                                      event_version=0, key=b"col1", value_len=16, **common))
    assert batch.value(2) == bytes.fromhex("0000000000000000" "00000008" "00000008")
    assert "collection_id" not in batch.frame(2)     # a system event key is a name


def test_real_server_frames_without_collections_keep_the_prefix():
    batch = dcpfast.scan(real_server_stream(), collections=False)
    assert batch.key(1) == b"\x08xdcrProvCollections_C29854"
    assert batch.validity("collection_id") is not None and not batch.validity("collection_id").any()


def test_stream_id_after_escaped_frame_infos():
    framing = t.frame_info(20, bytes(16)) + t.frame_info(0, b"") + t.frame_info(2, b"\x01\x02")
    data = t.frame(0x55, framing=framing, extras=bytes(4))
    frame = dcpfast.scan(data).frame(0)
    assert frame.stream_id == 0x0102 and frame.framing_len == len(framing) == 23
