"""Cython scan core: walks concatenated DCP frames without the GIL into numpy columns.

The frame kinds, field layouts and column order come from ``protocol`` and ``schema``
at import time; this module holds only the loop. ``_scan_py`` is its pure-Python twin.
"""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdlib cimport free, realloc

import numpy as np
import pyarrow as pa

from . import protocol as P
from . import schema as S
from ._wire cimport DCP_LE64, DCP_PREFETCH, be16, be32, be64, le32, le64

DEF MAX_KINDS = 64
DEF MAX_FIELDS = 256
DEF MAX_COLUMNS = 64
DEF BLOCK = 256           # frames decoded before their columns are written
DEF FIRST_ROWS = 65536    # rows reserved before the scan has measured the frames
DEF PREFETCH_AHEAD = 1024 # bytes ahead of the frame being parsed

cdef enum:
    OK = 0
    INCOMPLETE = -1

# problem codes (protocol.Problem), copied in at import
cdef int BAD_MAGIC, FRAME_TOO_LARGE, LENGTHS, EXTRAS_LENGTH, FRAMING_EXTRAS, STREAM_ID_LENGTH
cdef int DATATYPE, KEY_LENGTH, VALUE_LENGTH, MARKER_VERSION, LEB128_NO_STOP
cdef int LEB128_NON_CANONICAL, LEB128_OVERFLOW, RESERVED_COLLECTION, EMPTY_LOGICAL_KEY, TRUNCATED
cdef int RESYNC

# magic: -1 illegal, 0 request, 1 response; alt magics carry framing extras
cdef int8_t magic_class[256]
cdef uint8_t magic_alt[256]
cdef uint8_t opcode_known[256]
# request extras rules: per opcode up to two (extras length, kind); 0 options = generic request
cdef uint8_t req_nopt[256]
cdef uint8_t req_ext[256][2]
cdef int16_t req_kind[256][2]
# response extras rules: 0 options = any extras length
cdef uint8_t resp_nopt[256]
cdef uint8_t resp_ext[256][2]
cdef int REQUEST_KIND, RESPONSE_KIND, MARKER_PENDING = -1
cdef int n_marker
cdef uint8_t marker_version[8]
cdef uint32_t marker_len[8]
cdef int marker_kind[8]
# per kind
cdef uint32_t kind_key_min[MAX_KINDS]
cdef uint32_t kind_key_max[MAX_KINDS]
cdef uint32_t kind_val_min[MAX_KINDS]
cdef uint32_t kind_val_max[MAX_KINDS]
cdef uint32_t kind_key_span[MAX_KINDS]      # max - min
cdef uint32_t kind_val_span[MAX_KINDS]
cdef uint8_t kind_prefixed[MAX_KINDS]
cdef uint8_t kind_response[MAX_KINDS]
cdef int kind_first[MAX_KINDS + 1]
cdef int field_col[MAX_FIELDS]
cdef uint8_t field_base[MAX_FIELDS]
cdef uint32_t field_off[MAX_FIELDS]
cdef uint8_t field_width[MAX_FIELDS]
cdef bint is_field_column[MAX_COLUMNS]
# column ids (schema order)
cdef int C_OFFSET, C_MAGIC, C_OPCODE, C_DATATYPE, C_VBUCKET, C_STATUS, C_OPAQUE, C_CAS
cdef int C_BODY_LEN, C_FRAMING_LEN, C_EXTRAS_LEN, C_KEY_OFFSET, C_KEY_LEN, C_VALUE_OFFSET
cdef int C_VALUE_LEN, C_COLLECTION_ID, C_STREAM_ID
cdef int n_columns, n_kinds
cdef int OP_HELLO, OP_OPEN, OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED
cdef uint32_t FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS


