"""Packet captures (``dcpfast.pcap.reader``): those written by ``dcpfast.testing`` decode to
exactly the frames sent, whatever their format, link layer, segmentation or damage."""

from __future__ import annotations

import io
import random
import struct
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dcpfast
from dcpfast import CaptureFormatError, packets
from dcpfast import protocol as P
from dcpfast import testing as t
from dcpfast.pcap import CLIENT_TO_SERVER, SERVER_TO_CLIENT, CaptureBatch, read_pcap
from tests.memory import peak_in_child

SERVER = t.synthetic_frames(60, seed=11)                      # collections, with a HELLO
CLIENT = t.synthetic_frames(6, seed=12, collections=False)    # a second, independent stream
SERVER_BYTES = b"".join(f.data for f in SERVER)
CLIENT_BYTES = b"".join(f.data for f in CLIENT)


def frame_table(frames, start=0):
    """{stream offset: frame bytes} of frames sent back to back from ``start``."""
    out, at = {}, start
    for f in frames:
        out[at] = f.data
        at += len(f.data)
    return out


SENT = {CLIENT_TO_SERVER: frame_table(CLIENT), SERVER_TO_CLIENT: frame_table(SERVER)}


def decode(capture: bytes, **kwargs):
    """{direction: ({offset: frame bytes}, [errors], {offset: timestamp})} and the reader."""
    reader = read_pcap(io.BytesIO(capture), **kwargs)
    out = {}
    for batch in reader:
        assert isinstance(batch, CaptureBatch)
        frames, errors, stamps = out.setdefault(batch.connection.direction, ({}, [], {}))
        lengths = P.HEADER_SIZE + batch["body_len"].astype(np.int64)
        for off, length, ts in zip(batch["offset"].tolist(), lengths.tolist(),
                                   batch.timestamps.tolist()):
            start = off - batch.base_offset
            assert off not in frames
            frames[off] = bytes(batch.data[start:start + length])
            stamps[off] = ts
        errors.extend(batch.errors)
    return out, reader


def assert_exact(got):
    for direction, sent in SENT.items():
        frames, errors, _ = got[direction]
        assert errors == []
        assert frames == sent, direction


def conversation_capture(fmt="pcap", **kwargs):
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, **{
        k: kwargs.pop(k) for k in ("sizes", "reorder", "retransmit", "drop", "seed",
                                   "handshake", "fin") if k in kwargs})
    packets = t.tcp_packets(segs, **kwargs)
    link = kwargs.get("link", 1)
    return t.pcap_file(packets, link=link) if fmt == "pcap" else \
        t.pcapng_file(packets, links=(link,))


# -- the file formats -------------------------------------------------------------------------


