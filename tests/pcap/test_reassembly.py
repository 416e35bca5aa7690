"""TCP reassembly against first principles: any segmentation, arrival order and duplication
gives each byte of the stream from the first segment that carried it, and the work grows
as n log n in the segments, whatever their order."""

from __future__ import annotations

import io
import random
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dcpfast import protocol as P
from dcpfast import testing as t
from dcpfast.pcap import SERVER_TO_CLIENT, read_pcap, reassembly

SYN = t.TcpSegment(False, -1, b"", t.TCP_SYN | t.TCP_ACK)


def _stream(values: list[int]) -> tuple[bytes, list[tuple[int, int]], np.ndarray]:
    """Mutations with values of these lengths: the bytes, each frame's (offset, length),
    and a mask of the value bytes (the ones a copy may change without breaking frames)."""
    frames = [t.mutation(b"key%d" % i, bytes(n), by_seqno=i + 1) for i, n in enumerate(values)]
    data, extents, at = b"".join(frames), [], 0
    mask = np.zeros(len(data), bool)
    for f, n in zip(frames, values):
        extents.append((at, len(f)))
        mask[at + len(f) - n:at + len(f)] = True
        at += len(f)
    return data, extents, mask


def _first_copies(size: int, arrivals: list[tuple[int, bytes]]) -> bytes:
    """The stream by first principles: each byte from the first arrival that holds it."""
    out = bytearray(size)
    taken = np.zeros(size, bool)
    for offset, payload in arrivals:
        for i, byte in enumerate(payload):
            if not taken[offset + i]:
                taken[offset + i] = True
                out[offset + i] = byte
    assert taken.all()
    return bytes(out)


def _decoded(capture: bytes, **kwargs) -> tuple[dict[int, bytes], list]:
    """{offset: frame bytes} and the errors of the server-to-client direction."""
    frames, errors = {}, []
    for batch in read_pcap(io.BytesIO(capture), collections=False, **kwargs):
        assert batch.connection.direction == SERVER_TO_CLIENT
        lengths = P.HEADER_SIZE + batch["body_len"].astype(np.int64)
        for off, length in zip(batch["offset"].tolist(), lengths.tolist()):
            start = off - batch.base_offset
            frames[off] = bytes(batch.data[start:start + length])
        errors += batch.errors
    return frames, errors


@st.composite
def _arrivals(draw):
    """A stream, cut at random, the pieces in a random order with copies of random
    ranges among them; each copy with its own value bytes."""
    values = draw(st.lists(st.integers(0, 60), min_size=1, max_size=12))
    data, extents, mask = _stream(values)
    cuts = sorted(draw(st.sets(st.integers(1, len(data) - 1), max_size=40)))
    bounds = [0, *cuts, len(data)]
    pieces = [(a, b) for a, b in zip(bounds, bounds[1:])]
    copies = draw(st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(1, 400)),
                           max_size=12))
    pieces += [(lo, min(len(data), lo + n)) for lo, n in copies]
    order = draw(st.permutations(range(len(pieces))))
    arrivals = []
    for version, i in enumerate(order):
        lo, hi = pieces[i]
        payload = np.frombuffer(data[lo:hi], np.uint8).copy()
        payload[mask[lo:hi]] = version + 1            # each copy's values differ
        arrivals.append((lo, payload.tobytes()))
    return data, extents, arrivals


@settings(max_examples=200, deadline=None)
@given(_arrivals(), st.sampled_from([64, 700, 1 << 20]), st.booleans())
def test_each_byte_comes_from_its_first_copy(case, batch_bytes, wrap):
    data, extents, arrivals = case
    segments = [SYN] + [t.TcpSegment(False, lo, payload) for lo, payload in arrivals]
    isn = (1, 0xFFFFFFFF - 100) if wrap else (1, 1000)
    capture = t.pcap_file(t.tcp_packets(segments, isn=isn))
    expected = _first_copies(len(data), arrivals)
    frames, errors = _decoded(capture, batch_bytes=batch_bytes, errors="strict")
    assert errors == []
    assert frames == {at: expected[at:at + n] for at, n in extents}


def test_first_copy_wins_over_a_later_in_order_copy():
    data, extents, mask = _stream([40, 40, 40])
    wrong = np.frombuffer(data, np.uint8).copy()
    wrong[mask] = 0xEE
    wrong = wrong.tobytes()
    # held first, then an in-order copy overlapping it: the held bytes came first
    arrivals = [(100, data[100:]), (0, wrong[:150])]
    segments = [SYN] + [t.TcpSegment(False, lo, p) for lo, p in arrivals]
    frames, _ = _decoded(t.pcap_file(t.tcp_packets(segments)))
    expected = _first_copies(len(data), arrivals)
    assert expected[:100] == wrong[:100] and expected[100:] == data[100:]
    assert frames == {at: expected[at:at + n] for at, n in extents}


# -- growth ------------------------------------------------------------------------------