def _load_tables():
    global BAD_MAGIC, FRAME_TOO_LARGE, LENGTHS, EXTRAS_LENGTH, FRAMING_EXTRAS, STREAM_ID_LENGTH
    global DATATYPE, KEY_LENGTH, VALUE_LENGTH, MARKER_VERSION, LEB128_NO_STOP
    global LEB128_NON_CANONICAL, LEB128_OVERFLOW, RESERVED_COLLECTION, EMPTY_LOGICAL_KEY, TRUNCATED
    global RESYNC
    global REQUEST_KIND, RESPONSE_KIND, n_marker, n_columns, n_kinds
    global C_OFFSET, C_MAGIC, C_OPCODE, C_DATATYPE, C_VBUCKET, C_STATUS, C_OPAQUE, C_CAS
    global C_BODY_LEN, C_FRAMING_LEN, C_EXTRAS_LEN, C_KEY_OFFSET, C_KEY_LEN, C_VALUE_OFFSET
    global C_VALUE_LEN, C_COLLECTION_ID, C_STREAM_ID
    global OP_HELLO, OP_OPEN, OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED
    global FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS
    cdef int i, op, j, k
    pr = P.Problem
    BAD_MAGIC, FRAME_TOO_LARGE, LENGTHS = pr.BAD_MAGIC, pr.FRAME_TOO_LARGE, pr.LENGTHS
    EXTRAS_LENGTH, FRAMING_EXTRAS = pr.EXTRAS_LENGTH, pr.FRAMING_EXTRAS
    STREAM_ID_LENGTH, DATATYPE, KEY_LENGTH = pr.STREAM_ID_LENGTH, pr.DATATYPE, pr.KEY_LENGTH
    VALUE_LENGTH, MARKER_VERSION = pr.VALUE_LENGTH, pr.MARKER_VERSION
    LEB128_NO_STOP, LEB128_NON_CANONICAL = pr.LEB128_NO_STOP, pr.LEB128_NON_CANONICAL
    LEB128_OVERFLOW, RESERVED_COLLECTION = pr.LEB128_OVERFLOW, pr.RESERVED_COLLECTION
    EMPTY_LOGICAL_KEY, TRUNCATED, RESYNC = pr.EMPTY_LOGICAL_KEY, pr.TRUNCATED, pr.RESYNC

    for i in range(256):
        magic_class[i] = -1
        magic_alt[i] = i in P.ALT_MAGICS
        opcode_known[i] = i in P.KNOWN_OPCODES
        req_nopt[i] = 0
        resp_nopt[i] = 0
    for m in P.DCP_MAGICS:
        magic_class[m] = m in P.RESPONSE_MAGICS
    for op in range(256):
        rules = P.request_kinds(op)
        assert len(rules) <= 2
        for j, (ext, kind) in enumerate(sorted(rules.items())):
            req_ext[op][j] = ext
            req_kind[op][j] = kind
        req_nopt[op] = len(rules)
    for op, exts in P.RESPONSE_EXTRAS.items():
        for j, ext in enumerate(exts):
            resp_ext[op][j] = ext
        resp_nopt[op] = len(exts)
    REQUEST_KIND, RESPONSE_KIND = P.REQUEST_KIND, P.RESPONSE_KIND
    OP_HELLO, OP_OPEN = P.Opcode.HELLO, P.Opcode.OPEN
    OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED = P.Opcode.SYSTEM_EVENT, P.Opcode.SEQNO_ADVANCED
    FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS = P.FEATURE_COLLECTIONS, P.OPEN_FLAG_COLLECTIONS
    n_marker = len(P.MARKER_V2_KINDS)
    for j, ((version, length), kind) in enumerate(sorted(P.MARKER_V2_KINDS.items())):
        marker_version[j], marker_len[j], marker_kind[j] = version, length, kind

    assert len(P.KINDS) <= MAX_KINDS and len(S.NAMES) <= MAX_COLUMNS
    j = 0
    for k, kind in enumerate(P.KINDS):
        kind_key_min[k], kind_key_max[k] = kind.key
        kind_val_min[k], kind_val_max[k] = kind.value
        kind_key_span[k] = kind_key_max[k] - kind_key_min[k]
        kind_val_span[k] = kind_val_max[k] - kind_val_min[k]
        kind_prefixed[k] = kind.prefixed
        kind_response[k] = kind.response
        kind_first[k] = j
        for f in kind.fields:
            field_col[j] = S.INDEX[f.column]
            field_base[j] = f.base
            field_off[j] = f.offset
            field_width[j] = f.width
            j += 1
    kind_first[len(P.KINDS)] = j
    n_kinds = len(P.KINDS)
    assert j <= MAX_FIELDS
    for c, name in enumerate(S.NAMES):
        is_field_column[c] = any(f.column == name for kind in P.KINDS for f in kind.fields)

    ix = S.INDEX
    n_columns = len(S.NAMES)
    C_OFFSET, C_MAGIC, C_OPCODE = ix["offset"], ix["magic"], ix["opcode"]
    C_DATATYPE, C_VBUCKET, C_STATUS = ix["datatype"], ix["vbucket"], ix["status"]
    C_OPAQUE, C_CAS, C_BODY_LEN = ix["opaque"], ix["cas"], ix["body_len"]
    C_FRAMING_LEN, C_EXTRAS_LEN = ix["framing_len"], ix["extras_len"]
    C_KEY_OFFSET, C_KEY_LEN = ix["key_offset"], ix["key_len"]
    C_VALUE_OFFSET, C_VALUE_LEN = ix["value_offset"], ix["value_len"]
    C_COLLECTION_ID, C_STREAM_ID = ix["collection_id"], ix["stream_id"]