def test_clean_conversation_decodes_exactly():
    got, reader = decode(conversation_capture())
    assert_exact(got)
    assert reader.counters["gaps"] == 0 and reader.problems == []
    assert reader.counters["tcp_segments"] == reader.counters["packets"]


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("nanoseconds", [False, True])
def test_pcap_byte_orders_and_timestamp_units(big, nanoseconds):
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, seed=1)
    packets = t.tcp_packets(segs, start_ns=1_700_000_000_123_456_000, step_ns=1_000_001_000)
    got, _ = decode(t.pcap_file(packets, big_endian=big, nanoseconds=nanoseconds))
    assert_exact(got)
    stamps = {ts for _, _, s in got.values() for ts in s.values()}
    assert stamps <= {ts if nanoseconds else ts // 1000 * 1000 for ts, _ in packets}


def test_timestamp_is_that_of_the_packet_with_the_last_byte():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(700, 13, 2000), seed=4)
    packets = t.tcp_packets(segs, step_ns=1000)
    got, _ = decode(t.pcap_file(packets, nanoseconds=True))
    for (ts, _), seg in zip(packets, segs):
        direction = CLIENT_TO_SERVER if seg.client else SERVER_TO_CLIENT
        for off, frame in SENT[direction].items():
            last = off + len(frame) - 1
            if seg.payload and seg.offset <= last < seg.offset + len(seg.payload):
                assert got[direction][2][off] == ts


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("tsresol", [None, 9, 3, 0x80 | 20])
def test_pcapng_sections_interfaces_and_other_blocks(big, tsresol):
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(333,), seed=5)
    frames = {1: t.tcp_packets(segs), 113: t.tcp_packets(segs, link=113)}
    # client packets on an Ethernet interface, server packets on a Linux cooked one
    packets = [(ts, eth if seg.client else sll, 0 if seg.client else 1)
               for seg, (ts, eth), (_, sll) in zip(segs, frames[1], frames[113])]
    capture = t.pcapng_file(packets, links=(1, 113), big_endian=big, tsresol=tsresol,
                            extra_blocks=True)
    got, reader = decode(capture)
    assert_exact(got)
    stamps = sorted(ts for _, _, s in got.values() for ts in s.values())
    exact = {ts for ts, _ in frames[1]}
    if tsresol in (None, 9, 3):
        unit = 10 ** (9 - (6 if tsresol is None else tsresol))
        assert set(stamps) <= {ts // unit * unit for ts in exact}
    else:
        assert all(abs(ts - min(exact, key=lambda e: abs(e - ts))) < 1000 for ts in stamps)


def test_pcapng_second_section_in_the_other_byte_order_and_tsoffset():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(500,), seed=6)
    packets = t.tcp_packets(segs, link=101)
    half = len(packets) // 2
    capture = (t.pcapng_section(packets[:half], links=(101,), tsoffset=1_600_000_000)
               + t.pcapng_section(packets[half:], links=(101,), big_endian=True, tsresol=9))
    got, _ = decode(capture)
    assert_exact(got)
    assert {ts for _, _, s in got.values() for ts in s.values()} <= \
        {ts // 1000 * 1000 for ts, _ in packets[:half]} | {ts for ts, _ in packets[half:]}


def test_pcapng_simple_packet_blocks_have_no_time():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, seed=7)
    got, _ = decode(t.pcapng_file(t.tcp_packets(segs), simple=True))
    assert_exact(got)
    assert {ts for _, _, s in got.values() for ts in s.values()} == {0}


# -- link layers and IP -----------------------------------------------------------------------


@pytest.mark.parametrize("link, ipv6", [(link, v6) for link in (0, 1, 101, 108, 113, 276)
                                         for v6 in (False, True)] + [(228, False), (229, True)])
def test_every_link_type_and_ip_version(link, ipv6):
    hosts = dict(client=("fd00::1", 50000), server=("fd00::2:1", 11210)) if ipv6 else {}
    got, _ = decode(conversation_capture(link=link, **hosts))
    assert_exact(got)
    batch = next(iter(read_pcap(io.BytesIO(conversation_capture(link=link, **hosts)))))
    assert batch.connection.src == (("fd00::1" if ipv6 else "10.0.0.1")
                                    if batch.connection.direction == CLIENT_TO_SERVER
                                    else ("fd00::2:1" if ipv6 else "10.0.0.2"))


def test_big_endian_loopback_family():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, seed=8)
    packets = [(ts, t.link_frame(t.tcp_packet(*args), 0, loopback_order=">"))
               for ts, args in _raw_args(segs)]
    got, _ = decode(t.pcap_file(packets, link=0))
    assert_exact(got)


def _raw_args(segs, client=("10.0.0.1", 50123), server=("10.0.0.2", 11210)):
    isn = {True: 7, False: 9}
    for i, seg in enumerate(segs):
        (src, sport), (dst, dport) = (client, server) if seg.client else (server, client)
        yield i * 1000, (src, dst, sport, dport, isn[seg.client] + 1 + seg.offset,
                         seg.payload, )


@pytest.mark.parametrize("vlans", [(7,), (100, 200), (1, 2, 3)])
def test_vlan_tags(vlans):
    assert_exact(decode(conversation_capture(vlans=vlans))[0])
    assert_exact(decode(conversation_capture(vlans=vlans, client=("fd00::1", 5),
                                             server=("fd00::2", 11210)))[0])


