"""DCP frame builders (``dcpfast.testing.frames``): byte-exact against the wire reference and
the frames captured from a real server; what they refuse."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from dcpfast import testing as t
from tests.spec_vectors import DOC, FAILOVER_HEX
from tests.spec_vectors import VECTORS as SPEC_VECTORS

REAL_SERVER = Path(__file__).parent.parent / "data" / "real-server"
HEX = {v.id: v.hex for v in SPEC_VECTORS}

FAILOVER = [(0xfeeddeca, 0x5432), (0xdecafe, 0x1343214), (0xfeedface, 4), (0xdeadbeef, 0x6524)]

# Spec section 7: D = docs vectors that are self-consistent, E1 = consistent docs vector
# whose table is wrong, C = corrected docs vectors, S = synthesized vectors.
VECTORS = [
    pytest.param(lambda: t.open(b"bucketstream vb[100-105]", opaque=1),
                 HEX["D1"], id="D1"),
    pytest.param(lambda: t.response(0x50, opaque=1),
                 HEX["D2"], id="D2"),
    pytest.param(lambda: t.add_stream(1, vbucket=5, opaque=1),
                 HEX["D3"], id="D3"),
    pytest.param(lambda: t.response(0x51, extras=struct.pack(">I", 0x1000), opaque=1),
                 HEX["D4"], id="D4"),
    pytest.param(lambda: t.close_stream(vbucket=5, opaque=0xdeadbeef),
                 HEX["D5"], id="D5"),
    pytest.param(lambda: t.rollback_response(0, opaque=0x1000),
                 HEX["D6"], id="D6"),
    pytest.param(lambda: t.failover_log_response(FAILOVER, opaque=0x1000),
                 HEX["D7"], id="D7"),
    pytest.param(lambda: t.get_failover_log(opaque=0xdeadbeef),
                 HEX["D8"], id="D8"),
    pytest.param(lambda: t.failover_log_response(FAILOVER, opcode=0x54, opaque=0xdeadbeef),
                 HEX["D9"], id="D9"),
    pytest.param(lambda: t.failover_log_response(FAILOVER, opcode=0x96, opaque=0xdeadbeef),
                 "819600000000000000000040deadbeef0000000000000000" + FAILOVER_HEX,
                 id="D9-0x96"),
    pytest.param(lambda: t.stream_end(0, opaque=0xdeadbeef),
                 HEX["D10"], id="D10"),
    pytest.param(lambda: t.mutation(b"hello", b"world", by_seqno=4, rev_seqno=1, **DOC),
                 HEX["D11"], id="D11"),
    pytest.param(lambda: t.frame(0x5a, opaque=0xdeadbeef),
                 HEX["D12"], id="D12"),
    pytest.param(lambda: t.set_vbucket_state(4, opaque=0xdeadbeef),
                 HEX["D13"], id="D13"),
    pytest.param(lambda: t.response(0x5c, opaque=5),
                 HEX["D14"], id="D14"),
    pytest.param(lambda: t.response(0x5d, opaque=5),
                 HEX["D15"], id="D15"),
    pytest.param(lambda: t.seqno_acknowledged(4, **DOC),
                 HEX["D16"], id="D16"),
    pytest.param(lambda: t.commit(b"hello", prepared_seqno=4, commit_seqno=5, **DOC),
                 HEX["D17"], id="D17"),
    pytest.param(lambda: t.abort(b"hello", prepared_seqno=4, abort_seqno=5, **DOC),
                 HEX["D18"], id="D18"),
    pytest.param(lambda: t.cache_transfer_end(**DOC),
                 HEX["D19"], id="D19"),
    pytest.param(lambda: t.create_collection(b"mycollection", by_seqno=4, manifest_uid=2,
                                             scope_id=8, collection_id=0, max_ttl=72000, **DOC),
                 HEX["D20"], id="D20"),
    pytest.param(lambda: t.stream_request(start=0xffeedd, vbucket_uuid=0xfeeddeca,
                                          snap_end=0xffeeff, opaque=0x1000),
                 HEX["E1"], id="E1"),
    pytest.param(lambda: t.buffer_ack(4096, opaque=5),
                 HEX["C1"], id="C1"),
    pytest.param(lambda: t.noop(opaque=5),
                 HEX["C2"], id="C2"),
    pytest.param(lambda: t.control(b"enable_noop", b"true", vbucket=5, opaque=1),
                 HEX["C3"], id="C3"),
    pytest.param(lambda: t.response(0x5e, opaque=1),
                 HEX["C4"], id="C4"),
    pytest.param(lambda: t.snapshot_marker(0, 8, 1, opaque=0xdeadbeef),
                 HEX["C5"], id="C5"),
    pytest.param(lambda: t.snapshot_marker(1, 8, 2, version=0, max_visible_seqno=8,
                                           high_completed_seqno=7, opaque=0xdeadbeef),
                 HEX["C6"], id="C6"),
    pytest.param(lambda: t.expiration(b"hello", by_seqno=5, rev_seqno=1, delete_time=0, **DOC),
                 HEX["C7"], id="C7"),
    pytest.param(lambda: t.deletion(b"hello", by_seqno=5, rev_seqno=1, **DOC),
                 HEX["C8"], id="C8"),
    pytest.param(lambda: t.prepare(b"hello", b"world", by_seqno=4, rev_seqno=1,
                                   durability_level=1, **DOC),
                 HEX["C9"], id="C9"),
    pytest.param(lambda: t.seqno_advanced(4, opaque=0xdeadbeef),
                 HEX["C10"], id="C10"),
    pytest.param(lambda: t.oso_snapshot(1, opaque=0xdeadbeef),
                 HEX["C11"], id="C11"),
    pytest.param(lambda: t.create_collection(b"mycollection", by_seqno=4, manifest_uid=2,
                                             scope_id=0, collection_id=8, max_ttl=72000, **DOC),
                 HEX["C12"], id="C12"),
    pytest.param(lambda: t.stream_request(start=0, vbucket_uuid=0xfeeddeca, opaque=0x1000),
                 HEX["C13"], id="C13"),
    pytest.param(lambda: t.cache_transfer([{
                     "cas": 4, "by_seqno": 1, "rev_seqno": 5, "flags": 0, "expiration": 0,
                     "key": b"hello", "value": b"world", "datatype": 0, "cache_hint": 0x0a}],
                     **DOC),
                 HEX["C14"], id="C14"),
    pytest.param(lambda: t.mutation(b"hello", b'{"a":1}', by_seqno=16, rev_seqno=3,
                                    flags=0xdeadbeef, datatype=1, collection_id=8,
                                    cas=0x16fedcba98765432, stream_id=71, **DOC),
                 HEX["S1"], id="S1"),
    pytest.param(lambda: t.deletion(b"k1", t.xattr_blob({"_sync": '{"a":1}'}), by_seqno=32,
                                    rev_seqno=2, delete_time=1600000000, datatype=4,
                                    collection_id=0x555, vbucket=1023, opaque=7, cas=1),
                 HEX["S2"], id="S2"),
    pytest.param(lambda: t.snapshot_marker(100, 200, 6, version=2, max_visible_seqno=199,
                                           high_completed_seqno=150, purge_seqno=50,
                                           high_prepared_seqno=180, vbucket=3, opaque=9,
                                           stream_id=2),
                 HEX["S3"], id="S3"),
    pytest.param(lambda: t.stream_end(7, vbucket=3, opaque=9, stream_id=2),
                 HEX["S4"], id="S4"),
    pytest.param(lambda: t.drop_collection(by_seqno=0x21, manifest_uid=0xc, scope_id=0,
                                           collection_id=8, vbucket=3, opaque=9),
                 HEX["S5"], id="S5"),
    pytest.param(lambda: t.create_scope(b"inventory", by_seqno=0x22, manifest_uid=0xd,
                                        scope_id=9, vbucket=3, opaque=9),
                 HEX["S6"], id="S6"),
    pytest.param(lambda: t.drop_scope(by_seqno=0x23, manifest_uid=0xe, scope_id=9, vbucket=3,
                                      opaque=9),
                 HEX["S7"], id="S7"),
    pytest.param(lambda: t.create_collection(b"c1", by_seqno=0x24, manifest_uid=0xf,
                                             scope_id=9, collection_id=0xa, vbucket=3,
                                             opaque=9),
                 HEX["S8"], id="S8"),
    pytest.param(lambda: t.commit(b"x", prepared_seqno=10, commit_seqno=11,
                                  collection_id=0xffffffff, opaque=0x44),
                 HEX["S9"], id="S9"),
    pytest.param(lambda: t.abort(b"hello", prepared_seqno=4, abort_seqno=5, collection_id=0,
                                 **DOC),
                 HEX["S10"], id="S10"),
    pytest.param(lambda: t.failover_log_response([(0xfeeddeca, 0x5432)], opaque=0x1000,
                                                 framing=t.frame_info(0, b"\x00\x0a")),
                 HEX["S11"], id="S11"),
    pytest.param(lambda: t.set_vbucket_state(1, vbucket=5, opaque=0x12),
                 HEX["S12"], id="S12"),
    pytest.param(lambda: t.response(0x56, opaque=9),
                 HEX["S13"], id="S13"),
    pytest.param(lambda: t.response(0x53, status=0x22, value=b'{"error":{"context":"x"}}',
                                    datatype=1, opaque=0x1000),
                 HEX["S14"], id="S14"),
    pytest.param(lambda: t.frame(0x52, framing=t.frame_info(16, b"\xaa\xbb"), vbucket=1,
                                 opaque=1),
                 HEX["S15"], id="S15"),
]


@pytest.mark.parametrize("build, expected", VECTORS)
def test_spec_vectors(build, expected):
    assert build().hex() == expected


def test_xattr_blob_matches_document_md():
    blob = t.xattr_blob({
        "_sync": '{"cas":"deadbeefcafefeed"}',
        "meta": '{"author":"Trond Norbye","content-type":"application/octet-stream"}',
    })
    assert blob.hex() == (
        "00000072000000215f73796e63007b22636173223a2264656164626565666361666566656564227d00"
        "000000496d657461007b22617574686f72223a2254726f6e64204e6f72627965222c22636f6e74656e"
        "742d74797065223a226170706c69636174696f6e2f6f637465742d73747265616d227d00")
    assert t.xattr_value({"_sync": "{}"}, b"body") == t.xattr_blob({"_sync": "{}"}) + b"body"


# -- real server frames ------------------------------------------------------------------

REAL_HDR = {"vbucket": 874, "opaque": 66410, "stream_id": 1}
REAL_BUILDS = {
    "frame_0x56.bin": lambda: t.snapshot_marker(0, 24, 6, **REAL_HDR),
    "frame_0x57.bin": lambda: t.mutation(
        b"xdcrProvCollections_C29854",
        b'{"name": "xdcrProvCollections_C29854", "age": 57, "index": "9854", '
        b'"body":"0000000000"}',
        by_seqno=24, rev_seqno=1, nru=2, datatype=1, collection_id=8,
        cas=0x15c7c2b955ab0000, **REAL_HDR),
    "frame_0x5f.bin": lambda: t.create_collection(b"col1", by_seqno=4, manifest_uid=0,
                                                  scope_id=8, collection_id=8, **REAL_HDR),
}


@pytest.mark.parametrize("name", sorted(REAL_BUILDS))
def test_real_server_frames(name):
    assert REAL_BUILDS[name]() == (REAL_SERVER / name).read_bytes()


def test_real_server_stream_is_279_bytes():
    stream = b"".join(REAL_BUILDS[n]() for n in ("frame_0x56.bin", "frame_0x57.bin",
                                                   "frame_0x5f.bin"))
    assert len(stream) == 279


# -- low level ---------------------------------------------------------------------------

@pytest.mark.parametrize("cid, encoded", [
    (0x00, "00"), (0x01, "01"), (0x7F, "7f"), (0x80, "8001"), (0x555, "d50a"),
    (0x7FFF, "ffff01"), (0xBFFF, "ffff02"), (0xFFFF, "ffff03"), (0x8000, "808002"),
    (0x5555, "d5aa01"), (0xCAFEF00, "80debf65"), (0xCAFEF00D, "8de0fbd70c"),
    (0xFFFFFFFF, "ffffffff0f"), (555, "ab04"),
])
def test_leb128_reference(cid, encoded):
    assert t.leb128(cid).hex() == encoded


@pytest.mark.parametrize("cid", [-1, 1 << 32])
def test_leb128_rejects_non_u32(cid):
    with pytest.raises(ValueError):
        t.leb128(cid)


@pytest.mark.parametrize("id, data, encoded", [
    (0, b"", "00"),
    (2, b"\x00\x47", "220047"),
    (14, b"", "e0"),
    (15, b"", "f000"),
    (16, b"\xaa\xbb", "f201aabb"),
    (1, b"x" * 14, "1e" + "78" * 14),
    (1, b"x" * 15, "1f00" + "78" * 15),
    (20, b"x" * 20, "ff0505" + "78" * 20),
    (270, b"x" * 270, "ffffff" + "78" * 270),
])
def test_frame_info_escapes(id, data, encoded):
    assert t.frame_info(id, data).hex() == encoded


@pytest.mark.parametrize("id, size", [(271, 0), (0, 271), (-1, 0)])
def test_frame_info_limits(id, size):
    with pytest.raises(ValueError):
        t.frame_info(id, b"x" * size)


def test_frame_rejects_impossible_headers():
    with pytest.raises(ValueError):
        t.mutation(b"k" * 256, by_seqno=1, stream_id=1)      # alt key length is a u8
    with pytest.raises(ValueError):
        t.frame(0x57, magic=0x18, key=b"k" * 256)
    with pytest.raises(ValueError):
        t.frame(0x57, key=b"k" * 0x10000)
    with pytest.raises(ValueError):
        t.frame(0x57, magic=0x80, framing=b"\x22\x00\x01")
    with pytest.raises(ValueError):
        t.frame(0x57, status=1)
    with pytest.raises(ValueError):
        t.noop(stream_id=0)
    assert len(t.mutation(b"k" * 255, by_seqno=1, stream_id=1)) == 24 + 3 + 31 + 255


def test_alt_frame_header_bytes():
    data = t.mutation(b"key", b"v", by_seqno=1, collection_id=9, stream_id=0x1234)
    assert data[:4] == bytes([0x08, 0x57, 3, 4])
    assert struct.unpack_from(">I", data, 8)[0] == 3 + 31 + 4 + 1
    assert data[24:27] == b"\x22\x12\x34"


def test_magic_override_and_fel_zero_alt_frame():
    data = t.noop(magic=0x08, vbucket=7)
    assert data.hex() == "085c00000000000700000000000000000000000000000000"


@pytest.mark.parametrize("kwargs, value_len", [
    ({"version": 0}, 36),
    ({"version": 1, "timestamp": 0x1122334455667788}, 44),
    ({"version": 2, "purge_seqno": 9}, 44),
    ({"version": 2, "purge_seqno": 9, "high_prepared_seqno": 5}, 52),
])
def test_snapshot_marker_v2_variants(kwargs, value_len):
    data = t.snapshot_marker(3, 10, 2, max_visible_seqno=10, high_completed_seqno=4, **kwargs)
    assert data[4] == 1 and data[24] == kwargs["version"]
    assert len(data) == 25 + value_len
    assert struct.unpack_from(">QQIQQ", data, 25) == (3, 10, 2, 10, 4)
    if value_len > 36:
        tail = struct.unpack_from(">Q", data, 61)[0]
        assert tail == kwargs.get("timestamp", kwargs.get("purge_seqno"))
    if value_len == 52:
        assert struct.unpack_from(">Q", data, 69)[0] == 5


@pytest.mark.parametrize("kwargs", [
    {"version": None, "max_visible_seqno": 1},
    {"version": 0, "purge_seqno": 1},
    {"version": 2, "timestamp": 1},
    {"version": 3},
])
def test_snapshot_marker_rejects_fields_of_other_versions(kwargs):
    with pytest.raises(ValueError):
        t.snapshot_marker(1, 2, **kwargs)


def test_open_with_json_value_sets_datatype():
    data = t.open(b"conn", 0x01, b'{"consumer_name":"c"}')
    assert data[5] == 0x01 and data[-21:] == b'{"consumer_name":"c"}'


def test_hello_request_and_response():
    req = t.hello([0x12, 0x0a], opaque=3)
    assert req[:8] == bytes([0x80, 0x1f, 0, 7, 0, 0, 0, 0])
    assert req[24:] == b"dcpfast" + bytes.fromhex("0012000a")
    resp = t.hello_response([0x12], opaque=3)
    assert resp[0] == 0x81 and resp[24:] == b"\x00\x12"


def test_prepare_tail_and_deletion_v1():
    data = t.prepare(b"k", by_seqno=2, nru=1, deleted=True, durability_level=3, cas=5)
    assert data[52:55] == bytes([1, 1, 3])
    assert len(t.deletion(b"k", by_seqno=1)) == 24 + 18 + 1


def test_cache_transfer_rejects_unknown_record_fields():
    with pytest.raises(ValueError):
        t.cache_transfer([{"by_seqno": 1, "key": b"\x00k", "vbucket": 3}])