_load_tables()


cdef struct Frame:
    size_t pos
    size_t length        # 24 + body length
    int kind
    uint8_t fel
    uint8_t extlen
    uint16_t keylen      # wire key length, prefix included
    uint32_t value_len
    uint16_t sid
    uint32_t cid
    uint8_t prefix       # bytes of LEB128 collection prefix
    int64_t a            # problem details
    int64_t b


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
    bint unverified      # the frame at start (or at pos, when stopped) awaits resync checks
    bint stalled         # resync needs bytes beyond this chunk to decide
    size_t cap           # room in the output columns
    # progress
    size_t count
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


cdef int marker(const uint8_t* h, Frame* f) noexcept nogil:
    """The snapshot marker V2.x kind for its version byte and value length, or a problem."""
    cdef uint8_t version = h[24 + f.fel]
    cdef int j
    for j in range(n_marker):
        if marker_version[j] == version and marker_len[j] == f.value_len:
            return marker_kind[j]
    f.a = version
    f.b = f.value_len
    return -MARKER_VERSION


cdef int framing(const uint8_t* h, int cls, Frame* f) noexcept nogil:
    """Walk the framing extras: OK with ``f.sid`` set, or a problem code."""
    cdef const uint8_t* p = h + 24
    cdef const uint8_t* e = p + f.fel
    cdef const uint8_t* at
    cdef uint32_t fid, flen
    cdef uint8_t byte
    while p < e:
        at = p
        byte = p[0]
        p += 1
        fid = byte >> 4
        flen = byte & 15
        if (fid == 15) + (flen == 15) > e - p:      # escape bytes past the end
            f.a = at - h - 24
            f.b = f.fel
            return FRAMING_EXTRAS
        if fid == 15:
            fid = 15 + p[0]
            p += 1
        if flen == 15:
            flen = 15 + p[0]
            p += 1
        if flen > <size_t>(e - p):
            f.a = at - h - 24
            f.b = f.fel
            return FRAMING_EXTRAS
        if fid == 2 and not cls:
            if flen != 2:
                f.a = flen
                return STREAM_ID_LENGTH
            f.sid = be16(p)
        p += flen
    return OK


cdef int collection(const uint8_t* h, Frame* f) noexcept nogil:
    """Read the LEB128 collection-id prefix of the key: OK with ``f.cid`` and ``f.prefix``
    set, or a problem code."""
    cdef const uint8_t* p = h + 24 + f.fel + f.extlen
    cdef uint64_t cid = 0
    cdef uint8_t byte
    cdef int j
    for j in range(5):
        if j >= f.keylen:
            f.a = f.keylen
            return LEB128_NO_STOP
        byte = p[j]
        if j == 4 and 0x0F < byte < 0x80:
            f.a = byte
            return LEB128_OVERFLOW
        cid |= <uint64_t>(byte & 0x7F) << (7 * j)
        if not byte & 0x80:
            f.prefix = j + 1
            break
    else:
        f.a = 5
        return LEB128_NO_STOP
    if f.prefix > 1 and p[f.prefix - 1] == 0:
        f.a = f.prefix
        return LEB128_NON_CANONICAL
    if 1 <= cid <= 7:
        f.a = <int64_t>cid
        return RESERVED_COLLECTION
    if f.keylen <= f.prefix:
        return EMPTY_LOGICAL_KEY
    f.cid = <uint32_t>cid
    return OK