def test_ipv6_extension_headers_and_tcp_options():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, seed=9)
    packets = []
    for ts, (src, dst, sport, dport, seq, payload) in _raw_args(
            segs, ("fd00::1", 40000), ("fd00::2", 11210)):
        packet = t.tcp_packet(src, dst, sport, dport, seq, payload, ipv6_extensions=2,
                              options=b"\x02\x04\x05\xb4\x01\x03\x03\x07")
        packets.append((ts, t.link_frame(packet)))
    assert_exact(decode(t.pcap_file(packets))[0])


def test_non_tcp_packets_fragments_and_other_ports_are_ignored():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(900,), seed=10)
    packets = t.tcp_packets(segs)
    noise = [
        t.link_frame(t.ip_packet("10.0.0.1", "10.0.0.2", b"\0" * 30, protocol=17)),  # UDP
        b"\xff" * 12 + b"\x08\x06" + b"\0" * 28,                                      # ARP
        t.link_frame(t.ip_packet("10.0.0.1", "10.0.0.2", SERVER_BYTES[:64],
                                 fragment=0x2000)),                                  # fragment
        t.link_frame(t.ip_packet("fd00::1", "fd00::2", SERVER_BYTES[:64], fragment=8)),
        t.link_frame(t.tcp_packet("10.0.0.3", "10.0.0.2", 4000, 8091, 1, b"GET / HTTP/1.1")),
        t.link_frame(t.tcp_packet("10.0.0.1", "10.0.0.2", 50123, 11210, 5))[:40],  # cut short
        b"\x02" * 5,
    ]
    mixed = []
    for i, p in enumerate(packets):
        mixed.append(p)
        mixed.append((p[0], noise[i % len(noise)]))
    got, reader = decode(t.pcap_file(mixed))
    assert_exact(got)
    c = reader.counters
    assert c["packets"] == len(mixed) and c["tcp_segments"] + c["not_tcp"] + \
        c["ip_fragments"] + c["cut_short"] == len(mixed)
    assert c["ip_fragments"] > 0 and c["cut_short"] > 0 and c["other_ports"] > 0


def test_many_connections_interleaved():
    packets = []
    for i in range(40):                  # more connections than the grouping peels one by one
        segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(400 + i,), seed=i)
        packets += [(ts + j, frame) for j, (ts, frame) in enumerate(t.tcp_packets(
            segs, client=(f"10.0.{i}.1", 40000 + i), step_ns=40))]
    packets.sort(key=lambda p: p[0])
    batches = list(read_pcap(io.BytesIO(t.pcap_file(packets)), batch_bytes=20000))
    seen = {}
    for b in batches:
        c = b.connection
        key = (c.src, c.src_port, c.direction) if c.direction == CLIENT_TO_SERVER \
            else (c.dst, c.dst_port, c.direction)
        frames = seen.setdefault(key, {})
        for off, n in zip(b["offset"].tolist(), b["body_len"].tolist()):
            frames[off] = bytes(b.data[off - b.base_offset:off - b.base_offset + 24 + n])
        assert b.errors == []
    assert len(seen) == 80
    for (src, port, direction), frames in seen.items():
        assert frames == SENT[direction]


def test_other_ports_are_decoded_when_asked():
    got, _ = decode(conversation_capture(server=("10.0.0.2", 12000)), ports=(11210, 12000))
    assert_exact(got)
    assert decode(conversation_capture(server=("10.0.0.2", 12000)))[0] == {}


# -- TCP reassembly ---------------------------------------------------------------------------


def test_every_split_point_of_a_short_stream():
    data = b"".join(f.data for f in SERVER[:4])
    sent = frame_table(SERVER[:4])
    for cut in range(1, len(data)):
        segs = [t.TcpSegment(False, 0, data[:cut]), t.TcpSegment(False, cut, data[cut:])]
        got, _ = decode(t.pcap_file(t.tcp_packets(segs)))
        assert got[SERVER_TO_CLIENT][0] == sent, cut
        assert got[SERVER_TO_CLIENT][1] == []


def test_one_byte_segments_and_huge_segments():
    for sizes in [(1,), (1, 2, 3, 5, 8), (65000,)]:
        got, _ = decode(conversation_capture(sizes=sizes))
        assert_exact(got)


