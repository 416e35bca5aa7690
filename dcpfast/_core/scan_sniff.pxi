# Whether the keys carry collection prefixes, judged from the handshake and stream messages.

cdef bint sniff(const uint8_t* buf, size_t pos, size_t end) noexcept nogil:
    """Whether the frames from ``pos`` show collections: a successful HELLO response that
    lists the feature (else the HELLO request's list), or before a HELLO request an OPEN
    with the collections flag or a message only collection streams carry."""
    cdef size_t length, k, stop
    cdef const uint8_t* h
    cdef int hello_request = -1
    cdef bint response, has
    cdef uint32_t body, fel, keylen
    while end - pos >= 24:
        h = buf + pos
        if magic_class[h[0]] < 0:
            break
        body = be32(h + 8)
        length = <size_t>24 + body
        if length > end - pos:
            break
        response = magic_class[h[0]] == 1
        fel = h[2] if magic_alt[h[0]] else 0
        keylen = h[3] if magic_alt[h[0]] else be16(h + 2)
        if fel + h[4] + keylen > body:
            break
        if h[1] == OP_HELLO:
            has = False
            k = pos + 24 + fel + h[4] + keylen
            stop = pos + length
            while k + 2 <= stop:
                if be16(buf + k) == FEATURE_COLLECTIONS:
                    has = True
                k += 2
            if response:
                if be16(h + 6) == 0:
                    return has
            else:
                hello_request = has
        elif hello_request < 0 and not response:
            if h[1] == OP_OPEN and h[4] == 8:
                if be32(h + 24 + fel + 4) & OPEN_FLAG_COLLECTIONS:
                    return True
            elif h[1] == OP_SYSTEM_EVENT or h[1] == OP_SEQNO_ADVANCED:
                return True
        pos += length
    return hello_request == 1


def sniff_collections(const uint8_t[::1] buf, Py_ssize_t start):
    """Collections on or off, judged from the handshake and stream messages in ``buf``."""
    cdef bint found
    if start < 0 or start > buf.shape[0]:
        raise ValueError(f"start {start} outside the buffer of {buf.shape[0]} bytes")
    if buf.shape[0] == 0:
        return False
    with nogil:
        found = sniff(&buf[0], start, buf.shape[0])
    return found
