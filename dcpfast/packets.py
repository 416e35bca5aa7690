"""Packet-capture numbers: pcap/pcapng containers, link layers, IP and TCP.

Read by the packet walkers of ``_core`` and by ``capture``; DCP's own numbers are in
``protocol``.
"""

from __future__ import annotations

from enum import IntEnum

#: Classic pcap file magics as read little-endian: microsecond and nanosecond timestamps.
PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAP_HEADER_SIZE = 24
PCAP_RECORD_SIZE = 16
#: pcapng block types.
PCAPNG_SECTION = 0x0A0D0D0A
PCAPNG_INTERFACE = 0x00000001
PCAPNG_PACKET = 0x00000002             # obsolete Packet Block
PCAPNG_SIMPLE_PACKET = 0x00000003
PCAPNG_ENHANCED_PACKET = 0x00000006
PCAPNG_BYTE_ORDER = 0x1A2B3C4D
#: Interface Description Block options: timestamp resolution and offset.
PCAPNG_OPT_END = 0
PCAPNG_OPT_TSRESOL = 9
PCAPNG_OPT_TSOFFSET = 14


class LinkType(IntEnum):
    """LINKTYPE_ numbers of the link layers the capture reader decodes."""

    NULL = 0              # BSD loopback: 4-byte address family in the capturing host's order
    ETHERNET = 1
    RAW = 101             # bare IPv4 or IPv6
    LOOP = 108            # OpenBSD loopback: address family big-endian
    LINUX_SLL = 113
    IPV4 = 228
    IPV6 = 229
    LINUX_SLL2 = 276


ETHERTYPE_IPV4 = 0x0800
ETHERTYPE_IPV6 = 0x86DD
#: 802.1Q, 802.1ad and the old QinQ tag: 4 bytes each before the real ethertype.
ETHERTYPE_VLAN = frozenset({0x8100, 0x88A8, 0x9100})
#: Loopback address families for IPv4 and IPv6 (BSD, Linux, FreeBSD, macOS values).
AF_INET = 2
AF_INET6 = frozenset({10, 24, 28, 30})
IPPROTO_TCP = 6
#: IPv6 extension headers that may precede TCP (hop-by-hop, routing, destination
#: options; authentication header is measured differently); 44 is a fragment header.
IPV6_EXTENSIONS = frozenset({0, 43, 60})
IPV6_FRAGMENT = 44
IPV6_AUTH = 51
TCP_FIN, TCP_SYN, TCP_RST = 0x01, 0x02, 0x04
#: TCP sequence numbers are 32 bits and wrap around.
TCP_SEQ_MASK = 0xFFFFFFFF
#: The DCP port, and the TLS one whose traffic cannot be decoded.
DCP_PORT = 11210
DCP_TLS_PORT = 11207
#: Bytes of a connection-direction key written by the packet walkers: source address,
#: destination address (16 each; IPv4 in the first 4), source port, destination port
#: (big-endian), IP version, 3 zero bytes.
CONNECTION_KEY_SIZE = 40
#: Largest packet record accepted in a capture (pcap snap lengths reach 256 KiB).
MAX_CAPTURE_RECORD = 16 * 1024 * 1024


class WalkStatus(IntEnum):
    """Why a packet walker stopped."""

    END = 0           # the data ends, or the record at ``pos`` is incomplete
    FULL = 1          # the output columns are full
    BLOCK = 2         # a pcapng section or interface block at ``pos``: the caller reads it
    BAD = 3           # the record at ``pos`` is malformed (detail: a CaptureProblem)
    SKIP = 4          # the block at ``pos`` is malformed inside, its length and trailer
                      # sound: the walk can go on after it (detail: a CaptureProblem)


class CaptureProblem(IntEnum):
    RECORD_TOO_LARGE = 1
    BLOCK_LENGTH = 2
    BLOCK_TRAILER = 3
    UNKNOWN_INTERFACE = 4


#: Packet counters kept by the walkers, in this order.
WALK_COUNTERS = ("packets", "tcp_segments", "not_tcp", "ip_fragments", "cut_short")
