"""Synthetic conversations (``dcpfast.testing.conversation``): every frame consistent with
the record of what it must decode to, a handshake and content as configured, the same
stream for the same seed, and frames of the size asked for."""

from __future__ import annotations

import json
import struct
from collections import defaultdict

import cramjam
import pytest

from dcpfast import testing as t

DOCUMENT_OPS = {0x57, 0x58, 0x59, 0x60, 0x62, 0x63}
ITEM_OPS = {0x57, 0x58, 0x59, 0x60}
#: (field, extras offset, struct code) per (opcode, extras length).
EXTRAS_FIELDS = {
    (0x57, 31): [("by_seqno", 0, "Q"), ("rev_seqno", 8, "Q"), ("flags", 16, "I"),
                 ("expiration", 20, "I"), ("lock_time", 24, "I")],
    (0x60, 31): [("by_seqno", 0, "Q"), ("rev_seqno", 8, "Q"), ("flags", 16, "I"),
                 ("expiration", 20, "I"), ("lock_time", 24, "I"),
                 ("deleted", 29, "B"), ("durability_level", 30, "B")],
    (0x58, 18): [("by_seqno", 0, "Q"), ("rev_seqno", 8, "Q")],
    (0x58, 21): [("by_seqno", 0, "Q"), ("rev_seqno", 8, "Q"), ("delete_time", 16, "I")],
    (0x59, 20): [("by_seqno", 0, "Q"), ("rev_seqno", 8, "Q"), ("delete_time", 16, "I")],
    (0x62, 16): [("prepared_seqno", 0, "Q"), ("by_seqno", 8, "Q")],
    (0x63, 16): [("prepared_seqno", 0, "Q"), ("by_seqno", 8, "Q")],
    (0x56, 20): [("snap_start", 0, "Q"), ("snap_end", 8, "Q"), ("snap_flags", 16, "I")],
    (0x56, 1): [("marker_version", 0, "B")],
    (0x5f, 13): [("by_seqno", 0, "Q"), ("event_id", 8, "I"), ("event_version", 12, "B")],
    (0x64, 8): [("by_seqno", 0, "Q")],
    (0x55, 4): [("end_status", 0, "I")],
}
MARKER_VALUE = [("snap_start", 0, "Q"), ("snap_end", 8, "Q"), ("snap_flags", 16, "I"),
                ("max_visible_seqno", 20, "Q"), ("high_completed_seqno", 28, "Q"),
                ("purge_seqno", 36, "Q"), ("high_prepared_seqno", 44, "Q")]


def parse(data: bytes) -> dict:
    """A small independent parse of one frame into header values and sections."""
    magic, opcode = data[0], data[1]
    if magic in (0x08, 0x18):
        fel, keylen = data[2], data[3]
    else:
        fel, keylen = 0, struct.unpack_from(">H", data, 2)[0]
    extlen, datatype, word, bodylen, opaque, cas = struct.unpack_from(">BBHIIQ", data, 4)
    framing = data[24:24 + fel]
    extras = data[24 + fel:24 + fel + extlen]
    key = data[24 + fel + extlen:24 + fel + extlen + keylen]
    value = data[24 + fel + extlen + keylen:24 + bodylen]
    out = {"magic": magic, "opcode": opcode, "datatype": datatype, "opaque": opaque,
           "cas": cas, "bodylen": bodylen, "framing": framing, "extras": extras, "key": key,
           "value": value}
    out["status" if magic in (0x81, 0x18) else "vbucket"] = word
    if framing:
        assert framing[0] == 0x22 and len(framing) == 3
        out["stream_id"] = struct.unpack(">H", framing[1:])[0]
    return out


def split_leb128(key: bytes) -> tuple[int, bytes]:
    cid = shift = 0
    for i, byte in enumerate(key):
        cid |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return cid, key[i + 1:]
    raise AssertionError("no LEB128 stop byte")


def parse_xattrs(value: bytes) -> tuple[dict, bytes]:
    total = struct.unpack_from(">I", value)[0]
    pos, pairs = 4, {}
    while pos < 4 + total:
        size = struct.unpack_from(">I", value, pos)[0]
        name, val, end = value[pos + 4:pos + 4 + size].split(b"\0")
        assert end == b""
        pairs[name.decode()] = json.loads(val)
        pos += 4 + size
    assert pos == 4 + total
    return pairs, value[pos:]


