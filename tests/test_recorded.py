"""Frames other projects recorded from Couchbase servers (tests/data/recorded/README.md),
rebuilt from the fields recorded beside them and decoded: every field as recorded, values
and xattrs as an independent reading of the bytes gives them, and the values gomemcached's
own tests assert."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import cramjam
import pytest

import dcpfast
import dcpfast.streams
import dcpfast.testing as t
from dcpfast.protocol import Datatype, Opcode

RECORDED = Path(__file__).parent / "data" / "recorded"
GOMEMCACHED = sorted((RECORDED / "gomemcached").glob("*.json"))
GOXDCR = sorted((RECORDED / "goxdcr").glob("*.json"))


def _b64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


# -- gomemcached: requests as MCRequest JSON ---------------------------------------------

def _request_frame(recorded: dict) -> bytes:
    """The frame of an MCRequest: its header made from the recorded fields."""
    return t.frame(recorded["Opcode"], extras=_b64(recorded["Extras"]),
                   key=_b64(recorded["Key"]), value=_b64(recorded["Body"]),
                   datatype=recorded["DataType"], vbucket=recorded["VBucket"],
                   opaque=recorded["Opaque"], cas=recorded["Cas"])


#: What gomemcached's client tests assert of each (upr_feed_test.go): a system event's
#: kind, name, scope and collection; a mutation's key and collection id (None: a stream
#: without collections), and its body where the test names it.
GOMEMCACHED_ASSERTS = {
    "scopeCreation.json": dict(event="create_scope", name="S1", scope_id=8),
    "collectionCreation.json": dict(event="create_collection", name="C1", scope_id=8,
                                    collection_id=9),
    "collectionDel.json": dict(event="drop_collection", scope_id=8, collection_id=9),
    "scopeDel.json": dict(event="drop_scope", scope_id=8),
    "origNoCollectionMut.json": dict(key=b"d1", collection_id=None),
    "defaultScopeDefaultColMutation.json": dict(key=b"d1", collection_id=0),
    "scope_and_collection_mutation.json": dict(key=b"d1", collection_id=9,
                                               body=b'{"key":"a sentence"}'),
}


def test_every_gomemcached_request_is_checked():
    assert sorted(p.name for p in GOMEMCACHED) == sorted(GOMEMCACHED_ASSERTS)


@pytest.mark.parametrize("path", GOMEMCACHED, ids=lambda p: p.stem)
def test_gomemcached_requests(path):
    recorded, want = _load(path), GOMEMCACHED_ASSERTS[path.name]
    data = _request_frame(recorded)
    extras = _b64(recorded["Extras"])
    batch = dcpfast.scan(data, collections=want.get("collection_id", 0) is not None)
    assert len(batch) == 1 and batch.consumed == len(data) and not batch.errors
    frame = batch.frame(0)
    assert (frame.opcode, frame.vbucket, frame.opaque, frame.cas, frame.datatype) == (
        recorded["Opcode"], recorded["VBucket"], recorded["Opaque"], recorded["Cas"],
        recorded["DataType"])
    assert frame.extras_len == len(extras)
    assert frame.by_seqno == struct.unpack_from(">Q", extras)[0]
    if recorded["Opcode"] == Opcode.SYSTEM_EVENT:
        (event,) = batch.system_events().to_pylist()
        body = _b64(recorded["Body"])
        assert event["manifest_uid"] == struct.unpack_from(">Q", body)[0]
        assert event["by_seqno"] == frame.by_seqno
        assert {k: event[k] for k in want} == want
        return
    assert frame.key == want["key"] and recorded["Keylen"] == len(_b64(recorded["Key"]))
    assert getattr(frame, "collection_id", None) == want["collection_id"]
    by, rev, flags, expiry, lock, nmeta, nru = struct.unpack(">QQIIIHB", extras)
    assert (frame.rev_seqno, frame.flags, frame.expiration, frame.lock_time) == \
        (rev, flags, expiry, lock)
    (value,) = batch.values().to_pylist()
    assert value["body"] == _body(_b64(recorded["Body"]), recorded["DataType"])[1]
    if "body" in want:
        assert value["body"] == want["body"]


# -- goxdcr: events as UprEvent JSON -------------------------------------------------------

def _variants(recorded: dict):
    """The frames an UprEvent may have come from: each extras variant of its opcode, with
    and without a collection id before its key."""
    key, value = _b64(recorded["Key"]), _b64(recorded["Value"])
    common = dict(by_seqno=recorded["Seqno"], rev_seqno=recorded["RevSeqno"],
                  datatype=recorded["DataType"], vbucket=recorded["VBucket"],
                  opaque=recorded["Opaque"], cas=recorded["Cas"])
    for cid in (None, recorded.get("CollectionId") or 0):
        if recorded["Opcode"] == Opcode.MUTATION:
            yield cid, t.mutation(key, value, flags=recorded["Flags"],
                                  expiration=recorded["Expiry"],
                                  lock_time=recorded["LockTime"], collection_id=cid, **common)
        elif recorded["Opcode"] == Opcode.DELETION:
            yield cid, t.deletion(key, value, collection_id=cid, **common)
            yield cid, t.deletion(key, value, delete_time=recorded["Expiry"],
                                  collection_id=cid, **common)
        elif recorded["Opcode"] == Opcode.EXPIRATION:
            yield cid, t.expiration(key, value, delete_time=recorded["Expiry"],
                                    collection_id=cid, **common)


def _rebuilt(recorded: dict) -> tuple[int | None, bytes] | None:
    """The one variant whose length is the recorded ``AckSize`` (the whole frame), or None
    where none is (or more than one is)."""
    found = [(cid, data) for cid, data in _variants(recorded)
             if len(data) == recorded["AckSize"]]
    return found[0] if len(found) == 1 else None


def _body(value: bytes, datatype: int) -> tuple[dict[str, str], bytes]:
    """The xattrs and the body of a document value, read independently of dcpfast: Snappy
    inflated by cramjam, the xattr section (a u32 length, then u32-length-prefixed
    ``key\\0value\\0`` pairs) split by hand."""
    if datatype & Datatype.SNAPPY:
        value = bytes(cramjam.snappy.decompress_raw(value))
    xattrs: dict[str, str] = {}
    if datatype & Datatype.XATTR:
        (total,), at = struct.unpack_from(">I", value), 4
        while at < 4 + total:
            (size,) = struct.unpack_from(">I", value, at)
            name, text, _ = value[at + 4:at + 4 + size].split(b"\0")
            xattrs[name.decode()] = text.decode()
            at += 4 + size
        value = value[4 + total:]
    return xattrs, value


TRUSTED = {p.name: _rebuilt(_load(p)) for p in GOXDCR}


def test_most_goxdcr_events_are_trusted():
    """An event is trusted where exactly one frame variant has its recorded length; the
    rest are documents edited after they were recorded (their AckSize is off by more than
    any variant)."""
    assert len(GOXDCR) == 31
    assert sum(v is not None for v in TRUSTED.values()) >= 25
    for name, found in TRUSTED.items():
        if found is None:
            recorded = _load(RECORDED / "goxdcr" / name)
            assert recorded["Opcode"] == Opcode.MUTATION and recorded["DataType"] & Datatype.XATTR


@pytest.mark.parametrize("name", sorted(n for n, v in TRUSTED.items() if v is not None))
def test_goxdcr_events(name):
    recorded = _load(RECORDED / "goxdcr" / name)
    cid, data = TRUSTED[name]
    batch = dcpfast.scan(data, collections=cid is not None)
    assert len(batch) == 1 and batch.consumed == recorded["AckSize"] and not batch.errors
    frame = batch.frame(0)
    assert (frame.opcode, frame.vbucket, frame.opaque, frame.cas, frame.datatype) == (
        recorded["Opcode"], recorded["VBucket"], recorded["Opaque"], recorded["Cas"],
        recorded["DataType"])
    assert (frame.by_seqno, frame.rev_seqno) == (recorded["Seqno"], recorded["RevSeqno"])
    assert frame.key == _b64(recorded["Key"]) and frame.value == _b64(recorded["Value"])
    assert getattr(frame, "collection_id", None) == cid
    if recorded["Opcode"] == Opcode.MUTATION:
        assert (frame.flags, frame.expiration, frame.lock_time) == \
            (recorded["Flags"], recorded["Expiry"], recorded["LockTime"])
    elif frame.extras_len != 18:                # deletion V2, expiration: a delete time
        assert frame.delete_time == recorded["Expiry"]
    if not recorded["Value"]:
        return
    xattrs, body = _body(_b64(recorded["Value"]), recorded["DataType"])
    (value,) = batch.values().to_pylist()
    assert value["body"] == body
    assert dict(value["xattrs"] or []) == xattrs
    assert value["is_json"] == bool(recorded["DataType"] & Datatype.JSON)
    if "xattr" in name.lower() and "noxattrs" not in name.lower() or "Sync" in name:
        assert xattrs, name                     # the documents named for xattrs carry some
    for system in ("_sync", "_mou", "_vv"):
        if {"_sync": "Sync", "_mou": "Mou", "_vv": "Hlv"}[system] in name:
            assert system in xattrs, name


def test_goxdcr_events_as_one_stream():
    """The trusted events without collection ids, concatenated: one stream whose frames
    are the events one by one."""
    plain = [(name, data) for name, (cid, data) in
             ((n, v) for n, v in TRUSTED.items() if v is not None) if cid is None]
    assert len(plain) >= 4
    stream = b"".join(data for _, data in plain)
    batch = dcpfast.scan(stream, collections=False)
    assert len(batch) == len(plain) and batch.consumed == len(stream) and not batch.errors
    for i, (_, data) in enumerate(plain):
        assert bytes(batch.frame(i).value or b"") == bytes(dcpfast.scan(data).frame(0).value
                                                           or b"")


def test_gomemcached_all_vbucket_seqnos():
    """gomemcached's GetAllVbSeqnos response body from a one-node cluster: 1,024 vbuckets
    (as its test asserts), each with its seqno as the bytes hold them."""
    body = (RECORDED / "gomemcached" / "getSeqnoRespBody.bin").read_bytes()
    data = t.response(Opcode.GET_ALL_VB_SEQNOS, value=body, opaque=7)
    table = dcpfast.streams.high_seqnos(dcpfast.scan(data))
    assert table.num_rows == 1024
    assert table["vbucket"].to_pylist() == [int.from_bytes(body[k:k + 2], "big")
                                            for k in range(0, len(body), 10)]
    assert table["seqno"].to_pylist() == [int.from_bytes(body[k + 2:k + 10], "big")
                                          for k in range(0, len(body), 10)]
    assert sorted(table["vbucket"].to_pylist()) == list(range(1024))
