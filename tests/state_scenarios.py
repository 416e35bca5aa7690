"""Random DCP conversations for the state tests: several vbucket streams in snapshots of
mutations, deletions, expirations, durable writes (committed, aborted, prepared deletes),
collection creations, drops and flushes, seqno advances and OSO snapshots, streams that
restart (a successful Stream Request response, with or without its request) and roll
back, interleaved. Seqnos, CAS and the document a change writes follow no server's
history: the model in ``state_model`` decides what they mean."""

from __future__ import annotations

import random
import struct

from dcpfast import testing as t
from dcpfast.protocol import Opcode, OsoFlag, SnapshotFlag, Status, StreamEndStatus

CAS_EPOCH = 1_700_000_000 * 10**9


class _Stream:
    def __init__(self, rng: random.Random, vbucket: int, collections: bool, sync: bool,
                 stream_id: int | None):
        self.rng, self.vb, self.collections, self.sync = rng, vbucket, collections, sync
        self.sid = stream_id
        self.seqno = 0
        self.cas = CAS_EPOCH + rng.randrange(10**12)
        self.cids = [0]
        self.next_cid = 8 + vbucket * 100
        self.pending: dict[tuple[int, bytes], int] = {}
        self.opaque = 0x1000 + vbucket

    def hdr(self) -> dict:
        out = {"vbucket": self.vb, "opaque": self.opaque}
        if self.sid:
            out["stream_id"] = self.sid
        return out

    def cid(self, cid):
        return cid if self.collections else None

    def step_seqno(self) -> int:
        self.seqno += self.rng.choice((1, 1, 1, 2))
        return self.seqno

    def step_cas(self) -> int:
        self.cas += self.rng.randint(1, 1000) << 16
        return self.cas

    def key(self) -> tuple[int, bytes]:
        cid = self.rng.choice(self.cids)
        return cid, b"k%d" % self.rng.randrange(12)

    def item(self) -> bytes:
        """One seqno item."""
        rng = self.rng
        r = rng.random()
        if self.pending and r < 0.2:
            (cid, key), prepared = rng.choice(sorted(self.pending.items()))
            del self.pending[cid, key]
            build = t.commit if rng.random() < 0.7 else t.abort
            name = "commit_seqno" if build is t.commit else "abort_seqno"
            return build(key, prepared_seqno=prepared, **{name: self.step_seqno()},
                         collection_id=self.cid(cid), **self.hdr())
        if self.collections and r < 0.27:
            return self.event()
        if self.collections and r < 0.3:
            return t.seqno_advanced(self.step_seqno(), **self.hdr())
        cid, key = self.key()
        seqno, cas = self.step_seqno(), self.step_cas()
        common = dict(by_seqno=seqno, rev_seqno=rng.randint(1, 9), cas=cas,
                      collection_id=self.cid(cid), **self.hdr())
        if self.sync and r < 0.45 and (cid, key) not in self.pending:
            self.pending[cid, key] = seqno
            deleted = rng.random() < 0.3
            value = b"" if deleted else b'{"p":%d}' % seqno
            return t.prepare(key, value, deleted=deleted, flags=rng.randrange(4),
                             datatype=0 if deleted else 1, **common)
        if r < 0.6:
            return t.deletion(key, delete_time=cas // 10**9 if rng.random() < 0.5 else None,
                              **common)
        if r < 0.68:
            return t.expiration(key, delete_time=cas // 10**9, **common)
        body = b'{"v":%d}' % seqno
        if rng.random() < 0.2:
            return t.mutation(key, t.xattr_value({"_sync": '{"s":1}'}, body), datatype=5,
                              flags=7, expiration=rng.choice((0, 99)), **common)
        return t.mutation(key, body, datatype=1, flags=rng.randrange(4), **common)

    def backfilled(self, key: tuple[int, bytes]) -> bytes:
        """A mutation or deletion of ``key`` as a backfill sends it."""
        cid, name = key
        common = dict(by_seqno=self.step_seqno(), rev_seqno=1, cas=self.step_cas(),
                      collection_id=self.cid(cid), **self.hdr())
        if self.rng.random() < 0.3:
            return t.deletion(name, **common)
        return t.mutation(name, b'{"o":%d}' % self.seqno, datatype=1, **common)

    def event(self) -> bytes:
        rng = self.rng
        seqno = self.step_seqno()
        hdr = dict(by_seqno=seqno, manifest_uid=seqno, scope_id=0, **self.hdr())
        r = rng.random()
        if r < 0.4 or len(self.cids) == 1:
            cid = self.next_cid
            self.next_cid += 1
            self.cids.append(cid)
            return t.create_collection(b"c%d" % cid, collection_id=cid, **hdr)
        cid = rng.choice(self.cids[1:])
        if r < 0.7:                                   # a flush: the create event again
            return t.create_collection(b"c%d" % cid, collection_id=cid, version=2, **hdr)
        self.cids.remove(cid)
        return t.drop_collection(collection_id=cid, version=rng.choice((0, 2)), **hdr)

    def snapshot(self) -> list[bytes]:
        rng = self.rng
        start = self.seqno + 1
        if rng.random() < 0.1:        # an OSO snapshot: a backfill in key order, each key once
            items = [self.backfilled(key) for key in
                     rng.sample([(c, b"o%d" % i) for c in self.cids for i in range(6)],
                                rng.randint(1, 5))]
            rng.shuffle(items)
            return [t.oso_snapshot(OsoFlag.START, **self.hdr()), *items,
                    t.oso_snapshot(OsoFlag.END, **self.hdr())]
        items = [self.item() for _ in range(rng.randint(1, 6))]
        end = self.seqno + (rng.randint(1, 3) if rng.random() < 0.15 else 0)
        flags = SnapshotFlag.DISK if rng.random() < 0.2 else SnapshotFlag.MEMORY
        if end > self.seqno:
            # a snapshot whose last seqnos the stream does not send (deduplicated,
            # filtered, prepares it does not take) ends with a seqno advance to its end
            # where the stream sends them (collections); a legacy stream's disk snapshot
            # may just end short (kv_engine MB-56084)
            if self.collections:
                items.append(t.seqno_advanced(end, **self.hdr()))
                self.seqno = end
            else:
                flags = SnapshotFlag.DISK
        marker = t.snapshot_marker(start, end, flags, **self.hdr())
        return [marker, *items]

    def restart(self, requests: bool, resume: bool = False) -> list[bytes]:
        """The stream ends and restarts at an earlier seqno (sometimes after a rollback),
        or, with ``resume``, where it stood (a consumer that reconnects); the new stream
        may use a new opaque, and its request may be in the stream."""
        rng = self.rng
        point = self.seqno if resume else rng.randint(0, self.seqno)
        out = [t.stream_end(StreamEndStatus.CLOSED, **self.hdr())]
        if not resume and rng.random() < 0.4:
            out.append(t.response(Opcode.STREAM_REQUEST, status=Status.ROLLBACK,
                                  value=struct.pack(">Q", point), opaque=self.opaque))
        if rng.random() < 0.5:
            self.opaque = rng.randrange(0x20000, 0x30000)
        if requests:
            out.append(t.stream_request(start=point, **self.hdr()))
        out.append(t.failover_log_response([(rng.getrandbits(64), 0)], opaque=self.opaque))
        self.seqno = point
        self.pending = {k: s for k, s in self.pending.items() if s <= point}
        return out


def scenario(seed: int, *, vbuckets: int = 3, snapshots: int = 30, collections: bool = True,
             sync: bool = True, restarts: float = 0.08, requests: bool = False,
             stream_ids: bool = False, resumes: float = 0.0) -> bytes:
    """A conversation of ``vbuckets`` streams, about ``snapshots`` snapshots each; a
    restart resumes where its stream stood with chance ``resumes``."""
    rng = random.Random(seed)
    streams = [_Stream(rng, vb, collections, sync and not stream_ids,
                       vb + 1 if stream_ids else None) for vb in rng.sample(range(64), vbuckets)]
    pieces: list[list[bytes]] = []
    for s in streams:
        frames = [t.failover_log_response([(rng.getrandbits(64), 0)], opaque=s.opaque)]
        for _ in range(snapshots):
            if rng.random() < restarts:
                frames += s.restart(requests, resumes > 0 and rng.random() < resumes)
            frames += s.snapshot()
        pieces.append(frames)
    out = []
    while any(pieces):
        piece = rng.choice([p for p in pieces if p])
        for _ in range(min(len(piece), rng.randint(1, 8))):
            out.append(piece.pop(0))
    return b"".join(out)
