"""TCP/IP packets and pcap/pcapng files written byte by byte from the format references,
for the capture reader's tests and benchmark."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

__all__ = [
    "TCP_ACK", "TCP_FIN", "TCP_PSH", "TCP_RST", "TCP_SYN", "TcpSegment", "ip_packet",
    "link_frame", "pcap_file", "pcapng_file", "pcapng_section", "tcp_conversation",
    "tcp_packet", "tcp_packets", "tcp_segments", "timed_packets",
]

TCP_FIN, TCP_SYN, TCP_RST, TCP_PSH, TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_LINK_ETHERNET, _LINK_RAW, _LINK_LOOP, _LINK_SLL, _LINK_SLL2 = 1, 101, 108, 113, 276
_LINK_NULL, _LINK_IPV4, _LINK_IPV6 = 0, 228, 229
_VLAN_TPIDS = (0x8100, 0x88A8)


def _address(text: str) -> bytes:
    import ipaddress
    return ipaddress.ip_address(text).packed


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f">{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ip_packet(src: str, dst: str, payload: bytes, *, protocol: int = 6, ttl: int = 64,
              ident: int = 0, fragment: int = 0, ipv6_extensions: int = 0) -> bytes:
    """An IPv4 or IPv6 packet (by the address family) around ``payload``.

    ``fragment`` sets the IPv4 flags/fragment-offset word (IPv6: adds a fragment header
    when non-zero); ``ipv6_extensions`` puts that many hop-by-hop/destination option
    headers (8 bytes each) before the payload.
    """
    s, d = _address(src), _address(dst)
    if len(s) != len(d):
        raise ValueError("source and destination of different IP versions")
    if len(s) == 4:
        header = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), ident, fragment,
                             ttl, protocol, 0, s, d)
        header = header[:10] + struct.pack(">H", _checksum(header)) + header[12:]
        return header + payload
    chain = []
    for i in range(ipv6_extensions):
        chain.append(0 if i == 0 else 60)              # hop-by-hop first, then dest options
    if fragment:
        chain.append(44)
    body, nxt = payload, protocol
    for kind in reversed(chain):
        if kind == 44:
            body = struct.pack(">BBHI", nxt, 0, fragment, ident) + body
        else:
            body = struct.pack(">BB", nxt, 0) + b"\x01\x04\0\0\0\0" + body     # PadN option
        nxt = kind
    return struct.pack(">IHBB16s16s", 0x60000000, len(body), nxt, ttl, s, d) + body


def tcp_packet(src: str, dst: str, sport: int, dport: int, seq: int, payload: bytes = b"", *,
               flags: int = TCP_ACK | TCP_PSH, ack: int = 0, window: int = 65535,
               options: bytes = b"", **ip) -> bytes:
    """An IP packet holding one TCP segment (``options`` padded to 4 bytes)."""
    options += b"\x01" * (-len(options) % 4)           # NOP padding
    offset = (20 + len(options)) // 4
    header = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF,
                         offset << 4, flags, window, 0, 0) + options
    return ip_packet(src, dst, header + payload, protocol=6, **ip)


def link_frame(packet: bytes, link: int = _LINK_ETHERNET, *, vlans=(),
               loopback_order: str = "<") -> bytes:
    """``packet`` (an IP packet) framed for a pcap link type.

    Ethernet takes 802.1Q/802.1ad ``vlans`` (ids, outermost first); SLL and SLL2 are
    Linux cooked captures; NULL writes the address family in ``loopback_order``.
    """
    version = packet[0] >> 4
    ethertype = 0x0800 if version == 4 else 0x86DD
    if link == _LINK_ETHERNET:
        tags = b"".join(struct.pack(">HH", _VLAN_TPIDS[0] if i == len(vlans) - 1
                                    else _VLAN_TPIDS[1], vid)
                        for i, vid in enumerate(vlans))
        return (b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + tags
                + struct.pack(">H", ethertype) + packet)
    if vlans:
        raise ValueError("VLAN tags are written on Ethernet frames only")
    if link == _LINK_SLL:
        return struct.pack(">HHH8sH", 0, 1, 6, b"\x02\0\0\0\0\x01\0\0", ethertype) + packet
    if link == _LINK_SLL2:
        return struct.pack(">HHIHBB8s", ethertype, 0, 2, 1, 0, 6,
                           b"\x02\0\0\0\0\x01\0\0") + packet
    if link == _LINK_NULL:
        return struct.pack(loopback_order + "I", 2 if version == 4 else 30) + packet
    if link == _LINK_LOOP:
        return struct.pack(">I", 2 if version == 4 else 24) + packet
    if link in (_LINK_RAW, _LINK_IPV4, _LINK_IPV6):
        return packet
    raise ValueError(f"no writer for link type {link}")


def pcap_file(packets, *, link: int = _LINK_ETHERNET, nanoseconds: bool = False,
              big_endian: bool = False, snaplen: int = 262144) -> bytes:
    """A classic pcap file of ``(timestamp_ns, frame)`` packets.

    Frames longer than ``snaplen`` are cut to it (their original length is kept).
    """
    order = ">" if big_endian else "<"
    magic = 0xA1B23C4D if nanoseconds else 0xA1B2C3D4
    out = [struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, snaplen, link)]
    for ts, frame in packets:
        sec, ns = divmod(ts, 10**9)
        captured = frame[:snaplen]
        out.append(struct.pack(order + "IIII", sec, ns if nanoseconds else ns // 1000,
                               len(captured), len(frame)))
        out.append(captured)
    return b"".join(out)


def _block(order: str, kind: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    size = 12 + len(body)
    return struct.pack(order + "II", kind, size) + body + struct.pack(order + "I", size)


def _option(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def pcapng_section(packets, *, links=(_LINK_ETHERNET,), big_endian: bool = False,
                   tsresol: int | None = None, tsoffset: int = 0,
                   extra_blocks: bool = False, simple: bool = False) -> bytes:
    """One pcapng section: a header, an interface per link type, then the packets.

    ``packets`` are ``(timestamp_ns, frame)`` or ``(timestamp_ns, frame, interface)``.
    ``tsresol`` is the if_tsresol option byte (None: the 10**-6 default, no option);
    ``tsoffset`` the if_tsoffset seconds subtracted from every timestamp written.
    ``extra_blocks`` adds a name resolution block, interface statistics and a custom
    block between packets; ``simple`` writes Simple Packet Blocks (no timestamps).
    """
    order = ">" if big_endian else "<"
    out = [_block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1)
                  + _option(order, 3, b"dcpfast.testing") + _option(order, 0, b""))]
    code = 6 if tsresol is None else tsresol
    for link in links:
        options = b""
        if tsresol is not None:
            options += _option(order, 9, bytes([tsresol]))
        if tsoffset:
            options += _option(order, 14, struct.pack(order + "q", tsoffset))
        options += _option(order, 2, b"eth0") + _option(order, 0, b"")
        out.append(_block(order, 1, struct.pack(order + "HHI", link, 0, 262144) + options))
    for i, packet in enumerate(packets):
        ts, frame, iface = packet if len(packet) == 3 else (*packet, 0)
        ts -= tsoffset * 10**9
        if code & 0x80:
            units = (ts << (code & 0x7F)) // 10**9
        else:
            units = ts * 10**code // 10**9
        units &= 2**64 - 1                             # as a 64-bit field wraps
        if simple:
            out.append(_block(order, 3, struct.pack(order + "I", len(frame)) + frame))
        else:
            out.append(_block(order, 6, struct.pack(order + "IIIII", iface, units >> 32,
                                                    units & 0xFFFFFFFF, len(frame),
                                                    len(frame)) + frame
                              + _option(order, 1, b"packet comment") + _option(order, 0, b"")))
        if extra_blocks and i % 3 == 0:
            out.append(_block(order, 4, struct.pack(order + "HH4s", 1, 4 + 9, b"\x0a\0\0\x02")
                              + b"couchbase" + b"\0" * 3 + struct.pack(order + "HH", 0, 0)))
            out.append(_block(order, 5, struct.pack(order + "III", 0, 0, 0)
                              + _option(order, 0, b"")))
            out.append(_block(order, 0x00000BAD, struct.pack(order + "I", 32473) + b"opaque"))
    return b"".join(out)


def pcapng_file(packets, **kwargs) -> bytes:
    """A pcapng file of one section (see ``pcapng_section``); join sections for more."""
    return pcapng_section(packets, **kwargs)


@dataclass
class TcpSegment:
    """One TCP segment of a test conversation: who sent it, where its payload sits in
    that direction's byte stream (0 = the first byte after the SYN), and its flags."""

    client: bool
    offset: int
    payload: bytes = b""
    flags: int = TCP_ACK | TCP_PSH


