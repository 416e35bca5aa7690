"""Pure-Python twin of the compiled packet walker ``cpcap`` (``DCPFAST_PUREPYTHON=1``
selects it), with the same names and signatures, written for clarity.

``walk`` reads capture records (pcap or pcapng) from a buffer and writes one row per
TCP segment: capture timestamp (ns), connection-direction key, sequence number, TCP
flags and where the captured payload sits in the buffer. Its docstring is the contract
of both walkers.
"""

from __future__ import annotations

import struct

import numpy as np

from .. import packets as PK

_S = PK.WalkStatus
_CP = PK.CaptureProblem
_M64 = (1 << 64) - 1
_KEY = PK.CONNECTION_KEY_SIZE
_BE16 = struct.Struct(">H")
_BE32 = struct.Struct(">I")
_LE32 = struct.Struct("<I")


def _signed64(value):
    value &= _M64
    return value - (1 << 64) if value >> 63 else value


def _ns(units, code, offset):
    """pcapng timestamp ``units`` at resolution ``code`` (if_tsresol) to ns, plus seconds."""
    if code & 0x80:
        n = code & 0x7F
        if n > 30:              # finer than a nanosecond: drop the bits below 2**-30 s
            units, n = units >> (n - 30), 30
        ns = (units >> n) * 1_000_000_000 + (((units & ((1 << n) - 1)) * 1_000_000_000) >> n)
    elif code <= 9:
        ns = units * 10 ** (9 - code)
    else:
        ns = units // 10 ** (code - 9) if code <= 28 else 0
    return _signed64(ns + offset * 1_000_000_000)


def _packet(buf, p, caplen, link):
    """(key, seq, flags, payload start, payload length) of a TCP segment, or a counter index.

    The counter index says why the packet is not one: 2 not IPv4/IPv6 TCP, 3 an IP
    fragment, 4 headers cut short by the capture.
    """
    end = p + caplen
    got = _link_layer(buf, p, end, link)
    if isinstance(got, int):
        return got
    ethertype, p = got
    key = bytearray(_KEY)
    if ethertype == PK.ETHERTYPE_IPV4:
        got = _ipv4(buf, p, end, key)
    elif ethertype == PK.ETHERTYPE_IPV6:
        got = _ipv6(buf, p, end, key)
    else:
        return 2
    if isinstance(got, int):
        return got
    p, ip_end = got
    return _tcp(buf, p, end, ip_end, key)


def _link_layer(buf, p, end, link):
    """(ethertype, where the IP header starts) of the packet ``buf[p:end]``, past its link
    header and VLAN tags; or the counter index."""
    caplen = end - p
    if link == PK.LinkType.ETHERNET:
        if caplen < 14:
            return 4
        ethertype, p = _BE16.unpack_from(buf, p + 12)[0], p + 14
    elif link == PK.LinkType.LINUX_SLL:
        if caplen < 16:
            return 4
        ethertype, p = _BE16.unpack_from(buf, p + 14)[0], p + 16
    elif link == PK.LinkType.LINUX_SLL2:
        if caplen < 20:
            return 4
        ethertype, p = _BE16.unpack_from(buf, p)[0], p + 20
    elif link in (PK.LinkType.NULL, PK.LinkType.LOOP):
        if caplen < 4:
            return 4
        family = _BE32.unpack_from(buf, p)[0] if link == PK.LinkType.LOOP else \
            min(_BE32.unpack_from(buf, p)[0], _LE32.unpack_from(buf, p)[0])
        p += 4
        if family == PK.AF_INET:
            ethertype = PK.ETHERTYPE_IPV4
        elif family in PK.AF_INET6:
            ethertype = PK.ETHERTYPE_IPV6
        else:
            return 2
    elif link in (PK.LinkType.RAW, PK.LinkType.IPV4, PK.LinkType.IPV6):
        if caplen < 1:
            return 4
        version = buf[p] >> 4
        ethertype = PK.ETHERTYPE_IPV4 if version == 4 else \
            PK.ETHERTYPE_IPV6 if version == 6 else 0
    else:
        return 2
    while ethertype in PK.ETHERTYPE_VLAN:
        if end - p < 4:
            return 4
        ethertype, p = _BE16.unpack_from(buf, p + 2)[0], p + 4
    return ethertype, p