cdef inline int parse(const uint8_t* buf, size_t pos, size_t end, bint collections,
                      uint64_t max_frame, Frame* f) noexcept nogil:
    """Validate the frame at ``pos``: OK, INCOMPLETE, or a problem code (details in f).

    The common frame stays in this function; framing extras, multi-byte collection ids
    and snapshot markers go to the helpers above.
    """
    cdef const uint8_t* h = buf + pos
    cdef size_t avail = end - pos
    cdef int cls, kind
    cdef uint8_t magic, opcode, first
    cdef uint32_t body, need
    cdef uint64_t length
    f.a = 0
    f.b = 0
    if avail == 0:
        return INCOMPLETE
    magic = h[0]
    cls = magic_class[magic]
    if cls < 0:
        f.a = magic
        return BAD_MAGIC
    if avail < 24:
        return INCOMPLETE
    opcode = h[1]
    if magic_alt[magic]:
        f.fel = h[2]
        f.keylen = h[3]
    else:
        f.fel = 0
        f.keylen = be16(h + 2)
    f.extlen = h[4]
    body = be32(h + 8)
    length = <uint64_t>24 + body
    if length > max_frame:
        f.a = <int64_t>length
        f.b = <int64_t>max_frame
        return FRAME_TOO_LARGE
    need = <uint32_t>f.fel + f.extlen + f.keylen
    if need > body:
        f.a = body
        f.b = need
        return LENGTHS
    f.length = <size_t>length
    f.value_len = body - need
    if h[5] > 7:
        f.a = h[5]
        return DATATYPE
    if cls:
        kind = RESPONSE_KIND
        if resp_nopt[opcode]:
            if not (f.extlen == resp_ext[opcode][0]
                    or (resp_nopt[opcode] > 1 and f.extlen == resp_ext[opcode][1])):
                f.a = opcode
                f.b = f.extlen
                return EXTRAS_LENGTH
    elif req_nopt[opcode] == 0:
        kind = REQUEST_KIND
    else:
        if f.extlen == req_ext[opcode][0]:
            kind = req_kind[opcode][0]
        elif req_nopt[opcode] > 1 and f.extlen == req_ext[opcode][1]:
            kind = req_kind[opcode][1]
        else:
            f.a = opcode
            f.b = f.extlen
            return EXTRAS_LENGTH
    if avail < length:
        return INCOMPLETE
    if kind == MARKER_PENDING:
        kind = marker(h, f)
        if kind < 0:
            return -kind
    # unsigned wrap-around: one comparison per range
    if <uint32_t>(f.keylen - kind_key_min[kind]) > kind_key_span[kind]:
        f.a = opcode
        f.b = f.keylen
        return KEY_LENGTH
    if f.value_len - kind_val_min[kind] > kind_val_span[kind]:
        f.a = opcode
        f.b = f.value_len
        return VALUE_LENGTH
    f.kind = kind
    f.sid = 0
    if f.fel:
        cls = framing(h, cls, f)
        if cls != OK:
            return cls
    f.cid = 0
    f.prefix = 0
    if collections and kind_prefixed[kind]:
        first = h[24 + f.fel + f.extlen] if f.keylen else 0x80
        if first < 0x80 and f.keylen > 1 and not 1 <= first <= 7:
            f.cid = first                # one-byte prefix: the usual case
            f.prefix = 1
        else:
            return collection(h, f)
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
    cdef int s
    if q == w.end:
        return YES if w.final else UNKNOWN
    s = parse(w.buf, q, w.end, w.collections, w.max_frame, &g)
    if s == INCOMPLETE and w.end - q < 24:
        return NO if w.final else UNKNOWN
    return NO if structural(s) else YES


