# Frame checks: one frame header validated into a Frame (framing extras, collection prefix,
# snapshot marker), and the skip mode's way back to a trustworthy frame after damage
# (structural problems, plausible_after, resync) with the damaged regions it records.

cdef struct Frame:       # 32 bytes: a block of them stays in the first-level cache
    size_t pos
    uint32_t body        # body length
    uint32_t value_len
    uint32_t cid
    uint16_t keylen      # wire key length, prefix included
    uint16_t sid
    uint8_t kind
    uint8_t fel
    uint8_t extlen
    uint8_t prefix       # bytes of LEB128 collection prefix
    uint32_t server_us   # a response's server duration (frame info 0), decoded


cdef struct Problem:     # details of a problem code, worded by errors.describe
    int64_t a
    int64_t b


cdef inline int problem(Problem* e, int code, int64_t a, int64_t b) noexcept nogil:
    e.a = a
    e.b = b
    return code


cdef inline size_t length(const Frame* f) noexcept nogil:
    return <size_t>24 + f.body


cdef struct Region:
    size_t start
    size_t end
    int code
    int64_t a
    int64_t b


cdef struct Walk:
    const uint8_t* buf
    size_t end
    bint collections
    bint skip
    bint final
    uint64_t max_frame
    uint64_t base        # stream position of buf[0]
    size_t limit         # most frames to take
    size_t start         # where the walk began
    size_t stop          # no frame is taken from here on
    bint unverified      # the frame at start (or at pos, when stopped) awaits resync checks
    bint stalled         # resync needs bytes beyond this chunk to decide
    size_t cap           # room in the output columns (rows, counted from row 0)
    size_t first         # the output row of the walk's first frame
    # progress
    size_t count         # the next output row: first + the frames taken
    size_t pos
    Region* regions
    size_t n_regions
    size_t cap_regions
    int fail_code
    size_t fail_pos
    int64_t fail_a
    int64_t fail_b
    # output
    char** cols
    uint8_t* kinds
    uint8_t* views[2]    # binary-view structs of the keys and the values, or NULL
    int window_bits      # the views' data buffers: windows of the input this long ...
    bint view_too_long   # ... which a value did not fit in


cdef int marker(const uint8_t* h, const Frame* f, Problem* e) noexcept nogil:
    """The snapshot marker V2.x kind for its version byte, value length and Disk flag, or
    a problem. The whole frame is in the buffer."""
    cdef uint8_t version = h[24 + f.fel]
    cdef uint8_t disk = 0
    cdef int j
    if f.value_len > MARKER_FLAGS_BYTE:
        disk = (h[24 + f.fel + f.extlen + f.keylen + MARKER_FLAGS_BYTE] & SNAP_DISK) != 0
    for j in range(n_marker):
        if marker_version[j] == version and marker_len[j] == f.value_len \
                and marker_disk[j] == disk:
            return marker_kind[j]
    return -problem(e, MARKER_VERSION, version, f.value_len)


cdef int framing(const uint8_t* h, int cls, Frame* f, Problem* e) noexcept nogil:
    """Walk the framing extras: OK with ``f.sid`` (a request's stream id) and
    ``f.server_us`` (a response's server duration, as kv_engine decodes it) set, or a
    problem code."""
    cdef const uint8_t* p = h + 24
    cdef const uint8_t* stop = p + f.fel
    cdef const uint8_t* at
    cdef uint32_t fid, flen
    cdef uint8_t byte
    while p < stop:
        at = p
        byte = p[0]
        p += 1
        fid = byte >> 4
        flen = byte & 15
        if (fid == 15) + (flen == 15) > stop - p:   # escape bytes past the end
            return problem(e, FRAMING_EXTRAS, at - h - 24, f.fel)
        if fid == 15:
            fid = 15 + p[0]
            p += 1
        if flen == 15:
            flen = 15 + p[0]
            p += 1
        if flen > <size_t>(stop - p):
            return problem(e, FRAMING_EXTRAS, at - h - 24, f.fel)
        if fid == 2 and not cls:
            if flen != 2:
                return problem(e, STREAM_ID_LENGTH, flen, 0)
            f.sid = be16(p)
        elif fid == 0 and cls and flen == 2:
            f.server_us = <uint32_t>(pow(<double>be16(p), SERVER_DURATION_POWER) / 2)
        p += flen
    return OK


