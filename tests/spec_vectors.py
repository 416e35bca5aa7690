"""The wire reference's test vectors (section 7) and what a strict decoder makes of each.

``D`` vectors are consistent examples from the protocol pages, ``E`` the broken ones,
``C`` their corrected versions, ``S`` vectors built from the server's struct layouts.
``expect`` lists the fields of the first frame, ``frames`` how many complete frames the
bytes hold, ``error`` the (offset, reason) a strict scan of the whole input reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAILOVER_HEX = ("00000000feeddeca00000000000054320000000000decafe000000000134321400000000feedface"
                "000000000000000400000000deadbeef0000000000006524")
DOC = {"vbucket": 0x210, "opaque": 0x1210}


@dataclass(frozen=True)
class Vector:
    id: str
    hex: str
    expect: dict = field(default_factory=dict)
    collections: bool = False
    frames: int = 1
    error: tuple[int, str] | None = None

    @property
    def data(self) -> bytes:
        return bytes.fromhex(self.hex)


VECTORS = [
    Vector("D1", "80500018080000000000002000000001000000000000000000000000000000006275636b"
                 "657473747265616d2076625b3130302d3130355d",
           # a connection's request: its vbucket field is not a vbucket (carried by none)
           dict(kind="open", opcode=0x50, vbucket=None, opaque=1, extras_len=8, key_len=24,
                key=b"bucketstream vb[100-105]", value=b"", body_len=0x20)),
    Vector("D2", "815000000000000000000000000000010000000000000000",
           dict(kind="response", magic=0x81, opcode=0x50, status=0, opaque=1, body_len=0)),
    Vector("D3", "80510000040000050000000400000001000000000000000000000001",
           dict(kind="add_stream", vbucket=5, opaque=1, extras_len=4)),
    Vector("D4", "81510000040000000000000400000001000000000000000000001000",
           dict(kind="response", opcode=0x51, status=0, extras_len=4, opaque=1, value=b"")),
    Vector("D5", "805200000000000500000000deadbeef0000000000000000",
           dict(kind="close_stream", vbucket=5, opaque=0xdeadbeef)),
    Vector("D6", "8153000000000023000000080000100000000000000000000000000000000000",
           dict(kind="response", status=0x23, opaque=0x1000, value=bytes(8))),
    Vector("D7", "815300000000000000000040000010000000000000000000" + FAILOVER_HEX,
           dict(kind="response", status=0, opaque=0x1000, value_len=64,
                value=bytes.fromhex(FAILOVER_HEX))),
    Vector("D8", "805400000000000000000000deadbeef0000000000000000",
           dict(kind="get_failover_log", opaque=0xdeadbeef)),
    Vector("D9", "815400000000000000000040deadbeef0000000000000000" + FAILOVER_HEX,
           dict(kind="response", opcode=0x54, opaque=0xdeadbeef, value_len=64)),
    Vector("D10", "805500000400000000000004deadbeef000000000000000000000000",
           dict(kind="stream_end", end_status=0, opaque=0xdeadbeef)),
    Vector("D11", "805700051f000210000000290000121000000000000000000000000000000004000000000000"
                  "000100000000000000000000000000000068656c6c6f776f726c64",
           dict(kind="mutation", datatype=0, body_len=0x29, cas=0, by_seqno=4, rev_seqno=1,
                flags=0, expiration=0, lock_time=0, key=b"hello", value=b"world",
                key_offset=55, value_offset=60, **DOC)),
    Vector("D12", "805a00000000000000000000deadbeef0000000000000000",
           dict(kind="flush", opcode=0x5a)),
    Vector("D13", "805b00000100000000000001deadbeef000000000000000004",
           dict(kind="set_vbucket_state", vb_state=4)),
    Vector("D14", "815c00000000000000000000000000050000000000000000",
           dict(kind="response", opcode=0x5c, opaque=5)),
    Vector("D15", "815d00000000000000000000000000050000000000000000",
           dict(kind="response", opcode=0x5d, opaque=5)),
    Vector("D16", "8061000008000210000000080000121000000000000000000000000000000004",
           dict(kind="seqno_acknowledged", by_seqno=4, **DOC)),
    Vector("D17", "8062000510000210000000150000121000000000000000000000000000000004000000000000"
                  "000568656c6c6f",
           dict(kind="commit", prepared_seqno=4, by_seqno=5, key=b"hello", **DOC)),
    Vector("D18", "8063000510000210000000150000121000000000000000000000000000000004000000000000"
                  "000568656c6c6f",
           dict(kind="abort", prepared_seqno=4, by_seqno=5, key=b"hello", **DOC)),
    Vector("D19", "806700000000021000000000000012100000000000000000",
           dict(kind="cache_transfer_end", **DOC)),
    # the page's labels swap scope and collection; the bytes are what they are
    Vector("D20", "805f000c0d0002100000002d000012100000000000000000000000000000000400000000016d"
                  "79636f6c6c656374696f6e0000000000000002000000080000000000011940",
           dict(kind="system_event", by_seqno=4, event_id=0, event_version=1,
                key=b"mycollection", value_len=20, **DOC)),
    Vector("D21", "8100000000000001000000090000000000000000000000004e6f7420666f756e64",
           dict(kind="response", opcode=0, status=1, value=b"Not found")),
    Vector("E1", "80530000300000000000003000001000000000000000000000000000000000000000000000ff"
                 "eeddffffffffffffffff00000000feeddeca0000000000ffeedd0000000000ffeeff",
           dict(kind="stream_request", extras_len=48, opaque=0x1000, value=b"")),
    Vector("E2", "8053000030000000000000300000100000000000000000000000000000000000000000000000"
                 "0000ffffffffffffffff00000000feeddeca0000000000000000",
           frames=0, error=(0, "truncated frame: 64 of its 72 bytes")),
    Vector("E3", "805600001400000000000000deadbeef0000000000000000000000000000000000000000000000"
                 "0800000001",
           frames=0, error=(0, "body length 0 is shorter than framing extras + extras + key (20)")),
    Vector("E4", "805600001400000000000000deadbeef0000000000000000010000000000000001000000000000"
                 "00080000000200000000000000080000000000000007",
           frames=0, error=(0, "body length 0 is shorter")),
    Vector("E5", "80580005120002100000001700001210000000000000000000000000000000050000000000000001"
                 "000001633a3a68656c6c6f",
           dict(kind="deletion_v1", by_seqno=5, rev_seqno=1, key=bytes.fromhex("01633a3a68")),
           error=(47, "unknown magic 0x65")),
    Vector("E5-collections", "80580005120002100000001700001210000000000000000000000000000000050000"
                             "000000000001000001633a3a68656c6c6f",
           collections=True, frames=0, error=(0, "reserved collection id 1")),
    Vector("E6", "805900051200021000000017000012100000000000000000000000000000000500000000000000"
                 "010000000068656c6c6f",
           frames=0, error=(0, "extras length 18 impossible for opcode 0x59")),
    Vector("E7", "805c0000000000000000000000000000000000000000000000000000",
           dict(kind="noop", opaque=0), error=(24, "unknown magic 0x00")),
    Vector("E8", "805d0000000000000000000400000005000000000000000000001000",
           frames=0, error=(0, "extras length 0 impossible for opcode 0x5d")),
    Vector("E9", "805e00000400000500000004000000010000000000000000656e61626c655f6e6f6f7074727565",
           frames=0, error=(0, "extras length 4 impossible for opcode 0x5e")),
    Vector("E10", "815100000400000000000004000000010000000000000000",
           frames=0, error=(0, "truncated frame: 24 of its 28 bytes")),
    Vector("E11", "805700051f000210000000290000121000000000000000000000000000000004000000000000"
                  "000100000000000000000000000000000168656c6c6f776f726c64",
           dict(kind="mutation", by_seqno=4, rev_seqno=1, key=b"hello", value=b"world")),
    Vector("E12", "806500000400000000000000deadbeef00000000000000000000000000000004",
           frames=0, error=(0, "body length 0 is shorter")),
    Vector("E13", "806500000400000000000000deadbeef000000000000000000000001",
           frames=0, error=(0, "body length 0 is shorter")),
    Vector("E14", "8066000000000210000000320000121000000000000000000000000000000004000000000000"
                  "0001000000050000000000000000000000000005000a68656c6c6f776f726c64",
           frames=0, error=(0, "truncated frame: 70 of its 74 bytes")),
    Vector("E15", "800200070800000000000012000000000000000000000000deadbeef00000e10ab0448656c6c6f"
                  "576f726c64",
           dict(kind="request", opcode=0x02, key_len=7, extras_len=8, value=b"Wor"),
           error=(42, "unknown magic 0x6c")),
    Vector("C1", "805d0000040000000000000400000005000000000000000000001000",
           dict(kind="buffer_ack", ack_bytes=4096, opaque=5)),
    Vector("C2", "805c00000000000000000000000000050000000000000000",
           dict(kind="noop", opaque=5, vbucket=None)),
    Vector("C3", "805e000b000000050000000f000000010000000000000000656e61626c655f6e6f6f7074727565",
           dict(kind="control", key=b"enable_noop", value=b"true", vbucket=None, opaque=1)),
    Vector("C4", "815e00000000000000000000000000010000000000000000",
           dict(kind="response", opcode=0x5e, opaque=1)),
    Vector("C5", "805600001400000000000014deadbeef0000000000000000000000000000000000000000000000"
                 "0800000001",
           dict(kind="snapshot_marker_v1", snap_start=0, snap_end=8, snap_flags=1)),
    Vector("C6", "805600000100000000000025deadbeef000000000000000000000000000000000100000000000000"
                 "080000000200000000000000080000000000000007",
           dict(kind="snapshot_marker_v2_0", marker_version=0, snap_start=1, snap_end=8,
                snap_flags=2, max_visible_seqno=8, high_completed_seqno=7)),
    Vector("C7", "805900051400021000000019000012100000000000000000000000000000000500000000000000"
                 "010000000068656c6c6f",
           dict(kind="expiration", by_seqno=5, rev_seqno=1, delete_time=0, key=b"hello",
                value=b"", **DOC)),
    Vector("C8", "80580005120002100000001700001210000000000000000000000000000000050000000000000001"
                 "000068656c6c6f",
           dict(kind="deletion_v1", by_seqno=5, rev_seqno=1, key=b"hello", **DOC)),
    Vector("C9", "806000051f000210000000290000121000000000000000000000000000000004000000000000"
                 "000100000000000000000000000000000168656c6c6f776f726c64",
           dict(kind="prepare", by_seqno=4, rev_seqno=1, deleted=0, durability_level=1,
                key=b"hello", value=b"world", **DOC)),
    Vector("C10", "806400000800000000000008deadbeef00000000000000000000000000000004",
           dict(kind="seqno_advanced", by_seqno=4)),
    Vector("C11", "806500000400000000000004deadbeef000000000000000000000001",
           dict(kind="oso_snapshot", oso_flags=1)),
    Vector("C12", "805f000c0d0002100000002d000012100000000000000000000000000000000400000000016d"
                  "79636f6c6c656374696f6e0000000000000002000000000000000800011940",
           dict(kind="system_event", by_seqno=4, event_id=0, event_version=1,
                key=b"mycollection",
                value=bytes.fromhex("0000000000000002000000000000000800011940"), **DOC)),
    Vector("C13", "80530000300000000000003000001000000000000000000000000000000000000000000000000000"
                  "ffffffffffffffff00000000feeddeca00000000000000000000000000000000",
           dict(kind="stream_request", opaque=0x1000, vbucket=0)),
    Vector("C14", "8066000000000210000000320000121000000000000000000000000000000004000000000000"
                  "000100000000000000050000000500000000000000000005000a68656c6c6f776f726c64",
           dict(kind="cache_transfer", value_len=50, **DOC)),
    Vector("S1", "085703061f0102100000002f0000121016fedcba9876543222004700000000000000100000000000"
                 "000003deadbeef00000000000000000000000868656c6c6f7b2261223a317d",
           dict(kind="mutation", magic=0x08, framing_len=3, datatype=1, cas=0x16fedcba98765432,
                stream_id=71, by_seqno=16, rev_seqno=3, flags=0xdeadbeef, expiration=0,
                lock_time=0, collection_id=8, key=b"hello", value=b'{"a":1}', key_offset=59,
                key_len=5, value_offset=64, value_len=7, **DOC),
           collections=True),
    Vector("S2", "80580004150403ff0000002f00000007000000000000000100000000000000200000000000"
                 "0000025f5e100000d50a6b31000000120000000e5f73796e63007b2261223a317d00",
           dict(kind="deletion_v2", datatype=4, vbucket=1023, opaque=7, cas=1, by_seqno=32,
                rev_seqno=2, delete_time=1600000000, collection_id=0x555, key=b"k1",
                value_len=22),
           collections=True),
    Vector("S3", "08560300010000030000003800000009000000000000000022000202000000000000006400000000"
                 "000000c80000000600000000000000c70000000000000096000000000000003200000000000000b4",
           dict(kind="snapshot_marker_v2_2", stream_id=2, marker_version=2, snap_start=100,
                snap_end=200, snap_flags=6, max_visible_seqno=199, high_completed_seqno=150,
                purge_seqno=50, high_prepared_seqno=180, vbucket=3, opaque=9)),
    Vector("S4", "08550300040000030000000700000009000000000000000022000200000007",
           dict(kind="stream_end", stream_id=2, end_status=7)),
    Vector("S5", "805f00000d0000030000001d000000090000000000000000000000000000002100000001000000000"
                 "00000000c0000000000000008",
           dict(kind="system_event", by_seqno=0x21, event_id=1, event_version=0, key=b"",
                value_len=16)),
    Vector("S6", "805f00090d0000030000002200000009000000000000000000000000000000220000000300696e76"
                 "656e746f7279000000000000000d00000009",
           dict(kind="system_event", by_seqno=0x22, event_id=3, key=b"inventory")),
    Vector("S7", "805f00000d00000300000019000000090000000000000000000000000000002300000004000000000"
                 "00000000e00000009",
           dict(kind="system_event", by_seqno=0x23, event_id=4, value_len=12)),
    Vector("S8", "805f00020d0000030000001f00000009000000000000000000000000000000240000000000633100"
                 "0000000000000f000000090000000a",
           dict(kind="system_event", by_seqno=0x24, event_id=0, key=b"c1", value_len=16)),
    Vector("S9", "806200061000000000000016000000440000000000000000000000000000000a000000000000000b"
                 "ffffffff0f78",
           dict(kind="commit", prepared_seqno=10, by_seqno=11, collection_id=0xffffffff,
                key=b"x"),
           collections=True),
    Vector("S10", "806300061000021000000016000012100000000000000000000000000000000400000000000000"
                  "050068656c6c6f",
           dict(kind="abort", prepared_seqno=4, by_seqno=5, collection_id=0, key=b"hello"),
           collections=True),
    Vector("S11", "18530300000000000000001300001000000000000000000002000a00000000feeddeca000000000"
                  "0005432",
           dict(kind="response", magic=0x18, framing_len=3, status=0, value_len=16,
                server_duration_us=27)),
    Vector("S12", "805b0000010000050000000100000012000000000000000001",
           dict(kind="set_vbucket_state", vb_state=1, vbucket=5, opaque=0x12)),
    Vector("S13", "815600000000000000000000000000090000000000000000",
           dict(kind="response", opcode=0x56, opaque=9)),
    Vector("S14", "8153000000010022000000190000100000000000000000007b226572726f72223a7b22636f6e74"
                  "657874223a2278227d7d",
           dict(kind="response", status=0x22, datatype=1, value=b'{"error":{"context":"x"}}')),
    Vector("S15", "085204000000000100000004000000010000000000000000f201aabb",
           dict(kind="close_stream", framing_len=4, vbucket=1)),
]
