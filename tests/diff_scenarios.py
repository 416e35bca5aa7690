"""Pairs of buckets for the diff tests: a source conversation of ``synthetic_conversation``,
and a target written from the source's documents (as ``state_model`` finds them) by another
cluster: collections and scopes renumbered, vbuckets placed anew, its own seqnos in
snapshots, and hidden changes: bodies changed, documents deleted, dropped or added,
the same content rewritten Snappy-compressed or with another CAS, flags, expiry and
xattrs changed. ``Target.planted`` records what was changed, so that the tests can hold
the model's answer against it."""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field

import cramjam

from dcpfast import testing as t
from dcpfast.protocol import Datatype, SnapshotFlag
from tests.state_model import decoded, model

#: The source's names: collection id -> (scope, collection).
SOURCE_NAMES = {cid: (t.synthetic_manifest()["scopes"][sid].decode(), name.decode())
                for cid, (sid, name, _) in t.synthetic_manifest()["collections"].items()}
#: The target's collection ids for the source's, and its scope ids.
RENUMBERED = {0: 0, 8: 0x21, 9: 0x22, 10: 0x23}
SCOPES = {"_default": 0, "inventory": 0x11}
#: The changes a target document may hide, with their weights.
CHANGES = {"same": 30, "body": 4, "deleted": 3, "dropped": 3, "compressed": 4, "cas": 4,
           "flags": 2, "expiration": 2, "user_xattr": 2, "system_xattr": 2, "revived": 2}


def source(seed: int, items: int = 500, **options) -> bytes:
    """A source bucket's dump: the server's side of a synthetic conversation."""
    options = {"sync_writes": True, "vbuckets": 4, "snapshot_size": 12, **options}
    _, server = t.synthetic_conversation(items, seed=seed, **options)
    return b"".join(f.data for f in server)


def documents(data: bytes, **cut) -> tuple[dict, dict]:
    """(documents, consistency) of a dump as ``state_model`` finds them, tombstones
    included: (vbucket, cid, key) -> version."""
    frames, bodies = decoded(data)
    docs, points, _ = model(frames, bodies, **cut)
    return docs, points


@dataclass
class Target:
    data: bytes
    names: dict                    # collection id -> (scope, collection)
    planted: dict = field(default_factory=dict)    # (scope, collection, key) -> change
    offsets: list = field(default_factory=list)    # where each snapshot marker starts


def derive(docs: dict, seed: int, *, vbuckets: int = 3, snapshot: int = 9,
           added: int = 12) -> Target:
    """A target bucket holding ``docs`` (a source's documents) as another cluster would,
    with hidden changes drawn by ``seed``."""
    rng = random.Random(seed)
    names = {RENUMBERED[cid]: name for cid, name in SOURCE_NAMES.items()}
    kinds, weights = list(CHANGES), list(CHANGES.values())
    placed: dict[int, list[tuple[bytes, int, dict]]] = {}
    target = Target(b"", names)
    for (_, cid, key), version in sorted(docs.items(), key=lambda item: item[0][1:]):
        change = rng.choices(kinds, weights)[0]
        if change == "revived" and not version["deleted"]:
            change = "same"
        target.planted[(*SOURCE_NAMES[cid], key)] = change
        if change == "dropped":
            continue
        placed.setdefault(_vbucket(key, vbuckets), []).append(
            (key, RENUMBERED[cid], _changed(version, change, rng)))
    for i in range(added):
        cid = rng.choice(sorted(RENUMBERED.values()))
        key = b"added::%d" % i
        target.planted[(*names[cid], key)] = "added"
        placed.setdefault(_vbucket(key, vbuckets), []).append(
            (key, cid, _version(b'{"new":%d}' % i, rng)))
    pieces = [_stream(vb, placed[vb], snapshot, rng) for vb in sorted(placed)]
    out: list[bytes] = []
    while any(pieces):                       # the vbucket streams interleaved
        piece = rng.choice([p for p in pieces if p])
        for _ in range(min(len(piece), rng.randint(1, 6))):
            frame, is_marker = piece.pop(0)
            if is_marker:
                target.offsets.append(sum(map(len, out)))
            out.append(frame)
    target.data = b"".join(out)
    return target


def _vbucket(key: bytes, vbuckets: int) -> int:
    """Where the target keeps a key: its own vbuckets, numbered apart from the source's."""
    return 900 + zlib.crc32(key) % vbuckets