def test_one_frame_over_many_segments():
    big = [t.SyntheticFrame(t.mutation(b"k", bytes(range(256)) * 300, by_seqno=1), {})]
    segs = t.tcp_segments(big[0].data, (97,), client=False)
    got, _ = decode(t.pcap_file(t.tcp_packets(segs)))
    assert got[SERVER_TO_CLIENT][0] == frame_table(big)


@pytest.mark.parametrize("seed", range(6))
def test_reordering_and_retransmission(seed):
    got, reader = decode(conversation_capture(sizes=(300, 1448, 50), reorder=0.3,
                                              retransmit=0.3, seed=seed))
    assert_exact(got)
    assert reader.counters["gaps"] == 0


def test_first_copy_of_overlapping_bytes_wins():
    data = SERVER_BYTES[:3000]
    wrong = bytearray(data)
    wrong[1000:1500] = b"\xee" * 500                  # differs only where data came first
    segs = [t.TcpSegment(False, 0, data[:1500]), t.TcpSegment(False, 500, bytes(wrong[500:2500])),
            t.TcpSegment(False, 2500, data[2500:]),
            t.TcpSegment(False, 1400, bytes(wrong[1400:2100]))]
    sent = {k: v for k, v in frame_table(SERVER).items() if k + len(v) <= 3000}
    got, _ = decode(t.pcap_file(t.tcp_packets(segs)))
    frames, errors, _ = got[SERVER_TO_CLIENT]
    assert frames == sent
    # held out of order: the later overlapping copy loses to the earlier one too
    segs = [t.TcpSegment(False, 0, data[:100]), t.TcpSegment(False, 1000, data[1000:2000]),
            t.TcpSegment(False, 900, bytes(wrong[900:2100])),
            t.TcpSegment(False, 100, data[100:900]),
            t.TcpSegment(False, 2000, data[2000:])]
    assert decode(t.pcap_file(t.tcp_packets(segs)))[0][SERVER_TO_CLIENT][0] == sent


def _gap_check(got, direction, lo, hi):
    frames, errors, _ = got[direction]
    sent = SENT[direction]
    gaps = [e for e in errors if e.reason.startswith("capture gap")]
    assert [(e.offset, e.length) for e in gaps] == [(lo, hi - lo)]
    before = {k: v for k, v in sent.items() if k + len(v) <= lo}
    after = {k: v for k, v in sent.items() if k >= hi}
    for k, v in frames.items():
        assert sent.get(k) == v                    # nothing invented
    assert {k: v for k, v in frames.items() if k + len(v) <= lo} == before
    if after:                                      # resumed at the first frame after the gap
        assert {k: v for k, v in frames.items() if k >= hi} == after


@pytest.mark.parametrize("errors", ["skip", "strict"])
@pytest.mark.parametrize("index", [0, 3, 17, -1])
def test_missing_segment_is_reported_and_decoding_resumes(errors, index):
    sizes = (1000,)
    segs = t.tcp_segments(SERVER_BYTES, sizes, client=False)
    index %= len(segs)
    lost = segs[index]
    got, reader = decode(conversation_capture(sizes=sizes, drop=[(False, index)]), errors=errors)
    assert reader.counters["gaps"] == 1
    _gap_check(got, SERVER_TO_CLIENT, lost.offset, lost.offset + len(lost.payload))
    assert got[CLIENT_TO_SERVER][0] == SENT[CLIENT_TO_SERVER]


@pytest.mark.parametrize("sizes,drops", [((1000,), (3, 6)), ((1000,), (0, 2)),
                                         ((1000,), (4, 5)), ((1000,), (6, -1)),
                                         ((333,), (4, 6))])