CONFIGS = [
    pytest.param({}, id="defaults"),
    pytest.param({"stream_ids": True, "marker_version": 2}, id="sids-v2.2"),
    pytest.param({"collections": False, "delete_times": False}, id="plain-v1-deletes"),
    pytest.param({"sync_writes": True, "marker_version": 0, "snappy_ratio": 0.5},
                 id="sync-writes-v2.0"),
    pytest.param({"marker_version": 1, "handshake": False, "vbuckets": 1,
                  "xattr_ratio": 0.5, "snapshot_size": 3}, id="v2.1-no-handshake"),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_synthetic_frames_are_consistent(config):
    items = 1500
    frames = t.synthetic_frames(items, seed=11, **config)
    collections = config.get("collections", True)
    stream_ids = config.get("stream_ids", False)
    last_seqno = defaultdict(int)
    snapshot = {}
    ended = set()
    created = defaultdict(lambda: {0})
    prepared = defaultdict(dict)
    count = 0
    for frame in frames:
        f, p = frame.fields, parse(frame.data)
        assert len(frame.data) == 24 + p["bodylen"]
        for name in ("magic", "opcode", "datatype", "opaque", "cas"):
            assert p[name] == f[name], name
        if f["magic"] in (0x81, 0x18):
            assert p["status"] == f["status"]
            assert p["value"] == f["value"]
            continue
        assert p["vbucket"] == f.get("vbucket", 0)     # the connection's frames: field 0
        assert p.get("stream_id") == f.get("stream_id")
        op, vb = f["opcode"], f.get("vbucket", 0)
        if op == 0x5c:
            assert "stream_id" not in f and vb == 0
            continue
        assert vb not in ended
        assert ("stream_id" in f) == stream_ids
        for name, at, code in EXTRAS_FIELDS[(op, len(p["extras"]))]:
            assert struct.unpack_from(">" + code, p["extras"], at)[0] == f[name], name
        if op == 0x56:
            if len(p["extras"]) == 1:
                assert p["value"] == f["value"]
                disk = bool(f["snap_flags"] & 0x02)
                for name, at, code in MARKER_VALUE:
                    if at + struct.calcsize(code) <= len(p["value"]) and name in f:
                        # without the Disk flag the high seqnos are written 0, not columns
                        want = f[name] if disk or not name.startswith("high_") else None
                        assert f[name] == want, name
                        assert struct.unpack_from(">" + code, p["value"], at)[0] == \
                            (0 if want is None else want), name
            assert f["snap_start"] > last_seqno[vb] and f["snap_end"] >= f["snap_start"]
            snapshot[vb] = (f["snap_start"], f["snap_end"])
            continue
        if op == 0x55:
            assert f["end_status"] == 0
            ended.add(vb)
            continue
        seqno = f["by_seqno"]
        assert seqno > last_seqno[vb]
        last_seqno[vb] = seqno
        assert snapshot[vb][0] <= seqno <= snapshot[vb][1]
        if op == 0x5f:
            assert p["key"] == f["key"] and p["value"] == f["value"]
            if f["event_id"] == 0:
                created[vb].add(struct.unpack_from(">I", p["value"], 12)[0])
            continue
        if op not in DOCUMENT_OPS:
            continue
        count += op in ITEM_OPS
        if collections:
            cid, key = split_leb128(p["key"])
            assert cid == f["collection_id"] and cid in created[vb]
        else:
            key = p["key"]
            assert "collection_id" not in f
        assert key == f["key"]
        if op in (0x62, 0x63):
            assert prepared[vb].pop(key) == f["prepared_seqno"] and f["cas"] == 0
            continue
        assert p["value"] == f["value"]
        if op == 0x60:
            assert key not in prepared[vb] and f["cas"] != 0
            prepared[vb][key] = seqno
        value = f["value"]
        if f["datatype"] & 0x02:
            value = bytes(cramjam.snappy.decompress_raw(value))
        if f["datatype"] & 0x04:
            pairs, value = parse_xattrs(value)
            assert "_sync" in pairs
        if f["datatype"] & 0x01:
            json.loads(value)
    assert count == items
    assert ended == set(last_seqno) and all(not keys for keys in prepared.values())
    assert frames[-1].fields["opcode"] in (0x55, 0x5c)


def test_synthetic_handshake_and_content():
    frames = t.synthetic_frames(2000, seed=5, sync_writes=True)
    responses = [f.fields["opcode"] for f in frames if f.fields["magic"] == 0x81]
    assert frames[len(responses) - 1].fields["magic"] == 0x81     # the handshake comes first
    assert responses == [0x1f, 0x50] + [0x5e] * 6 + [0x53] * 4
    features = frames[0].fields["value"]
    assert 0x12 in struct.unpack(f">{len(features) // 2}H", features)
    ops = {f.fields["opcode"] for f in frames}
    assert {0x57, 0x58, 0x59, 0x5f, 0x60, 0x62, 0x63, 0x55} <= ops
    datatypes = {f.fields["datatype"] for f in frames if f.fields["opcode"] == 0x57}
    assert {0x00, 0x01, 0x02, 0x03, 0x05} <= datatypes
    assert {f.fields["event_id"] for f in frames if f.fields["opcode"] == 0x5f} == {0, 3}
    vbuckets = [f.fields["vbucket"] for f in frames if f.fields["opcode"] == 0x57]
    switches = sum(a != b for a, b in zip(vbuckets, vbuckets[1:]))
    assert switches > 10                                     # streams are interleaved


def test_synthetic_is_deterministic_per_seed():
    assert t.synthetic_stream(800, seed=3) == t.synthetic_stream(800, seed=3)
    assert t.synthetic_stream(800, seed=3) != t.synthetic_stream(800, seed=4)
    frames = t.synthetic_frames(800, seed=3)
    assert t.synthetic_stream(800, seed=3) == b"".join(f.data for f in frames)


def test_synthetic_rejects_sync_writes_with_stream_ids():
    with pytest.raises(ValueError):
        t.synthetic_frames(10, sync_writes=True, stream_ids=True)


def test_synthetic_without_collections_has_no_collection_frames():
    frames = t.synthetic_frames(600, collections=False, seed=2)
    assert not {0x5f, 0x64} & {f.fields["opcode"] for f in frames}
    features = frames[0].fields["value"]
    assert 0x12 not in struct.unpack(f">{len(features) // 2}H", features)


@pytest.mark.parametrize("seed", [0, 1])
def test_synthetic_mean_frame_size(seed):
    frames = t.synthetic_frames(10000, seed=seed)
    mean = sum(len(f.data) for f in frames) / len(frames)
    assert 200 <= mean <= 260