def _version(body: bytes, rng: random.Random) -> dict:
    return {"body": body, "xattrs": None, "flags": rng.randrange(4), "expiration": 0,
            "datatype": int(Datatype.JSON), "deleted": False, "delete_time": None,
            "cas": (1_710_000_000 * 10**9 + rng.randrange(10**12)) & ~0xFFFF, "rev_seqno": 1}


def _changed(version: dict, change: str, rng: random.Random) -> dict:
    """The source's ``version`` with ``change`` made to it; ``compressed`` marks the value
    to be sent Snappy-compressed."""
    v = dict(version)
    v["xattrs"] = None if v["xattrs"] is None else dict(v["xattrs"])
    if change == "body" and not v["deleted"]:
        v["body"] = (v["body"] or b"") + b" "
    elif change == "deleted":
        v.update(deleted=True, flags=None, expiration=None, body=b"", delete_time=None,
                 datatype=0, xattrs=None)
    elif change == "revived":
        v.update(deleted=False, flags=0, expiration=0, body=b'{"back":1}', datatype=1)
    elif change == "compressed":
        v["compressed"] = True
    elif change == "cas":
        v.update(cas=v["cas"] + (rng.randint(1, 99) << 16), rev_seqno=v["rev_seqno"] + 7)
    elif change == "flags" and not v["deleted"]:
        v["flags"] ^= 0x10
    elif change == "expiration" and not v["deleted"]:
        v["expiration"] += 3600
    elif change in ("user_xattr", "system_xattr") and not v["deleted"]:
        name = "edited" if change == "user_xattr" else "_edited"
        v["xattrs"] = {**(v["xattrs"] or {}), name: '{"by":"target"}'}
    return v


def _stream(vbucket: int, docs: list, snapshot: int, rng: random.Random) -> list:
    """One target vbucket's frames (frame, is a marker): its scope and collections
    created, then its documents in snapshots of about ``snapshot`` changes."""
    hdr = {"vbucket": vbucket, "opaque": 0x7000 + vbucket}
    events = [t.create_scope(b"inventory", by_seqno=1, manifest_uid=1,
                             scope_id=SCOPES["inventory"], **hdr)]
    for seqno, (cid, name) in enumerate(sorted((RENUMBERED[c], n) for c, (_, n) in
                                               SOURCE_NAMES.items() if c), start=2):
        events.append(t.create_collection(name.encode(), by_seqno=seqno, manifest_uid=seqno,
                                          scope_id=SCOPES[SOURCE_NAMES[
                                              _source_cid(cid)][0]], collection_id=cid, **hdr))
    changes = [_frame(key, cid, v, seqno, hdr) for seqno, (key, cid, v) in
               enumerate(docs, start=len(events) + 1)]
    items = events + changes
    out, start = [], 1
    while items:
        size = rng.randint(max(1, snapshot // 2), snapshot + snapshot // 2)
        taken, items = items[:size], items[size:]
        flags = SnapshotFlag.DISK if start == 1 else SnapshotFlag.MEMORY
        out.append((t.snapshot_marker(start, start + len(taken) - 1, flags, **hdr), True))
        out += [(frame, False) for frame in taken]
        start += len(taken)
    return out


def _source_cid(cid: int) -> int:
    return next(c for c, r in RENUMBERED.items() if r == cid)


def _frame(key: bytes, cid: int, v: dict, seqno: int, hdr: dict) -> bytes:
    """A document's version as the target's change at ``seqno``."""
    value, datatype = v["body"] or b"", v["datatype"] & ~int(Datatype.SNAPPY | Datatype.XATTR)
    if v["xattrs"] is not None:
        value = t.xattr_value(v["xattrs"], value) if not v["deleted"] else \
            t.xattr_blob(v["xattrs"])
        datatype |= Datatype.XATTR
    if v.get("compressed") and value:
        value, datatype = bytes(cramjam.snappy.compress_raw(value)), datatype | Datatype.SNAPPY
    common = dict(by_seqno=seqno, rev_seqno=v["rev_seqno"], cas=v["cas"], datatype=datatype,
                  collection_id=cid, **hdr)
    if v["deleted"]:
        return t.deletion(key, value, delete_time=v["delete_time"], **common)
    return t.mutation(key, value, flags=v["flags"], expiration=v["expiration"], **common)