def test_two_gaps_in_one_direction_are_reported_never_raised(sizes, drops):
    """Two segments missing from the server's side: in either mode both gaps are listed,
    every frame they leave whole is kept, and the bytes of each frame a gap cut (its head
    before the gap, its rest after) are listed as cut by a gap, not as damage or as a
    truncated frame (which strict mode would raise); the two modes agree."""
    segs = t.tcp_segments(SERVER_BYTES, sizes, client=False)
    drops = [i % len(segs) for i in drops]
    holes = [(segs[i].offset, segs[i].offset + len(segs[i].payload)) for i in drops]
    if holes[0][1] == holes[1][0]:                 # next to each other: one gap
        holes = [(holes[0][0], holes[1][1])]
    sent = SENT[SERVER_TO_CLIENT]
    cut = [k for k, v in sent.items() if any(k < lo < k + len(v) for lo, _ in holes)]
    assert cut, "no frame crosses a gap: nothing is cut"
    found = {}
    for errors in ("strict", "skip"):
        got, reader = decode(conversation_capture(sizes=sizes, drop=[(False, i)
                                                                     for i in drops]),
                             errors=errors)
        frames, regions, _ = got[SERVER_TO_CLIENT]
        assert reader.counters["gaps"] == len(holes)
        gaps = [r for r in regions if r.reason.startswith("capture gap")]
        assert [(r.offset, r.offset + r.length) for r in gaps] == holes
        by_gap = [r for r in regions if r.reason == "frame cut short by a capture gap"]
        assert len(gaps) + len(by_gap) == len(regions), regions    # no damage, no truncation

        def covered(k):
            return any(r.offset <= k < r.offset + r.length for r in by_gap)
        assert all(covered(k) for k in cut)
        for k, v in sent.items():
            if all(k + len(v) <= lo or k >= hi for lo, hi in holes) and not covered(k):
                assert frames.get(k) == v, (errors, k)              # whole: kept
        assert all(sent[k] == v for k, v in frames.items())        # nothing invented
        assert got[CLIENT_TO_SERVER][0] == SENT[CLIENT_TO_SERVER]
        found[errors] = got
    assert found["strict"] == found["skip"]


def test_gap_held_past_the_reorder_window(monkeypatch):
    monkeypatch.setattr("dcpfast.pcap.reassembly.REORDER_WINDOW", 4000)
    segs = t.tcp_segments(SERVER_BYTES, (1000,), client=False)
    got, reader = decode(t.pcap_file(t.tcp_packets(segs[:5] + segs[6:])), batch_bytes=3000)
    _gap_check(got, SERVER_TO_CLIENT, segs[5].offset, segs[6].offset)


def test_snaplen_cut_packets_leave_gaps():
    segs = t.tcp_segments(SERVER_BYTES, (1400,), client=False)
    packets = t.tcp_packets(segs)
    capture = t.pcap_file(packets[:4] + [(packets[4][0], packets[4][1])] + packets[5:],
                          snaplen=1000)
    got, reader = decode(capture)
    frames, errors, _ = got[SERVER_TO_CLIENT]
    assert reader.counters["gaps"] == len(segs) - (len(segs[-1].payload) <= 1000 - 54)
    for k, v in frames.items():
        assert SENT[SERVER_TO_CLIENT][k] == v


def test_capture_that_starts_mid_stream():
    cut = 5000
    segs = [s for s in t.tcp_segments(SERVER_BYTES, (700,), client=False) if s.offset >= cut]
    got, _ = decode(t.pcap_file(t.tcp_packets(segs)), errors="strict")
    frames, errors, _ = got[SERVER_TO_CLIENT]
    origin = segs[0].offset
    sent = {k - origin: v for k, v in SENT[SERVER_TO_CLIENT].items() if k >= origin}
    first = min(sent)
    assert frames == {k: v for k, v in sent.items() if k >= first}
    assert errors and errors[0].offset == 0


@pytest.mark.parametrize("isn", [(0xFFFFFFFF, 0xFFFFFF00), (0, 0x7FFFFFFF), (123, 0xFFFFFFFE)])
def test_sequence_numbers_wrap(isn):
    assert_exact(decode(conversation_capture(isn=isn, sizes=(128,), reorder=0.2, seed=2))[0])


def test_without_handshake_or_fin():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, handshake=False, fin=False)
    got, _ = decode(t.pcap_file(t.tcp_packets(segs)))
    assert_exact(got)