cdef size_t resync(Walk* w, size_t p, int code, Frame* f) noexcept nogil:
    """Where the next trustworthy frame starts after a bad frame at ``p``.

    When the bytes that decide lie beyond this chunk: ``p`` itself with ``w.stalled`` set
    (decide again with more data), or a frame start with ``w.unverified`` set (checked
    when the next chunk arrives).
    """
    cdef size_t q
    cdef Frame g
    cdef int s, after
    if not structural(code) and f.length > w.end - p and not w.final:
        w.stalled = True                 # a frame wrong from its header alone, cut short here
        return p
    if not structural(code) and f.length <= w.end - p:
        after = plausible_after(w, p + f.length)
        if after == YES:
            return p + f.length          # lengths were fine: drop just this frame
        if after == UNKNOWN:
            w.stalled = True
            return p
    for q in range(p + 1, w.end):
        if magic_class[w.buf[q]] < 0:
            continue
        s = parse(w.buf, q, w.end, w.collections, w.max_frame, &g)
        if s == OK:
            if opcode_known[w.buf[q + 1]]:
                after = plausible_after(w, q + g.length)
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


cdef inline void store(char* dst, size_t i, uint8_t width, const uint8_t* src) noexcept nogil:
    """Row ``i`` of a column of ``width`` bytes: the big-endian field at ``src``."""
    if width == 8:
        (<uint64_t*>dst)[i] = be64(src)
    elif width == 4:
        (<uint32_t*>dst)[i] = be32(src)
    elif width == 2:
        (<uint16_t*>dst)[i] = be16(src)
    else:
        (<uint8_t*>dst)[i] = src[0]


cdef struct Store:
    char* dst            # a requested field column
    uint32_t off         # field offset after the framing extras (and after extras and key)
    uint8_t base         # 1: the offset counts from the value
    uint8_t width


# the requested field columns of each kind, so the row loop never meets a column that
# was not asked for
cdef struct Plan:
    int first[MAX_KINDS + 1]
    Store stores[MAX_FIELDS]


cdef void make_plan(Plan* plan, char** cols) noexcept nogil:
    cdef int k, j, m = 0
    cdef char* dst
    for k in range(n_kinds):
        plan.first[k] = m
        for j in range(kind_first[k], kind_first[k + 1]):
            dst = cols[field_col[j]]
            if dst != NULL:
                plan.stores[m] = Store(dst, field_off[j], field_base[j], field_width[j])
                m += 1
    plan.first[n_kinds] = m


cdef void flush(Walk* w, const Plan* plan, const Frame* rows, size_t i0,
                size_t n) noexcept nogil:
    """Write ``n`` decoded frames as rows ``i0 ...`` of the requested columns.

    Column by column, so each output array is written in one sequential burst.
    """
    cdef size_t b
    cdef const uint8_t* buf = w.buf
    cdef const uint8_t* src
    cdef char* dst
    cdef int c, kind, at
    cdef uint64_t base = w.base
    cdef char** cols = w.cols
    cdef uint8_t* kinds = w.kinds
    cdef const Frame* f
    cdef const Store* st
    cdef int j
    # field columns start zeroed: write just what each kind carries
    for b in range(n):
        f = &rows[b]
        kind = f.kind
        kinds[i0 + b] = kind
        for j in range(plan.first[kind], plan.first[kind + 1]):
            st = &plan.stores[j]
            src = buf + f.pos + 24 + f.fel + st.off
            if st.base:
                src += f.extlen + f.keylen
            store(st.dst, i0 + b, st.width, src)
    for c in range(n_columns):
        dst = cols[c]
        if dst == NULL or is_field_column[c]:
            continue
        if c == C_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = base + rows[b].pos
        elif c == C_MAGIC or c == C_OPCODE or c == C_DATATYPE:
            at = 0 if c == C_MAGIC else (1 if c == C_OPCODE else 5)
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = buf[rows[b].pos + at]
        elif c == C_VBUCKET or c == C_STATUS:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = (
                    be16(buf + rows[b].pos + 6)
                    if kind_response[rows[b].kind] == (c == C_STATUS) else 0)
        elif c == C_OPAQUE:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = be32(buf + rows[b].pos + 12)
        elif c == C_CAS:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = be64(buf + rows[b].pos + 16)
        elif c == C_BODY_LEN:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = <uint32_t>(rows[b].length - 24)
        elif c == C_FRAMING_LEN:
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = rows[b].fel
        elif c == C_EXTRAS_LEN:
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = rows[b].extlen
        elif c == C_KEY_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = (
                    base + rows[b].pos + 24 + rows[b].fel + rows[b].extlen + rows[b].prefix
                    if kind_key_max[rows[b].kind] else 0)
        elif c == C_KEY_LEN:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = (
                    rows[b].keylen - rows[b].prefix if kind_key_max[rows[b].kind] else 0)
        elif c == C_VALUE_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = (
                    base + rows[b].pos + rows[b].length - rows[b].value_len
                    if kind_val_max[rows[b].kind] else 0)
        elif c == C_VALUE_LEN:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = (
                    rows[b].value_len if kind_val_max[rows[b].kind] else 0)
        elif c == C_COLLECTION_ID:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = rows[b].cid
        elif c == C_STREAM_ID:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = rows[b].sid