cdef int collection(const uint8_t* h, Frame* f, Problem* e) noexcept nogil:
    """Read the LEB128 collection-id prefix of the key: OK with ``f.cid`` and ``f.prefix``
    set, or a problem code."""
    cdef const uint8_t* p = h + 24 + f.fel + f.extlen
    cdef uint64_t cid = 0
    cdef uint8_t byte
    cdef int j
    for j in range(5):
        if j >= f.keylen:
            return problem(e, LEB128_NO_STOP, f.keylen, 0)
        byte = p[j]
        if j == 4 and 0x0F < byte < 0x80:
            return problem(e, LEB128_OVERFLOW, byte, 0)
        cid |= <uint64_t>(byte & 0x7F) << (7 * j)
        if not byte & 0x80:
            f.prefix = j + 1
            break
    else:
        return problem(e, LEB128_NO_STOP, 5, 0)
    if f.prefix > 1 and p[f.prefix - 1] == 0:
        return problem(e, LEB128_NON_CANONICAL, f.prefix, 0)
    if 1 <= cid <= 7:
        return problem(e, RESERVED_COLLECTION, <int64_t>cid, 0)
    if f.keylen <= f.prefix:
        return problem(e, EMPTY_LOGICAL_KEY, 0, 0)
    f.cid = <uint32_t>cid
    return OK


cdef inline int parse(const uint8_t* buf, size_t pos, size_t end, bint collections,
                      uint64_t max_frame, Frame* f, Problem* e) noexcept nogil:
    """Validate the frame at ``pos``: OK, INCOMPLETE, or a problem code (details in e).

    The common frame stays in this function; framing extras, multi-byte collection ids
    and snapshot markers go to the helpers above.
    """
    cdef const uint8_t* h = buf + pos
    cdef size_t avail = end - pos
    cdef int cls, kind, s
    cdef uint8_t magic, opcode, first
    cdef uint32_t body, need
    cdef uint64_t size
    if avail < 24:
        if avail and magic_class[h[0]] < 0:
            return problem(e, BAD_MAGIC, h[0], 0)
        return problem(e, INCOMPLETE, 0, 0)
    magic = h[0]
    cls = magic_class[magic]
    if cls < 0:
        return problem(e, BAD_MAGIC, magic, 0)
    opcode = h[1]
    if magic_alt[magic]:
        f.fel = h[2]
        f.keylen = h[3]
    else:
        f.fel = 0
        f.keylen = be16(h + 2)
    f.extlen = h[4]
    body = be32(h + 8)
    size = <uint64_t>24 + body
    if size > max_frame:
        return problem(e, FRAME_TOO_LARGE, <int64_t>size, <int64_t>max_frame)
    need = <uint32_t>f.fel + f.extlen + f.keylen
    if need > body:
        return problem(e, LENGTHS, body, need)
    f.body = body
    f.value_len = body - need
    if h[5] > 7:
        return problem(e, DATATYPE, h[5], 0)
    kind = kind_of[cls][opcode][f.extlen]
    if kind < 0:
        if kind == BAD_EXTRAS:
            return problem(e, EXTRAS_LENGTH, opcode, f.extlen)
        if avail < size:
            return problem(e, INCOMPLETE, 0, 0)
        kind = marker(h, f, e)
        if kind < 0:
            return -kind
    elif avail < size:
        return problem(e, INCOMPLETE, 0, 0)
    # unsigned wrap-around: one comparison per range
    if <uint32_t>(f.keylen - kind_key_min[kind]) > kind_key_range[kind]:
        return problem(e, KEY_LENGTH, opcode, f.keylen)
    if f.value_len - kind_val_min[kind] > kind_val_range[kind]:
        return problem(e, VALUE_LENGTH, opcode, f.value_len)
    f.kind = kind
    f.sid = 0
    f.server_us = 0
    if f.fel:
        s = framing(h, cls, f, e)
        if s != OK:
            return s
    f.cid = 0
    f.prefix = 0
    if collections and kind_prefixed[kind]:
        # the usual case: a one-byte prefix (0, or 8 to 0x7F) before a non-empty key
        first = h[24 + f.fel + f.extlen] if f.keylen > 1 else 1
        if first == 0 or <uint8_t>(first - 8) < 0x78:
            f.cid = first
            f.prefix = 1
        else:
            return collection(h, f, e)
    return OK