def test_reused_ports_make_a_new_connection():
    first = t.tcp_packets(t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, seed=1))
    second = t.tcp_packets(t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, seed=2),
                           isn=(555, 777), start_ns=1_800_000_000 * 10**9)
    reader = read_pcap(io.BytesIO(t.pcap_file(first + second)))
    batches = list(reader)
    server = [b for b in batches if b.connection.direction == SERVER_TO_CLIENT]
    assert sum(len(b) for b in server) == 2 * len(SERVER)
    assert all(b.errors == [] for b in batches)


def test_rst_ends_a_direction():
    segs = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, fin=False)
    segs.append(t.TcpSegment(False, len(SERVER_BYTES), b"", t.TCP_RST))
    assert_exact(decode(t.pcap_file(t.tcp_packets(segs)))[0])


@pytest.mark.parametrize("batch_bytes", [64, 1000, 7777])
def test_small_batches_give_the_same_frames(batch_bytes):
    got, _ = decode(conversation_capture(sizes=(300, 1448), reorder=0.2, retransmit=0.1),
                    batch_bytes=batch_bytes)
    assert_exact(got)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=8), st.integers(0, 2**32 - 1),
       st.floats(0, 0.5), st.floats(0, 0.5), st.integers(0, 1000),
       st.sampled_from(["pcap", "pcapng"]))
def test_random_segmentation_round_trip(sizes, isn, reorder, retransmit, seed, fmt):
    capture = conversation_capture(fmt, sizes=tuple(sizes), reorder=reorder,
                                   retransmit=retransmit, seed=seed, isn=(isn, isn ^ 0x5555))
    assert_exact(decode(capture)[0])


# -- damaged captures -------------------------------------------------------------------------


def test_garbage_is_not_a_capture():
    for data in (b"", b"garbage", SERVER_BYTES, bytes(100)):
        with pytest.raises(CaptureFormatError):
            list(read_pcap(io.BytesIO(data)))


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_truncated_capture(fmt):
    packets = t.tcp_packets(t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(700,)))
    capture = t.pcap_file(packets) if fmt == "pcap" else t.pcapng_file(packets)
    ends = {len(capture)}                         # where a record ends, in the pcap file
    at = 24
    for _, frame in packets:
        at += 16 + len(frame)
        ends.add(at)
    rng = random.Random(1)
    for cut in sorted(rng.sample(range(30, len(capture)), 40)):
        got, reader = decode(capture[:cut])
        for direction, (frames, errors, _) in got.items():
            for k, v in frames.items():
                assert SENT[direction][k] == v
        if fmt == "pcap":
            assert bool(reader.problems) == (cut not in ends)
        if reader.problems:
            assert reader.problems[0].offset < cut
            with pytest.raises(CaptureFormatError):
                list(read_pcap(io.BytesIO(capture[:cut]), errors="strict"))


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_random_damage_never_crashes(fmt):
    capture = bytearray(conversation_capture(fmt, sizes=(500,)))
    rng = random.Random(2)
    for _ in range(60):
        data = bytearray(capture)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(24, len(data))] = rng.randrange(256)
        for batch in read_pcap(io.BytesIO(bytes(data))):   # a damaged SYN may open a new
            offsets = batch["offset"]                    # connection: check batch by batch
            assert (np.diff(offsets.astype(np.int64)) > 0).all()
            assert len(batch.timestamps) == len(batch)
            if len(batch):
                assert offsets[0] >= batch.base_offset


def test_damaged_dcp_inside_a_clean_capture():
    data = bytearray(SERVER_BYTES)
    data[len(SERVER[0].data)] = 0x42                     # second frame: bad magic
    segs = [t.TcpSegment(False, -1, b"", t.TCP_SYN | t.TCP_ACK),
            *t.tcp_segments(bytes(data), (1000,), client=False)]
    capture = t.pcap_file(t.tcp_packets(segs))
    got, _ = decode(capture)
    frames, errors, _ = got[SERVER_TO_CLIENT]
    assert errors and errors[0].offset == len(SERVER[0].data)
    with pytest.raises(dcpfast.DcpFormatError) as info:
        decode(capture, errors="strict")
    assert info.value.offset == len(SERVER[0].data)


