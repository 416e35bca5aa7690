"""Cython packet walker: capture records to one row per TCP segment, without the GIL.

Reads pcap records or pcapng blocks, decodes the link layer (Ethernet with VLAN tags,
Linux cooked SLL/SLL2, raw IP, loopback), IPv4/IPv6 and TCP, and writes numpy columns.
The numbers come from ``packets`` at import; ``pypcap`` is the pure-Python twin, with the
same names and signatures, the same steps as separate functions, and the contract of
``walk`` in its docstring.
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from .. import packets as PK
from .wire cimport be16, be32, le16, le32

cdef int S_END, S_FULL, S_BLOCK, S_BAD, S_SKIP
cdef int RECORD_TOO_LARGE, BLOCK_LENGTH, BLOCK_TRAILER, UNKNOWN_INTERFACE
cdef int L_NULL, L_ETHERNET, L_RAW, L_LOOP, L_SLL, L_IPV4, L_IPV6, L_SLL2
cdef uint32_t SHB, IDB, PB, SPB, EPB
cdef int ET_IPV4, ET_IPV6, AF_INET, TCP, FRAGMENT, AUTH
cdef uint8_t is_vlan[65536]
cdef uint8_t is_inet6[256]
cdef uint8_t is_ext6[256]
cdef Py_ssize_t RECORD, MAX_RECORD, KEY
cdef uint64_t POW10[20]


def _load():
    global S_END, S_FULL, S_BLOCK, S_BAD, S_SKIP
    global RECORD_TOO_LARGE, BLOCK_LENGTH, BLOCK_TRAILER, UNKNOWN_INTERFACE
    global L_NULL, L_ETHERNET, L_RAW, L_LOOP, L_SLL, L_IPV4, L_IPV6, L_SLL2
    global SHB, IDB, PB, SPB, EPB, ET_IPV4, ET_IPV6, AF_INET, TCP, FRAGMENT, AUTH
    global RECORD, MAX_RECORD, KEY
    cdef int i
    S_END, S_FULL, S_BLOCK, S_BAD, S_SKIP = PK.WalkStatus.END, PK.WalkStatus.FULL, \
        PK.WalkStatus.BLOCK, PK.WalkStatus.BAD, PK.WalkStatus.SKIP
    cp = PK.CaptureProblem
    RECORD_TOO_LARGE, BLOCK_LENGTH = cp.RECORD_TOO_LARGE, cp.BLOCK_LENGTH
    BLOCK_TRAILER, UNKNOWN_INTERFACE = cp.BLOCK_TRAILER, cp.UNKNOWN_INTERFACE
    lt = PK.LinkType
    L_NULL, L_ETHERNET, L_RAW, L_LOOP = lt.NULL, lt.ETHERNET, lt.RAW, lt.LOOP
    L_SLL, L_IPV4, L_IPV6, L_SLL2 = lt.LINUX_SLL, lt.IPV4, lt.IPV6, lt.LINUX_SLL2
    SHB, IDB, PB = PK.PCAPNG_SECTION, PK.PCAPNG_INTERFACE, PK.PCAPNG_PACKET
    SPB, EPB = PK.PCAPNG_SIMPLE_PACKET, PK.PCAPNG_ENHANCED_PACKET
    ET_IPV4, ET_IPV6, AF_INET = PK.ETHERTYPE_IPV4, PK.ETHERTYPE_IPV6, PK.AF_INET
    TCP, FRAGMENT, AUTH = PK.IPPROTO_TCP, PK.IPV6_FRAGMENT, PK.IPV6_AUTH
    RECORD, MAX_RECORD, KEY = PK.PCAP_RECORD_SIZE, PK.MAX_CAPTURE_RECORD, PK.CONNECTION_KEY_SIZE
    memset(is_vlan, 0, sizeof(is_vlan))
    memset(is_inet6, 0, sizeof(is_inet6))
    memset(is_ext6, 0, sizeof(is_ext6))
    for i in PK.ETHERTYPE_VLAN:
        is_vlan[i] = 1
    for i in PK.AF_INET6:
        is_inet6[i] = 1
    for i in PK.IPV6_EXTENSIONS:
        is_ext6[i] = 1
    POW10[0] = 1
    for i in range(1, 20):
        POW10[i] = POW10[i - 1] * 10


_load()


cdef inline int64_t ns_of(uint64_t units, int code, int64_t offset) noexcept nogil:
    """pcapng timestamp ``units`` at resolution ``code`` (if_tsresol) to ns, plus seconds."""
    cdef uint64_t ns
    cdef int n
    if code & 0x80:
        n = code & 0x7F
        if n > 30:              # finer than a nanosecond: drop the bits below 2**-30 s
            units = units >> (n - 30) if n - 30 < 64 else 0
            n = 30
        ns = (units >> n) * <uint64_t>1000000000 + \
            (((units & ((<uint64_t>1 << n) - 1)) * <uint64_t>1000000000) >> n)
    elif code <= 9:
        ns = units * POW10[9 - code]
    elif code <= 28:
        ns = units // POW10[code - 9]
    else:
        ns = 0
    return <int64_t>(ns + <uint64_t>offset * <uint64_t>1000000000)


# long: split into the twin's steps (_link_layer, _ipv4...) the walk runs slower
cdef int packet(const uint8_t* b, Py_ssize_t p, Py_ssize_t caplen, int link, uint8_t* key,
                uint32_t* seq, uint8_t* flags, Py_ssize_t* start,
                Py_ssize_t* length) noexcept nogil:
    """Decode one captured packet: the link layer, IPv4 or IPv6, TCP; 1 for a TCP segment,
    else the counter index (see ``pypcap._packet``)."""
    cdef Py_ssize_t end = p + caplen, ip_end, ihl, total, size, offset, lo
    cdef uint32_t family, a, c
    cdef int ethertype, nxt
    if link == L_ETHERNET:
        if caplen < 14:
            return 4
        ethertype = be16(b + p + 12)
        p += 14
    elif link == L_SLL:
        if caplen < 16:
            return 4
        ethertype = be16(b + p + 14)
        p += 16
    elif link == L_SLL2:
        if caplen < 20:
            return 4
        ethertype = be16(b + p)
        p += 20
    elif link == L_NULL or link == L_LOOP:
        if caplen < 4:
            return 4
        family = be32(b + p)
        if link == L_NULL:
            c = le32(b + p)
            if c < family:
                family = c
        p += 4
        if family == <uint32_t>AF_INET:
            ethertype = ET_IPV4
        elif family < 256 and is_inet6[family]:
            ethertype = ET_IPV6
        else:
            return 2
    elif link == L_RAW or link == L_IPV4 or link == L_IPV6:
        if caplen < 1:
            return 4
        if b[p] >> 4 == 4:
            ethertype = ET_IPV4
        elif b[p] >> 4 == 6:
            ethertype = ET_IPV6
        else:
            ethertype = 0
    else:
        return 2
    while is_vlan[ethertype]:
        if end - p < 4:
            return 4
        ethertype = be16(b + p + 2)
        p += 4
    memset(key, 0, KEY)
    if ethertype == ET_IPV4:
        if end - p < 20:
            return 4
        if b[p] >> 4 != 4:
            return 2
        ihl = (b[p] & 0x0F) * 4
        total = be16(b + p + 2)
        if ihl < 20 or total < ihl:
            return 2
        if be16(b + p + 6) & 0x3FFF:
            return 3
        if b[p + 9] != TCP:
            return 2
        memcpy(key, b + p + 12, 4)
        memcpy(key + 16, b + p + 16, 4)
        key[36] = 4
        ip_end = p + total
        p += ihl
    elif ethertype == ET_IPV6:
        if end - p < 40:
            return 4
        if b[p] >> 4 != 6:
            return 2
        ip_end = p + 40 + be16(b + p + 4)
        nxt = b[p + 6]
        memcpy(key, b + p + 8, 32)
        key[36] = 6
        p += 40
        while nxt != TCP:
            if nxt == FRAGMENT:
                return 3
            if not is_ext6[nxt] and nxt != AUTH:
                return 2
            if end - p < 8:
                return 4
            size = (b[p + 1] + 2) * 4 if nxt == AUTH else (b[p + 1] + 1) * 8
            nxt = b[p]
            p += size
            if p > ip_end:
                return 2
    else:
        return 2
    if end - p < 20:
        return 4
    offset = (b[p + 12] >> 4) * 4
    if offset < 20 or p + offset > ip_end:
        return 2
    memcpy(key + 32, b + p, 4)
    seq[0] = be32(b + p + 4)
    flags[0] = b[p + 13]
    if end - p < offset:
        return 4
    start[0] = p + offset
    lo = ip_end if ip_end < end else end
    length[0] = lo - start[0] if lo > start[0] else 0
    return 1


cdef inline uint32_t ld32(const uint8_t* p, bint big) noexcept nogil:
    return be32(p) if big else le32(p)


# long: with the twin's record steps split out, its loop runs more instructions
def walk(const uint8_t[::1] buf, Py_ssize_t pos, int fmt, bint big, const int32_t[::1] if_link,
         const uint8_t[::1] if_tsres, const int64_t[::1] if_tsoff, int64_t[::1] ts,
         uint8_t[:, ::1] keys, uint32_t[::1] seqs, uint8_t[::1] flags, int64_t[::1] starts,
         int32_t[::1] lengths, int64_t[::1] counters):
    """Walk capture records from ``pos``; returns ``(rows, pos, status, detail)``.

    See ``pypcap.walk`` for the contract.
    """
    cdef Py_ssize_t end = buf.shape[0], cap = ts.shape[0], n = 0, nxt, data, start, length
    cdef Py_ssize_t n_if = if_link.shape[0]
    cdef uint32_t btype, blen, caplen, iface, seq
    cdef uint64_t units
    cdef int64_t stamp
    cdef int link, got, status = S_END, detail = 0
    cdef uint8_t flag
    cdef const uint8_t* b = &buf[0] if end else NULL
    if not 0 <= pos <= end:
        raise ValueError(f"walk: position {pos} outside the buffer")
    if keys.shape[0] != cap or keys.shape[1] != KEY or seqs.shape[0] != cap or \
            flags.shape[0] != cap or starts.shape[0] != cap or lengths.shape[0] != cap or \
            counters.shape[0] < 5 or if_tsres.shape[0] != n_if or if_tsoff.shape[0] != n_if:
        raise ValueError("walk: column sizes do not match")
    if fmt == 0 and n_if < 1:
        raise ValueError("walk: a pcap file needs its link type")
    with nogil:
        while True:
            if n == cap:
                status = S_FULL
                break
            if fmt == 0:
                if end - pos < RECORD:
                    break
                caplen = ld32(b + pos + 8, big)
                if caplen > MAX_RECORD:
                    status, detail = S_BAD, RECORD_TOO_LARGE
                    break
                if end - pos - RECORD < caplen:
                    break
                stamp = <int64_t>ld32(b + pos, big) * 1000000000 + \
                    <int64_t>ld32(b + pos + 4, big) * (1000 if if_tsres[0] == 6 else 1)
                data, link = pos + RECORD, if_link[0]
                nxt = data + caplen
            else:
                if end - pos < 12:
                    break
                btype, blen = ld32(b + pos, big), ld32(b + pos + 4, big)
                if btype == SHB or btype == IDB:
                    status = S_BLOCK
                    break
                if blen < 12 or blen % 4:
                    status, detail = S_BAD, BLOCK_LENGTH
                    break
                if blen > MAX_RECORD:
                    status, detail = S_BAD, RECORD_TOO_LARGE
                    break
                if end - pos < blen:
                    break
                if ld32(b + pos + blen - 4, big) != blen:
                    status, detail = S_BAD, BLOCK_TRAILER
                    break
                nxt = pos + blen
                if btype == EPB or btype == PB:
                    if blen < 32:
                        status, detail = S_SKIP, BLOCK_LENGTH
                        break
                    if btype == EPB:
                        iface = ld32(b + pos + 8, big)
                    else:
                        iface = be16(b + pos + 8) if big else le16(b + pos + 8)
                    if iface >= n_if:
                        status, detail = S_SKIP, UNKNOWN_INTERFACE
                        break
                    units = (<uint64_t>ld32(b + pos + 12, big) << 32) | ld32(b + pos + 16, big)
                    caplen = ld32(b + pos + 20, big)
                    if caplen > blen - 32:
                        status, detail = S_SKIP, BLOCK_LENGTH
                        break
                    stamp = ns_of(units, if_tsres[iface], if_tsoff[iface])
                    data, link = pos + 28, if_link[iface]
                elif btype == SPB:
                    if blen < 16 or n_if == 0:
                        status, detail = S_SKIP, (UNKNOWN_INTERFACE if blen >= 16 else BLOCK_LENGTH)
                        break
                    caplen = ld32(b + pos + 8, big)
                    if caplen > blen - 16:
                        caplen = blen - 16
                    stamp, data, link = 0, pos + 12, if_link[0]
                else:
                    pos = nxt
                    continue
            counters[0] += 1
            got = packet(b, data, caplen, link, &keys[n, 0], &seq, &flag, &start, &length)
            pos = nxt
            if got != 1:
                counters[got] += 1
                continue
            counters[1] += 1
            ts[n] = stamp
            seqs[n], flags[n], starts[n], lengths[n] = seq, flag, start, <int32_t>length
            n += 1
    return n, pos, status, detail