cdef int walk(Walk* w) noexcept nogil:
    """Validate and emit frames from ``w.pos``; 1 when the columns are full, -1 out of memory."""
    cdef Frame rows[BLOCK]
    cdef Plan plan
    cdef size_t n = 0
    cdef Frame* f
    cdef int s, after, rc = 0
    cdef size_t q, pos = w.pos, count = w.count
    cdef size_t stop = min(w.limit, w.cap)
    cdef const uint8_t* buf = w.buf
    cdef size_t end = w.end
    make_plan(&plan, w.cols)
    while count < stop:
        f = &rows[n]
        if end - pos > PREFETCH_AHEAD:
            DCP_PREFETCH(buf + pos + PREFETCH_AHEAD)
        s = parse(buf, pos, end, w.collections, w.max_frame, f)
        if w.unverified and pos == w.start and s != INCOMPLETE:
            # still resynchronising: only a frame start that resync would accept will do
            if s != OK or not opcode_known[buf[pos + 1]]:
                s = RESYNC
            else:
                after = plausible_after(w, pos + f.length)
                if after == UNKNOWN:
                    break
                if after == NO:
                    s = RESYNC
        if s == OK:
            w.unverified = False
            f.pos = pos
            pos += f.length
            count += 1
            n += 1
            if n == BLOCK:
                flush(w, &plan, rows, count - n, n)
                n = 0
            continue
        if s == INCOMPLETE:
            if not w.final or pos == end:
                break
            s = TRUNCATED
            f.a = end - pos
            f.b = f.length if (end - pos >= 24) else 24
        if not w.skip:
            w.fail_code = s
            w.fail_pos = pos
            w.fail_a = f.a
            w.fail_b = f.b
            break
        w.unverified = False
        q = resync(w, pos, s, f)
        if w.stalled:
            w.stalled = False
            break
        if add_region(w, pos, q, s, f.a, f.b) < 0:
            rc = -1
            break
        pos = q
        if w.unverified:                 # the next chunk decides whether a frame starts here
            break
    else:
        if count == w.cap and count < w.limit:
            rc = 1
    flush(w, &plan, rows, count - n, n)
    w.count = count
    w.pos = pos
    return rc


cdef size_t estimate_frames(const uint8_t* buf, size_t pos, size_t end) noexcept nogil:
    """Frames in ``buf[pos:end]`` judged by the mean length of its first frames, plus room."""
    cdef size_t seen = 0, start = pos, length
    while seen < 256 and end - pos >= 24 and magic_class[buf[pos]] >= 0:
        length = <size_t>24 + be32(buf + pos + 8)
        if length > end - pos:
            break
        pos += length
        seen += 1
    if seen == 0:
        return 64
    return (end - start) // ((pos - start) // seen) * 9 // 8 + 64


cdef object allocate(size_t rows, size_t width, bint zeroed):
    """Room for a column in pyarrow's memory pool, which hands freed memory to the next
    scan (fresh pages from the system cost a fault and a zeroing each). Header columns
    get a value in every row; field columns only where carried, so they start zeroed."""
    buf = pa.allocate_buffer(rows * width, resizable=True)
    if zeroed and rows:
        memset(<void*><size_t>buf.address, 0, rows * width)
    return buf


cdef object regrow(old, size_t count, size_t rows, size_t width, bint zeroed):
    """A larger column holding the first ``count`` rows of ``old`` (the rest zeroed for a
    field column)."""
    buf = allocate(rows, width, False)
    cdef char* at = <char*><size_t>buf.address
    if count:
        memcpy(at, <void*><size_t>old.address, count * width)
    if zeroed and rows > count:
        memset(at + count * width, 0, (rows - count) * width)
    return buf