# -- API --------------------------------------------------------------------------------------


def test_tls_port_is_refused_and_tls_traffic_warned():
    with pytest.raises(ValueError, match="TLS"):
        read_pcap(io.BytesIO(conversation_capture()), ports=(11207,))
    capture = conversation_capture(server=("10.0.0.2", 11207))
    with pytest.warns(UserWarning, match="TLS"):
        assert decode(capture)[0] == {}


def test_paths_columns_arrow_and_filter(tmp_path):
    path = tmp_path / "dcp.pcap"
    path.write_bytes(conversation_capture())
    batches = list(read_pcap(path, columns=["opcode", "key"]))
    batch = next(b for b in batches if b.connection.direction == SERVER_TO_CLIENT)
    assert batch.columns == ("opcode", "key_offset", "key_len")
    table = batch.to_arrow()
    assert table.column_names[-6:] == ["timestamp", "src", "dst", "direction", "src_port",
                                       "dst_port"]
    assert table.num_rows == len(SERVER)
    assert table["key"].to_pylist()[-1] == batch.key(-1)
    assert str(table["timestamp"].type) == "timestamp[ns, tz=UTC]"
    picked = batch.filter(batch["opcode"] == P.Opcode.MUTATION)
    assert isinstance(picked, CaptureBatch) and len(picked.timestamps) == len(picked)
    assert picked.connection == batch.connection
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(batch.to_pandas()) == len(SERVER)


def test_collections_decided_per_direction():
    got = {b.connection.direction: b.collections
           for b in read_pcap(io.BytesIO(conversation_capture()))}
    assert got == {CLIENT_TO_SERVER: False, SERVER_TO_CLIENT: True}


# -- damaged records and blocks ---------------------------------------------------------------

def test_bad_record_stops_the_walk_where_it_is():
    packets = t.tcp_packets(t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(900,)))
    capture = bytearray(t.pcap_file(packets))
    at = 24 + sum(16 + len(frame) for _, frame in packets[:10])
    capture[at + 8:at + 12] = struct.pack("<I", 0xFFFFFFF0)      # record 10: absurd length
    got, reader = decode(bytes(capture))
    assert [(p.offset, p.reason) for p in reader.problems] == [
        (at, "capture record longer than 16 MiB")]
    assert sum(len(f) for f, _, _ in got.values()) > 0
    with pytest.raises(CaptureFormatError) as info:
        list(read_pcap(io.BytesIO(bytes(capture)), errors="strict"))
    assert info.value.offset == at