def _ipv4(buf, p, end, key):
    """(where the TCP header starts, where the IP packet ends) of the IPv4 header at ``p``
    of a TCP segment, its addresses put in ``key``; or the counter index."""
    if end - p < 20:
        return 4
    if buf[p] >> 4 != 4:
        return 2
    ihl = (buf[p] & 0x0F) * 4
    total = _BE16.unpack_from(buf, p + 2)[0]
    if ihl < 20 or total < ihl:
        return 2
    if _BE16.unpack_from(buf, p + 6)[0] & 0x3FFF:
        return 3
    if buf[p + 9] != PK.IPPROTO_TCP:
        return 2
    key[0:4] = buf[p + 12:p + 16]
    key[16:20] = buf[p + 16:p + 20]
    key[36] = 4
    return p + ihl, p + total


def _ipv6(buf, p, end, key):
    """The IPv6 header at ``p`` of a TCP segment, and its extension headers: as ``_ipv4``."""
    if end - p < 40:
        return 4
    if buf[p] >> 4 != 6:
        return 2
    payload = _BE16.unpack_from(buf, p + 4)[0]
    nxt = buf[p + 6]
    key[0:16] = buf[p + 8:p + 24]
    key[16:32] = buf[p + 24:p + 40]
    key[36] = 6
    ip_end = p + 40 + payload
    p += 40
    while nxt != PK.IPPROTO_TCP:
        if nxt == PK.IPV6_FRAGMENT:
            return 3
        if nxt not in PK.IPV6_EXTENSIONS and nxt != PK.IPV6_AUTH:
            return 2
        if end - p < 8:
            return 4
        size = (buf[p + 1] + 2) * 4 if nxt == PK.IPV6_AUTH else (buf[p + 1] + 1) * 8
        nxt = buf[p]
        p += size
        if p > ip_end:
            return 2
    return p, ip_end


def _tcp(buf, p, end, ip_end, key):
    """The segment whose TCP header is at ``p``, its port put in ``key``: as ``_packet``."""
    if end - p < 20:
        return 4
    offset = (buf[p + 12] >> 4) * 4
    if offset < 20 or p + offset > ip_end:
        return 2
    key[32:36] = buf[p:p + 4]
    seq = _BE32.unpack_from(buf, p + 4)[0]
    flags = buf[p + 13]
    start = p + offset
    if end - p < offset:
        return 4
    return bytes(key), seq, flags, start, max(0, min(ip_end, end) - start)


def _pcap_record(buf, pos, u32, if_link, if_tsres):
    """The pcap record at ``pos``: (data, caplen, link, stamp, next record) of its packet,
    or (status, detail) where the walk stops."""
    if len(buf) - pos < PK.PCAP_RECORD_SIZE:
        return int(_S.END), 0
    sec, sub, caplen = u32.unpack_from(buf, pos)[0], u32.unpack_from(buf, pos + 4)[0], \
        u32.unpack_from(buf, pos + 8)[0]
    if caplen > PK.MAX_CAPTURE_RECORD:
        return int(_S.BAD), int(_CP.RECORD_TOO_LARGE)
    if len(buf) - pos - PK.PCAP_RECORD_SIZE < caplen:
        return int(_S.END), 0
    stamp = sec * 1_000_000_000 + sub * (1000 if if_tsres[0] == 6 else 1)
    data = pos + PK.PCAP_RECORD_SIZE
    return data, caplen, int(if_link[0]), stamp, data + caplen