cdef inline bint structural(int code) noexcept nogil:
    """Problems that leave the frame's length untrustworthy."""
    return (code == BAD_MAGIC or code == FRAME_TOO_LARGE or code == LENGTHS or code == TRUNCATED
            or code == RESYNC)


cdef enum:
    NO = 0
    YES = 1
    UNKNOWN = 2           # the bytes that decide are not in this chunk yet


cdef inline int plausible_after(Walk* w, size_t q) noexcept nogil:
    """Whether a frame ending at ``q`` is believable: a frame header that holds together
    (or the end of the data) follows; the next frame may itself be damaged or cut short,
    but a header cut short by the end of the data proves nothing."""
    cdef Frame g
    cdef Problem e
    cdef int s
    if q == w.end:
        return YES if w.final else UNKNOWN
    s = parse(w.buf, q, w.end, w.collections, w.max_frame, &g, &e)
    if s == INCOMPLETE and w.end - q < 24:
        return NO if w.final else UNKNOWN
    return NO if structural(s) else YES


cdef size_t resync(Walk* w, size_t p, int code, const Frame* f) noexcept nogil:
    """Where the next trustworthy frame starts after a bad frame at ``p``.

    When the bytes that decide lie beyond this chunk: ``p`` itself with ``w.stalled`` set
    (decide again with more data), or a frame start with ``w.unverified`` set (checked
    when the next chunk arrives).
    """
    cdef size_t q
    cdef Frame g
    cdef Problem e
    cdef int s, after
    if not structural(code) and length(f) > w.end - p and not w.final:
        w.stalled = True                 # a frame wrong from its header alone, cut short here
        return p
    if not structural(code) and length(f) <= w.end - p:
        after = plausible_after(w, p + length(f))
        if after == YES:
            return p + length(f)         # lengths were fine: drop just this frame
        if after == UNKNOWN:
            w.stalled = True
            return p
    for q in range(p + 1, w.end):
        if magic_class[w.buf[q]] < 0:
            continue
        s = parse(w.buf, q, w.end, w.collections, w.max_frame, &g, &e)
        if s == OK:
            if opcode_known[w.buf[q + 1]]:
                after = plausible_after(w, q + length(&g))
                if after != NO:
                    w.unverified = after == UNKNOWN
                    return q
        elif s == INCOMPLETE and not w.final:
            if w.end - q < 24 or opcode_known[w.buf[q + 1]]:
                w.unverified = True
                return q
    w.unverified = not w.final           # whatever the next chunk starts with is unproven
    return w.end


cdef int add_region(Walk* w, size_t start, size_t end, int code, int64_t a, int64_t b) noexcept nogil:
    cdef Region* grown
    if w.n_regions == w.cap_regions:
        w.cap_regions = 16 if w.cap_regions == 0 else 2 * w.cap_regions
        grown = <Region*>realloc(w.regions, w.cap_regions * sizeof(Region))
        if grown == NULL:
            return -1
        w.regions = grown
    w.regions[w.n_regions] = Region(start, end, code, a, b)
    w.n_regions += 1
    return 0