cdef object finish(buf, size_t count, dtype):
    """The first ``count`` rows as a numpy array (the pool keeps the rest)."""
    buf.resize(count * dtype.itemsize, shrink_to_fit=True)
    return np.frombuffer(buf, dtype)


def scan_buffer(const uint8_t[::1] buf, Py_ssize_t start, tuple names, bint collections,
                bint skip, Py_ssize_t max_frames, uint64_t max_frame_size, uint64_t base,
                bint final, bint unverified=False):
    """Scan ``buf[start:]``; see ``_scan_py.scan_buffer`` for the contract."""
    cdef Walk w
    cdef char* cols[MAX_COLUMNS]
    cdef int rc, c
    cdef size_t upper, mean, row_bytes, rows
    if start < 0 or start > buf.shape[0]:
        raise ValueError(f"start {start} outside the buffer of {buf.shape[0]} bytes")
    w.buf = &buf[0] if buf.shape[0] else <const uint8_t*>""
    w.end = buf.shape[0]
    w.collections, w.skip, w.final, w.max_frame = collections, skip, final, max_frame_size
    w.base = base
    w.pos = w.start = start
    w.unverified = unverified
    w.stalled = False
    w.count = w.n_regions = w.cap_regions = 0
    w.regions = NULL
    w.fail_code = 0
    upper = (w.end - start) // 24 + 1          # no frame is shorter than its header
    w.limit = min(<size_t>max_frames, upper) if max_frames >= 0 else upper
    w.cap = min(w.limit, estimate_frames(w.buf, start, w.end))
    row_bytes = 1 + sum(S.DTYPES[name].itemsize for name in names)
    if w.cap * row_bytes > 2 * (w.end - start) + (16 << 20):
        w.cap = min(w.cap, FIRST_ROWS)      # the first frames are no guide: measure, then grow
    widths = [S.DTYPES[name].itemsize for name in names]
    zeroed = [is_field_column[S.INDEX[name]] for name in names]
    columns = [allocate(w.cap, widths[i], zeroed[i]) for i in range(len(names))]
    kinds = allocate(w.cap, 1, False)
    try:
        while True:
            for c in range(n_columns):
                cols[c] = NULL
            for i, name in enumerate(names):
                cols[S.INDEX[name]] = <char*><size_t>columns[i].address
            w.cols = cols
            w.kinds = <uint8_t*><size_t>kinds.address
            with nogil:
                rc = walk(&w)
            if rc < 0:
                raise MemoryError()
            if rc == 0:
                break
            # room for the rest at the mean frame length so far, with the rows written so
            # far copied over
            mean = max(24, (w.pos - w.start) // w.count)
            rows = (w.end - w.pos) // mean * 9 // 8 + 1024
            if rows * row_bytes > 2 * (w.end - w.pos) + (16 << 20):
                rows = w.count + 1024        # the mean is no guide either: double
            w.cap = min(w.limit, w.count + rows)
            columns = [regrow(columns[i], w.count, w.cap, widths[i], zeroed[i])
                       for i in range(len(names))]
            kinds = regrow(kinds, w.count, w.cap, 1, False)
        if w.fail_code:
            return None, (w.fail_pos, w.fail_code, w.fail_a, w.fail_b)
        arrays = {name: finish(columns[i], w.count, S.DTYPES[name])
                  for i, name in enumerate(names)}
        kinds = finish(kinds, w.count, np.dtype(np.uint8))
        regions = [(w.regions[r].start, w.regions[r].end - w.regions[r].start,
                    w.regions[r].code, w.regions[r].a, w.regions[r].b)
                   for r in range(w.n_regions)]
        return (w.count, w.pos, arrays, kinds, regions, bool(w.unverified)), None
    finally:
        free(w.regions)


cdef bint sniff(const uint8_t* buf, size_t pos, size_t end) noexcept nogil:
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

def gather(const uint8_t[::1] buf, const uint64_t[::1] starts, const int64_t[::1] bounds,
           uint8_t[::1] out):
    """Copy ``buf[starts[i]:starts[i] + bounds[i+1] - bounds[i]]`` to ``out[bounds[i]:]``."""
    cdef Py_ssize_t i, n = starts.shape[0]
    cdef int64_t size
    if bounds.shape[0] != n + 1 or bounds[0] < 0 or out.shape[0] < bounds[n]:
        raise ValueError("gather: bounds do not match")
    for i in range(n):
        size = bounds[i + 1] - bounds[i]
        if size < 0 or starts[i] > <uint64_t>buf.shape[0] or size > buf.shape[0] - <Py_ssize_t>starts[i]:
            raise ValueError(f"gather: range {i} outside the buffer")
    with nogil:
        for i in range(n):
            size = bounds[i + 1] - bounds[i]
            if size:
                memcpy(&out[bounds[i]], &buf[starts[i]], size)


cdef inline void put_view(uint8_t* v, const uint8_t* buf, size_t end, uint64_t start,
                          uint32_t size, int window_bits, uint64_t mask) noexcept nogil:
    """One 16-byte binary-view struct, written as two little-endian words: the length and
    up to 12 inline bytes (zero-padded), or the length, a 4-byte prefix, the data buffer
    index and the offset in it."""
    cdef uint64_t lo, hi
    cdef uint8_t tail[12]
    cdef const uint8_t* p = buf + start
    if size <= 12:
        if end - start < 12:              # too near the end to load 12 bytes at once
            memset(tail, 0, 12)
            memcpy(tail, p, size)
            p = tail
        lo = le64(p)
        hi = (lo >> 32) | (<uint64_t>le32(p + 8) << 32)
        lo = <uint64_t>size | (lo << 32)
        if size < 4:
            lo &= (<uint64_t>1 << (32 + 8 * size)) - 1
        if size <= 4:
            hi = 0
        else:
            hi &= <uint64_t>0xFFFFFFFFFFFFFFFF >> (8 * (12 - size))
    else:
        lo = <uint64_t>size | (<uint64_t>le32(p) << 32)
        hi = (start >> window_bits) | ((start & mask) << 32)
    lo = DCP_LE64(lo)
    hi = DCP_LE64(hi)
    memcpy(v, &lo, 8)
    memcpy(v + 8, &hi, 8)


def views(const uint8_t[::1] buf, starts, lengths, out, int window_bits):
    """Arrow binary-view structs for slices of ``buf``: row j of ``out`` (16 bytes a slice)
    describes row j of ``starts``/``lengths`` (1-D arrays are one row); data buffer index =
    start >> window_bits. The rows are walked together, frame by frame, so a frame's key
    and value, which share cache lines, are read from memory once."""
    cdef const uint64_t[:, ::1] at = np.atleast_2d(starts)
    cdef const int64_t[:, ::1] size = np.atleast_2d(lengths)
    cdef uint8_t[:, ::1] dst = np.atleast_2d(out)
    cdef Py_ssize_t i, j, m = at.shape[0], n = at.shape[1], bad = -1
    cdef size_t end = buf.shape[0]
    cdef uint64_t mask = (<uint64_t>1 << window_bits) - 1, start, length
    cdef const uint8_t* data = &buf[0] if end else <const uint8_t*>""
    cdef const uint64_t* first
    cdef const int64_t* sizes
    cdef uint8_t* structs
    if (size.shape[0], size.shape[1]) != (m, n) or (dst.shape[0], dst.shape[1]) != (m, 16 * n):
        raise ValueError("views: sizes do not match")
    if n == 0 or m == 0:
        return
    first, sizes, structs = &at[0, 0], &size[0, 0], &dst[0, 0]
    with nogil:
        for i in range(n):
            for j in range(m):
                start = first[j * n + i]
                length = <uint64_t>sizes[j * n + i]      # a negative length is huge here
                if start > end or length > end - start or length > mask:
                    bad = i
                    break
                put_view(structs + 16 * (j * n + i), data, end, start, <uint32_t>length,
                         window_bits, mask)
            if bad >= 0:
                break
    if bad >= 0:
        for j in range(m):
            if size[j, bad] < 0 or at[j, bad] > end or <uint64_t>size[j, bad] > end - at[j, bad]:
                raise ValueError(f"views: range {bad} outside the buffer")
        raise ValueError(f"views: range {bad} longer than a window")