def tcp_segments(data: bytes, sizes=(1448,), *, client: bool = True, start: int = 0):
    """Cut ``data`` into segments of the given sizes (repeated cyclically)."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        size = max(1, sizes[i % len(sizes)])
        out.append(TcpSegment(client, start + pos, data[pos:pos + size]))
        pos += size
        i += 1
    return out


def tcp_conversation(client_bytes: bytes, server_bytes: bytes, *, sizes=(1448,),
                     handshake: bool = True, fin: bool = True, reorder: float = 0.0,
                     retransmit: float = 0.0, drop=(), seed: int = 0):
    """The segments of one TCP connection carrying ``client_bytes`` and ``server_bytes``.

    Each direction is cut by ``sizes``; the two directions interleave at random. The
    handshake's SYNs and the closing FINs come first and last. ``reorder``: chance that a
    data segment is sent after up to three later ones; ``retransmit``: chance that a
    segment is sent again later, cut differently (overlapping its neighbours);
    ``drop``: ``(client, index)`` pairs of data segments that never reach the capture.
    """
    rng = random.Random(seed)
    queues = [tcp_segments(client_bytes, sizes, client=True),
              tcp_segments(server_bytes, sizes, client=False)]
    dropped = set(drop)
    flows = [[(seg, (seg.client, i) in dropped) for i, seg in enumerate(q)] for q in queues]
    data, streams = [], {True: client_bytes, False: server_bytes}
    while flows[0] or flows[1]:
        side = flows[0] if flows[0] and (not flows[1] or rng.random() < 0.5) else flows[1]
        for _ in range(rng.randint(1, 4)):
            if side:
                data.append(side.pop(0))
    out: list = []
    later: list = []
    for seg, lost in data:
        if not lost:
            out.append(seg)
        later = [(wait - 1, copy) for wait, copy in later]
        out += [copy for wait, copy in later if wait <= 0]
        later = [(wait, copy) for wait, copy in later if wait > 0]
        if retransmit and rng.random() < retransmit:
            stream = streams[seg.client]
            lo = max(0, seg.offset - rng.randint(0, 300))
            hi = min(len(stream), seg.offset + len(seg.payload) + rng.randint(0, 300))
            later.append((rng.randint(0, 3), TcpSegment(seg.client, lo, stream[lo:hi])))
    out += [copy for _, copy in later]
    if reorder:
        for i in range(len(out) - 1):
            if rng.random() < reorder:
                j = min(len(out) - 1, i + rng.randint(1, 3))
                out[i], out[j] = out[j], out[i]
    head = [TcpSegment(True, -1, b"", TCP_SYN), TcpSegment(False, -1, b"", TCP_SYN | TCP_ACK),
            TcpSegment(True, 0, b"", TCP_ACK)] if handshake else []
    tail = [TcpSegment(True, len(client_bytes), b"", TCP_FIN | TCP_ACK),
            TcpSegment(False, len(server_bytes), b"", TCP_FIN | TCP_ACK)] if fin else []
    return head + out + tail


def tcp_packets(segments, *, client=("10.0.0.1", 50123), server=("10.0.0.2", 11210),
                isn=(0xFFFFF000, 1000), link: int = _LINK_ETHERNET, vlans=(),
                start_ns: int = 1_700_000_000 * 10**9, step_ns: int = 1000, **ip):
    """``(timestamp_ns, frame)`` packets of ``segments`` between two endpoints.

    Sequence numbers are ``isn + 1 + offset`` (the client's default ISN makes them wrap
    past 2**32 after 4 KiB); timestamps advance by ``step_ns`` per packet.
    """
    out = []
    for i, seg in enumerate(segments):
        (src, sport), (dst, dport) = (client, server) if seg.client else (server, client)
        seq = isn[0 if seg.client else 1] + 1 + seg.offset
        ack = isn[1 if seg.client else 0] + 1
        packet = tcp_packet(src, dst, sport, dport, seq, seg.payload, flags=seg.flags, ack=ack,
                            **ip)
        out.append((start_ns + i * step_ns, link_frame(packet, link, vlans=vlans)))
    return out


def timed_packets(events, *, client=("10.0.0.1", 50123), server=("10.0.0.2", 11210),
                  mss: int = 1448, isn=(0x10000, 0x20000), handshake: bool = True,
                  fin: bool = True, link: int = _LINK_ETHERNET) -> list[tuple[int, bytes]]:
    """``(timestamp_ns, frame)`` packets of one TCP connection whose payloads are sent at
    the times given: ``events`` are ``(time_ns, from_client, data)``, each cut into
    segments of at most ``mss`` bytes a microsecond apart, in time order (a frame's
    capture time is that of the segment holding its last byte). The handshake comes a
    millisecond before the first event, the FINs a millisecond after the last."""
    events = sorted(events, key=lambda e: e[0])
    packets: list[tuple[int, bool, int, int, bytes]] = []    # time, client, flags, offset, data
    sent = {True: 0, False: 0}
    for t, from_client, data in events:
        for k, at in enumerate(range(0, len(data), mss)):
            packets.append((t + k * 1000, from_client, TCP_ACK | TCP_PSH,
                            sent[from_client] + at, data[at:at + mss]))
        sent[from_client] += len(data)
    if handshake and events:
        t = events[0][0] - 1_000_000
        packets[:0] = [(t, True, TCP_SYN, -1, b""), (t + 100, False, TCP_SYN | TCP_ACK, -1, b""),
                       (t + 200, True, TCP_ACK, 0, b"")]
    if fin and events:
        t = max(p[0] for p in packets) + 1_000_000
        packets += [(t, True, TCP_FIN | TCP_ACK, sent[True], b""),
                    (t + 100, False, TCP_FIN | TCP_ACK, sent[False], b"")]
    out = []
    for t, from_client, flags, offset, data in sorted(packets, key=lambda p: p[0]):
        (src, sport), (dst, dport) = (client, server) if from_client else (server, client)
        seq = isn[0 if from_client else 1] + 1 + offset
        ack = isn[1 if from_client else 0] + 1
        out.append((t, link_frame(tcp_packet(src, dst, sport, dport, seq, data, flags=flags,
                                             ack=ack), link)))
    return out