def _pcapng_block(buf, pos, u32, u16, if_link, if_tsres, if_tsoff):
    """The pcapng block at ``pos``: as ``_pcap_record``, or where the next block starts
    when this one holds no packet."""
    if len(buf) - pos < 12:
        return int(_S.END), 0
    btype, blen = u32.unpack_from(buf, pos)[0], u32.unpack_from(buf, pos + 4)[0]
    if btype in (PK.PCAPNG_SECTION, PK.PCAPNG_INTERFACE):
        return int(_S.BLOCK), 0
    if blen < 12 or blen % 4:
        return int(_S.BAD), int(_CP.BLOCK_LENGTH)
    if blen > PK.MAX_CAPTURE_RECORD:
        return int(_S.BAD), int(_CP.RECORD_TOO_LARGE)
    if len(buf) - pos < blen:
        return int(_S.END), 0
    if u32.unpack_from(buf, pos + blen - 4)[0] != blen:
        return int(_S.BAD), int(_CP.BLOCK_TRAILER)
    if btype in (PK.PCAPNG_ENHANCED_PACKET, PK.PCAPNG_PACKET):
        if blen < 32:
            return int(_S.SKIP), int(_CP.BLOCK_LENGTH)
        if btype == PK.PCAPNG_ENHANCED_PACKET:
            iface = u32.unpack_from(buf, pos + 8)[0]
        else:
            iface = u16.unpack_from(buf, pos + 8)[0]
        if iface >= len(if_link):
            return int(_S.SKIP), int(_CP.UNKNOWN_INTERFACE)
        units = (u32.unpack_from(buf, pos + 12)[0] << 32) | u32.unpack_from(buf, pos + 16)[0]
        caplen = u32.unpack_from(buf, pos + 20)[0]
        if caplen > blen - 32:
            return int(_S.SKIP), int(_CP.BLOCK_LENGTH)
        stamp = _ns(units, int(if_tsres[iface]), int(if_tsoff[iface]))
        return pos + 28, caplen, int(if_link[iface]), stamp, pos + blen
    if btype == PK.PCAPNG_SIMPLE_PACKET:
        if blen < 16 or not len(if_link):
            return int(_S.SKIP), int(_CP.UNKNOWN_INTERFACE if blen >= 16 else _CP.BLOCK_LENGTH)
        caplen = min(u32.unpack_from(buf, pos + 8)[0], blen - 16)
        return pos + 12, caplen, int(if_link[0]), 0, pos + blen
    return pos + blen              # statistics, name resolution, custom blocks...


def walk(buf, pos, fmt, big, if_link, if_tsres, if_tsoff, ts, keys, seqs, flags, starts,
         lengths, counters):
    """Walk capture records from ``pos``; returns ``(rows, pos, status, detail)``.

    ``fmt`` 0 is pcap (records after the file header; ``if_tsres[0]`` is 6 for
    microsecond and 9 for nanosecond timestamps), 1 is pcapng (blocks after a section
    header; SHB and IDB stop the walk with ``WalkStatus.BLOCK``). ``big``: the byte order
    of the file or section. ``if_link``/``if_tsres``/``if_tsoff``: per interface link
    type, if_tsresol code and if_tsoffset seconds. Rows go to ``ts`` (int64 ns), ``keys``
    (uint8, rows x 40), ``seqs`` (uint32), ``flags`` (uint8), ``starts`` (int64) and
    ``lengths`` (int32); ``counters`` (int64, ``WALK_COUNTERS``) is added to. ``pos`` on
    return is where the walk stopped: an incomplete record, a block for the caller, a
    malformed record (``WalkStatus.BAD``: the walk cannot go on; ``WalkStatus.SKIP``: a
    pcapng block whose length and trailer are sound, so that the walk can go on after it;
    ``detail`` is its ``CaptureProblem``) or the end.
    """
    buf = memoryview(buf).cast("B")
    cap, n = len(ts), 0
    u32 = struct.Struct(">I" if big else "<I")
    u16 = struct.Struct(">H" if big else "<H")
    while True:
        if n == cap:
            return n, pos, int(_S.FULL), 0
        if fmt == 0:
            got = _pcap_record(buf, pos, u32, if_link, if_tsres)
        else:
            got = _pcapng_block(buf, pos, u32, u16, if_link, if_tsres, if_tsoff)
        if isinstance(got, int):       # a block without a packet
            pos = got
            continue
        if len(got) == 2:
            return n, pos, *got
        data, caplen, link, stamp, pos = got
        counters[0] += 1
        got = _packet(buf, data, caplen, link)
        if isinstance(got, int):
            counters[got] += 1
            continue
        key, seq, flag, start, length = got
        counters[1] += 1
        ts[n] = stamp
        keys[n] = np.frombuffer(key, np.uint8)
        seqs[n], flags[n], starts[n], lengths[n] = seq, flag, start, length
        n += 1