def _blocks(capture: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, length) of each block of a little-endian pcapng file."""
    out, at = [], 0
    while at < len(capture):
        kind, length = struct.unpack_from("<II", capture, at)
        out.append((at, kind, length))
        at += length
    return out


@pytest.mark.parametrize("damage", ["interface", "captured_length", "short_idb"])
def test_one_damaged_pcapng_block_is_skipped(damage):
    sizes = (1000,)
    lost = t.tcp_segments(SERVER_BYTES, sizes, client=False)[4]
    segments = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=sizes)
    capture = bytearray(t.pcapng_file(t.tcp_packets(segments)))
    blocks = _blocks(bytes(capture))
    if damage == "short_idb":                      # a second, damaged interface block
        at = blocks[1][0] + blocks[1][2]
        capture[at:at] = struct.pack("<IIII", packets.PCAPNG_INTERFACE, 16, 0, 16)
        length, reason, lost = 16, "pcapng block of impossible length", None
    else:
        carrying = next(i for i, seg in enumerate(segments) if not seg.client
                        and seg.offset == lost.offset and seg.payload)
        at, _, length = [b for b in blocks
                         if b[1] == packets.PCAPNG_ENHANCED_PACKET][carrying]
        if damage == "interface":
            capture[at + 8:at + 12] = struct.pack("<I", 7)
            reason = "pcapng packet on an undeclared interface"
        else:
            capture[at + 20:at + 24] = struct.pack("<I", length)
            reason = "pcapng block of impossible length"
    got, reader = decode(bytes(capture))
    assert [(p.offset, p.length, p.reason) for p in reader.problems] == [(at, length, reason)]
    if lost is None:
        assert_exact(got)
    else:
        assert reader.counters["gaps"] == 1
        _gap_check(got, SERVER_TO_CLIENT, lost.offset, lost.offset + len(lost.payload))
        assert got[CLIENT_TO_SERVER][0] == SENT[CLIENT_TO_SERVER]
    with pytest.raises(CaptureFormatError) as info:
        list(read_pcap(io.BytesIO(bytes(capture)), errors="strict"))
    assert info.value.offset == at


def test_damaged_blocks_past_the_listed_ones_are_counted(monkeypatch):
    monkeypatch.setattr("dcpfast.pcap.reader.MAX_PROBLEMS", 5)
    segments = t.tcp_conversation(CLIENT_BYTES, SERVER_BYTES, sizes=(200,))
    capture = bytearray(t.pcapng_file(t.tcp_packets(segments)))
    blocks = [b for b in _blocks(bytes(capture)) if b[1] == packets.PCAPNG_ENHANCED_PACKET]
    for at, _, _ in blocks[5:25]:
        capture[at + 8:at + 12] = struct.pack("<I", 9)
    got, reader = decode(bytes(capture))
    assert len(reader.problems) == 5 and reader.counters["damaged_blocks"] == 20
    assert reader.problems_not_listed == 15
    for direction, (frames, _, _) in got.items():
        assert all(SENT[direction][k] == v for k, v in frames.items())


def read_job(path: str):
    """Reading the capture at ``path`` in 512 KiB batches, counting its frames."""
    return lambda: sum(len(b) for b in read_pcap(path, batch_bytes=1 << 19, collections=True))


@pytest.mark.skipif(dcpfast.IMPLEMENTATION != "cython",
                    reason="the memory bound is the compiled core's; the twin is too slow here")
def test_memory_stays_bounded(tmp_path):
    body = b"".join(f.data for f in SERVER[20:])                 # frames after the handshake
    stream = SERVER_BYTES + body * (24_000_000 // len(body))
    path = tmp_path / "big.pcap"
    path.write_bytes(t.pcap_file(t.tcp_packets(t.tcp_segments(stream, (1448,), client=False))))
    frames = len(dcpfast.scan(stream))
    count, peak = peak_in_child("tests.pcap.test_reader", "read_job", path)
    assert count == frames
    # the chunks read and the batches' columns (recycled memory), each peak counted in full
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB for a {len(stream) >> 20} MiB stream"


@pytest.mark.parametrize("fin", [False, True])
@pytest.mark.parametrize("batch_bytes", [1 << 16, 1 << 23])
def test_a_connections_requests_come_before_the_answers_after_them(fin, batch_bytes):
    """Requests every 10 ms, each answered by 40 KB: every server-to-client frame is
    yielded after every client-to-server frame captured before it, though the client's
    few bytes are far from the MiB a direction's collections are judged on, and the
    chunks cut the server's side into many batches."""
    ms, start = 1_000_000, 1_700_000_000 * 10**9
    events = []
    for k in range(60):
        events.append((start + 10 * k * ms, True, t.stream_request(vbucket=k, opaque=k)))
        events.append((start + (10 * k + 5) * ms, False, t.failover_log_response(
            [(k, 0)], opaque=k) + t.mutation(b"k", b"v" * 40_000, by_seqno=1, vbucket=k, opaque=k)))
    capture = t.pcap_file(t.timed_packets(events, fin=fin))
    seen_client, order = [], []
    for batch in read_pcap(io.BytesIO(capture), batch_bytes=batch_bytes):
        if batch.connection.direction == CLIENT_TO_SERVER:
            seen_client += batch.timestamps.tolist()
        else:
            order.append((int(batch.timestamps.max()), len(seen_client)))
    assert len(seen_client) == 60 and len(order) > (1 if batch_bytes == 1 << 16 else 0)
    for last, known in order:
        assert known >= sum(1 for when, client, _ in events if client and when <= last)
