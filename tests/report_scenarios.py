"""DCP conversations with known timing for the report's tests, and a plain-Python model of
what their report must say.

A ``Script`` records who sent which frame when (``dcpfast.testing`` encodes the frames),
writes the conversation as a capture (``timed_packets``: each frame at its time) or as a
server's and a client's dump, and ``expected`` computes the stalls, NOOP round trips,
flow control, lag and stream figures from the script alone: an oracle that shares no code
with ``dcpfast.reporting``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from dcpfast import testing as t
from dcpfast.protocol import SnapshotFlag, StreamEndStatus

START = 1_700_000_000 * 10**9
MS = 10**6
S = 10**9
HEADER = 24


@dataclass
class Sent:
    time: int
    client: bool
    data: bytes
    what: str                    # request, accepted, rollback, marker, item, end, noop, ...
    vbucket: int | None = None
    stream_id: int = 0
    seqno: int = 0
    cas: int = 0
    detail: object = None


@dataclass
class Script:
    """A conversation being written, frame by frame, in time order per side."""

    frames: list[Sent] = field(default_factory=list)
    opaque: int = 0x1000

    def add(self, sent: Sent) -> None:
        self.frames.append(sent)

    # -- the handshake and the client's frames

    def setup(self, at: int, buffer: int | None = 65536) -> None:
        self.add(Sent(at, True, t.hello([0x03], opaque=1), "hello"))
        self.add(Sent(at + MS // 10, False, t.hello_response([0x03], opaque=1), "reply"))
        self.add(Sent(at + 2 * MS // 10, True, t.open(b"report-test", 1, opaque=2), "open"))
        self.add(Sent(at + 3 * MS // 10, False, t.response(0x50, opaque=2), "reply"))
        if buffer is not None:
            self.add(Sent(at + 4 * MS // 10, True,
                          t.control(b"connection_buffer_size", str(buffer).encode(), opaque=3),
                          "control", detail=buffer))
            self.add(Sent(at + 5 * MS // 10, False, t.response(0x5E, opaque=3), "reply"))

    def request(self, at: int, vbucket: int, *, start: int = 0, opaque: int | None = None,
                stream_id: int = 0) -> int:
        opaque = opaque if opaque is not None else self.next_opaque()
        value = b'{"sid": %d}' % stream_id if stream_id else b""
        self.add(Sent(at, True, t.stream_request(vbucket=vbucket, opaque=opaque, start=start,
                                                 value=value),
                      "request", vbucket, stream_id, detail=opaque))
        return opaque

    def next_opaque(self) -> int:
        self.opaque += 1
        return self.opaque

    def ack(self, at: int, nbytes: int) -> None:
        self.add(Sent(at, True, t.buffer_ack(nbytes, opaque=0), "ack", detail=nbytes))

    def noop_answer(self, at: int, opaque: int) -> None:
        self.add(Sent(at, True, t.response(0x5C, opaque=opaque), "noop_answer", detail=opaque))

    # -- the server's frames

    def accept(self, at: int, vbucket: int, opaque: int, stream_id: int = 0) -> None:
        self.add(Sent(at, False, t.failover_log_response([(0xABC, 0)], opaque=opaque),
                      "accepted", vbucket, stream_id))

    def rollback(self, at: int, vbucket: int, opaque: int, seqno: int,
                 stream_id: int = 0) -> None:
        self.add(Sent(at, False, t.rollback_response(seqno, opaque=opaque), "rollback",
                      vbucket, stream_id, detail=seqno))

    def marker(self, at: int, vbucket: int, opaque: int, start: int, end: int,
               flags: int = SnapshotFlag.MEMORY, stream_id: int = 0) -> None:
        self.add(Sent(at, False, t.snapshot_marker(start, end, flags, vbucket=vbucket,
                                                   opaque=opaque,
                                                   stream_id=stream_id or None),
                      "marker", vbucket, stream_id, detail=flags))

    def mutation(self, at: int, vbucket: int, opaque: int, seqno: int, *, key: bytes = b"k",
                 lag: int = 0, stream_id: int = 0, value: bytes = b"{}") -> None:
        cas = (at - lag) & ~0xFFFF
        self.add(Sent(at, False, t.mutation(key, value, by_seqno=seqno, cas=cas,
                                            datatype=1, vbucket=vbucket, opaque=opaque,
                                            stream_id=stream_id or None),
                      "item", vbucket, stream_id, seqno, cas))

    def end(self, at: int, vbucket: int, opaque: int,
            status: int = StreamEndStatus.OK, stream_id: int = 0) -> None:
        self.add(Sent(at, False, t.stream_end(status, vbucket=vbucket, opaque=opaque,
                                              stream_id=stream_id or None),
                      "end", vbucket, stream_id, detail=status))

    def noop(self, at: int, opaque: int) -> None:
        self.add(Sent(at, False, t.noop(opaque=opaque), "noop", detail=opaque))

    # -- outputs

    def ordered(self, client: bool) -> list[Sent]:
        return sorted((f for f in self.frames if f.client == client), key=lambda f: f.time)

    def capture(self, **kwargs) -> bytes:
        events = [(f.time, f.client, f.data) for f in self.frames]
        return t.pcap_file(t.timed_packets(events, **kwargs), nanoseconds=True)

    def dumps(self) -> tuple[bytes, bytes]:
        """The server's dump and the client's, each in its own time order."""
        return (b"".join(f.data for f in self.ordered(False)),
                b"".join(f.data for f in self.ordered(True)))


# -- the model --------------------------------------------------------------------------------


def _is_message(f: Sent) -> bool:
    return not f.client and f.what in ("marker", "item", "end")


def _same_pause(lo: int, hi: int, start: int, end: int) -> bool:
    """A stream's stall is its connection's stall from ``lo`` to ``hi`` (folded into it):
    inside it, or both ends within a tenth of it, and a second, of the connection's."""
    near = min(10**9, (hi - lo) // 10)
    return lo <= start <= end <= hi or (abs(start - lo) <= near and abs(end - hi) <= near)


def expected(script: Script, stall: int) -> dict:
    """What the report of ``script``'s capture must say (stall threshold ``stall`` ns)."""
    frames = sorted(script.frames, key=lambda f: f.time)
    last = max(f.time for f in frames)
    out = {"frames": len(frames), "bytes": sum(len(f.data) for f in frames),
           "first": min(f.time for f in frames), "last": last}
    # streams: the rows that open, carry and close each
    rows = [f for f in frames if _is_message(f) or (not f.client and f.what == "accepted")]
    streams: dict[tuple, list[Sent]] = {}
    for f in rows:
        streams.setdefault((f.vbucket, f.stream_id), []).append(f)
    per_stream = []
    for key, fs in streams.items():
        open_, prev = False, None
        for f in fs:
            if open_ and prev is not None and f.time - prev > stall:
                per_stream.append((key, prev, f.time, False))
            open_, prev = f.what != "end", f.time
        if open_ and last - prev > stall:
            per_stream.append((key, prev, last, True))
    wide = []
    open_now: set = set()
    prev = None
    for f in rows:
        if open_now and prev is not None and f.time - prev > stall:
            wide.append((len(open_now), prev, f.time, False))
        key = (f.vbucket, f.stream_id)
        if f.what == "end":
            open_now.discard(key)
        else:
            open_now.add(key)
        prev = f.time
    if open_now and prev is not None and last - prev > stall:
        wide.append((len(open_now), prev, last, True))
    stalls = [(None, start, end, ongoing) for n, start, end, ongoing in wide if n > 1]
    shown = [(lo, hi) for _, lo, hi, _ in stalls]
    stalls += [(key, start, end, ongoing) for key, start, end, ongoing in per_stream
               if not any(_same_pause(lo, hi, start, end) for lo, hi in shown)]
    out["stalls"] = sorted(stalls, key=lambda s: (s[1], -1 if s[0] is None else s[0][0]))
    out.update(_noops(frames), **_flow(frames))
    lags = [(f.time - f.cas) / 1e6 for f in frames if f.what == "item"]
    out["lag_ms"] = sorted(lags)
    out["streams"] = _streams(frames)
    return out


def _noops(frames: list[Sent]) -> dict:
    asked = {f.detail: f.time for f in frames if f.what == "noop"}
    rtts = [(f.time - asked[f.detail]) / 1e6 for f in frames
            if f.what == "noop_answer" and f.detail in asked]
    return {"noops": len(asked), "rtt_ms": sorted(rtts)}


def _flow(frames: list[Sent]) -> dict:
    buffer = next((f.detail for f in frames if f.what == "control"), None)
    events = []
    for f in frames:
        if not f.client and f.what not in ("noop", "accepted", "rollback", "reply"):
            events.append((f.time, 0, len(f.data)))
        elif f.what == "ack":
            events.append((f.time, 1, -f.detail))
    unacked, top = 0, 0
    for _, _, delta in sorted(events):
        unacked += delta
        top = max(top, unacked)
    return {"buffer": buffer, "acks": sum(f.what == "ack" for f in frames),
            "max_unacked": top}


def _streams(frames: list[Sent]) -> dict:
    out: dict[tuple, dict] = {}
    opaques = {}
    for f in frames:
        if f.what == "request":
            opaques[f.detail] = (f.vbucket, f.stream_id)
        key = (f.vbucket, f.stream_id)
        if f.vbucket is None:
            continue
        s = out.setdefault(key, {"requests": 0, "rollbacks": [], "end": None,
                                 "snapshots": 0, "last_seqno": None, "items": 0})
        if f.what == "request":
            s["requests"] += 1
        elif f.what == "rollback":
            s["rollbacks"].append(f.detail)
        elif f.what == "marker":
            s["snapshots"] += 1
        elif f.what == "item":
            s["items"] += 1
            s["last_seqno"] = max(s["last_seqno"] or 0, f.seqno)
        elif f.what == "end":
            s["end"] = StreamEndStatus(f.detail).name.lower()
    return out


# -- conversations ----------------------------------------------------------------------------


def known() -> Script:
    """Two streams and what happens to them, by hand:

    - vb 5: requested at 0.01 s, accepted, one snapshot of 20 items 0.1 s apart, then
      silent for 8 s (a stall from 2.1 s to 10.1 s), 5 more items, ends ok at 10.6 s;
    - vb 9: requested, rolled back to seqno 7, requested again from 7, accepted, items
      every 0.2 s to 12 s, ended ``closed``;
    - NOOPs at 3 s (answered in 50 ms) and 9 s (answered in 2 ms); a Buffer
      Acknowledgement of what arrived every 1,500 bytes, 10 ms later; lag 250 ms on vb 5
      and 40 ms on vb 9.
    """
    s = Script()
    s.setup(START, buffer=4096)
    base = START + 10 * MS
    o5 = s.request(base, 5)
    s.accept(base + MS, 5, o5)
    s.marker(base + 2 * MS, 5, o5, 1, 25, SnapshotFlag.DISK | SnapshotFlag.CHECKPOINT)
    for i in range(20):
        s.mutation(base + 100 * MS * (i + 1), 5, o5, i + 1, key=b"doc-%d" % (i % 3), lag=250 * MS)
    for i in range(5):
        s.mutation(base + 10_100 * MS + 100 * MS * i, 5, o5, 21 + i, key=b"doc-%d" % i,
                   lag=250 * MS)
    s.end(base + 10_600 * MS, 5, o5)
    o9 = s.request(base + 5 * MS, 9, start=12)
    s.rollback(base + 6 * MS, 9, o9, 7)
    o9b = s.request(base + 7 * MS, 9, start=7)
    s.accept(base + 8 * MS, 9, o9b)
    s.marker(base + 9 * MS, 9, o9b, 8, 200)
    for i in range(59):
        s.mutation(base + 200 * MS * (i + 1), 9, o9b, 8 + i, key=b"k9-%d" % i, lag=40 * MS)
    s.end(base + 12_000 * MS, 9, o9b, StreamEndStatus.CLOSED)
    s.noop(START + 3 * S, 0x77)
    s.noop_answer(START + 3 * S + 50 * MS, 0x77)
    s.noop(START + 9 * S, 0x78)
    s.noop_answer(START + 9 * S + 2 * MS, 0x78)
    _acks(s, every=1500, delay=10 * MS)
    return s


def _acks(s: Script, every: int, delay: int) -> None:
    """The client acknowledges what it received whenever ``every`` bytes have arrived."""
    owed = 0
    for f in sorted(s.frames, key=lambda f: f.time):
        if f.client or f.what in ("noop", "accepted", "rollback", "reply"):
            continue
        owed += len(f.data)
        if owed >= every:
            s.ack(f.time + delay, owed)
            owed = 0


def randomized(seed: int, vbuckets: int = 3) -> Script:
    """A random conversation: each vbucket's stream with random pauses (some of them
    stalls), random NOOPs and acknowledgement delays."""
    rng = random.Random(seed)
    s = Script()
    s.setup(START, buffer=rng.choice((2048, 8192)))
    for k in range(vbuckets):
        vb = rng.randrange(1024)
        at = START + MS + k * MS
        opaque = s.request(at, vb)
        at += MS
        s.accept(at, vb, opaque)
        seqno = 0
        for _ in range(rng.randint(1, 4)):
            at += rng.randint(1, 3000) * MS
            s.marker(at, vb, opaque, seqno + 1, seqno + 10)
            for _ in range(rng.randint(1, 10)):
                at += rng.choice((rng.randint(1, 500), rng.randint(1, 12000))) * MS
                seqno += 1
                s.mutation(at, vb, opaque, seqno, lag=rng.randint(0, 5000) * MS)
        if rng.random() < 0.7:
            at += rng.randint(1, 8000) * MS
            s.end(at, vb, opaque, rng.choice(list(StreamEndStatus)))
    for k in range(rng.randint(0, 4)):
        at = START + rng.randint(1, 20_000) * MS
        s.noop(at, 0x500 + k)
        if rng.random() < 0.8:
            s.noop_answer(at + rng.randint(1, 900) * MS, 0x500 + k)
    _acks(s, every=rng.choice((500, 3000)), delay=rng.randint(1, 2000) * MS)
    return s