def _behind_a_hole(n: int, order: str) -> bytes:
    """A capture of ``n`` one-byte segments, the first one last and the rest in ``order``."""
    frames = t.synthetic_frames(400, seed=11)
    data = b"".join(f.data for f in frames)[:n]
    segs = t.tcp_segments(data, (1,), client=False)
    rest = segs[1:]
    if order == "random":
        random.Random(5).shuffle(rest)
    elif order == "reverse":
        rest.reverse()
    elif order == "alternate":                      # every other byte, then the others
        rest = rest[::2] + rest[1::2]
    return t.pcap_file(t.tcp_packets([SYN, *rest, segs[0]]))


class _TooMuchWork(Exception):
    pass


def _calls(fn, limit: int) -> int:
    """The Python and C functions ``fn()`` calls: a count of its work that does not depend
    on the machine; stops with ``_TooMuchWork`` past ``limit``."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1
            if count > limit:
                raise _TooMuchWork

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def test_reassembly_work_grows_as_n_log_n_in_any_order():
    for order in ("random", "reverse", "alternate"):
        small, large = _behind_a_hole(2000, order), _behind_a_hole(16000, order)
        frames = {}

        def run(capture):
            frames[len(capture)] = sum(len(b) for b in read_pcap(io.BytesIO(capture)))

        base = _calls(lambda: run(small), 10**9)
        try:
            work = _calls(lambda: run(large), 3 * 8 * base)      # linear: 8 times the work
        except _TooMuchWork:
            raise AssertionError(f"{order}: 8 times the segments took more than 24 times "
                                 f"the work ({base:,} calls for 2,000)") from None
        assert work > 4 * base
        assert frames[len(large)] > frames[len(small)] > 0


def test_held_segments_count_against_the_window(monkeypatch):
    monkeypatch.setattr(reassembly, "REORDER_WINDOW", 100 * reassembly.HELD_SEGMENT_COST)
    capture = _behind_a_hole(2000, "reverse")
    reader = read_pcap(io.BytesIO(capture))
    list(reader)
    # 2,000 bytes are far below the window, but not 1,999 segments held behind the hole
    assert reader.counters["gaps"] > 0
    monkeypatch.setattr(reassembly, "REORDER_WINDOW", 2100 * reassembly.HELD_SEGMENT_COST)
    reader = read_pcap(io.BytesIO(capture))
    list(reader)
    assert reader.counters["gaps"] == 0


# -- what all the directions of a capture hold ----------------------------------------------


def _lossy_connections(count: int, segments: int) -> tuple[bytes, dict]:
    """``count`` connections, each sending ``segments`` 100-byte segments of its own
    stream, all but the first of each before any first (so that each holds the rest
    behind a hole until the end); and {client port: stream} of what each sent."""
    frames = t.synthetic_frames(60, seed=21)
    data = b"".join(f.data for f in frames)[:100 * segments]
    firsts, rests, sent = [], [], {}
    for i in range(count):
        client = ("10.1.0.1", 30000 + i)
        segs = t.tcp_segments(data, (100,), client=False)
        rests.append(t.tcp_packets([SYN, *segs[1:]], client=client))
        firsts.append(t.tcp_packets(segs[:1], client=client))
        sent[30000 + i] = data
    interleaved = [p for group in zip(*rests) for p in group]
    return t.pcap_file(interleaved + [p for f in firsts for p in f]), sent


def _nothing_invented(capture: bytes, sent: dict):
    """Read ``capture`` a few packets at a time (the directions take their segments
    in turn); check every frame against what its connection sent."""
    reader = read_pcap(io.BytesIO(capture), collections=False, batch_bytes=1000)
    frames = 0
    for batch in reader:
        data = sent[batch.connection.dst_port]
        lengths = P.HEADER_SIZE + batch["body_len"].astype(np.int64)
        for off, n in zip(batch["offset"].tolist(), lengths.tolist()):
            start = off - batch.base_offset
            assert bytes(batch.data[start:start + n]) == data[off:off + n]
            frames += 1
    return reader, frames


def test_what_all_directions_hold_is_bounded(monkeypatch):
    capture, sent = _lossy_connections(20, 30)
    reader, frames = _nothing_invented(capture, sent)
    assert reader.counters["gaps"] == 0
    # 20 directions holding 29 segments each: room for 100 segments
    monkeypatch.setattr(reassembly, "REORDER_BUDGET", 100 * (100 + reassembly.HELD_SEGMENT_COST))
    small, fewer = _nothing_invented(capture, sent)
    assert small.counters["gaps"] >= 15 and 0 < fewer < frames


def test_least_recently_active_directions_close_past_the_limit(monkeypatch):
    monkeypatch.setattr("dcpfast.pcap.reader.MAX_DIRECTIONS", 8)
    capture, sent = _lossy_connections(20, 30)
    reader, frames = _nothing_invented(capture, sent)
    assert frames > 0
    # one frame a connection, each before the next connection's: all of them kept
    server = t.mutation(b"key", b"value" * 10, by_seqno=1)
    packets = []
    for i in range(40):
        segs = t.tcp_conversation(b"", server, handshake=False, fin=False)
        packets += t.tcp_packets(segs, client=("10.2.0.1", 20000 + i))
    batches = list(read_pcap(io.BytesIO(t.pcap_file(packets)), collections=False))
    assert sum(len(b) for b in batches) == 40 and all(not b.errors for b in batches)
