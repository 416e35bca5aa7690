"""Cython scan core: walks concatenated DCP frames without the GIL into numpy columns.

The frame kinds, field layouts and column order come from ``protocol`` and ``schema``
at import time; this module holds only the loop. ``pyscan`` is its pure-Python twin.
"""

from libc.stdint cimport int8_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy, memmove, memset
from cpython.buffer cimport PyBuffer_FillInfo
from cpython.mem cimport PyMem_RawFree, PyMem_RawMalloc
from cpython.pythread cimport (PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_release_lock, PyThread_type_lock, WAIT_LOCK)
from libc.stdlib cimport free, realloc
from posix.mman cimport MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE, mmap, munmap

import numpy as np

from .. import protocol as P
from .. import schema as S
from .contract import ScanResult
from .wire cimport DCP_LE64, DCP_PREFETCH, DCP_PREFETCH_L2, be16, be32, be64, le32, le64

DEF MAX_KINDS = 64
DEF MAX_FIELDS = 256
DEF MAX_COLUMNS = 64
DEF BLOCK = 512            # frames decoded before their columns are written
DEF LANES = 4              # counters per kind when counting rows (runs of one kind)
DEF FIRST_ROWS = 65536    # rows reserved before the scan has measured the frames
DEF MIN_MEAN = 48         # a reservation for frames shorter than this on average is no guide
DEF PREFETCH_NEAR = 1024  # input bytes fetched ahead of the frame being parsed: at least ...
DEF PREFETCH_FAR = 131072 # ... and at most
DEF VIEW_AHEAD = 16        # slices ahead of the binary view being written

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
# kind by [response][opcode][extras length]: a kind, MARKER_PENDING (the value decides) or
# BAD_EXTRAS (no kind of this opcode has this extras length)
cdef int8_t kind_of[2][256][256]
cdef enum:
    MARKER_PENDING = -1
    BAD_EXTRAS = -2
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
# all ones where the kind is a response / carries a key / a value: header columns are
# masked instead of branched on
cdef uint64_t response_mask[MAX_KINDS]
cdef uint64_t key_mask[MAX_KINDS]
cdef uint64_t value_mask[MAX_KINDS]
cdef int kind_first[MAX_KINDS + 1]
cdef int field_col[MAX_FIELDS]
cdef uint8_t field_base[MAX_FIELDS]
cdef uint32_t field_off[MAX_FIELDS]
cdef uint8_t field_width[MAX_FIELDS]
cdef bint is_field_column[MAX_COLUMNS]
cdef uint8_t column_width[MAX_COLUMNS]
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
    global n_marker, n_columns, n_kinds
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
    for m in P.DCP_MAGICS:
        magic_class[m] = m in P.RESPONSE_MAGICS
    assert len(P.KINDS) < 128
    for op in range(256):
        rules = P.request_kinds(op)
        exts = P.RESPONSE_EXTRAS.get(op)
        for j in range(256):
            kind_of[0][op][j] = rules.get(j, BAD_EXTRAS) if rules else P.REQUEST_KIND
            kind_of[1][op][j] = P.RESPONSE_KIND if exts is None or j in exts else BAD_EXTRAS
    OP_HELLO, OP_OPEN = P.Opcode.HELLO, P.Opcode.OPEN
    OP_SYSTEM_EVENT, OP_SEQNO_ADVANCED = P.Opcode.SYSTEM_EVENT, P.Opcode.SEQNO_ADVANCED
    FEATURE_COLLECTIONS, OPEN_FLAG_COLLECTIONS = P.FEATURE_COLLECTIONS, P.OPEN_FLAG_COLLECTIONS
    n_marker = len(P.MARKER_V2_KINDS)
    for j, ((version, length), kind) in enumerate(sorted(P.MARKER_V2_KINDS.items())):
        marker_version[j], marker_len[j], marker_kind[j] = version, length, kind

    assert len(P.KINDS) <= MAX_KINDS and len(S.NAMES) <= MAX_COLUMNS
    assert BLOCK < 1 << 16                   # row numbers and counts of a block are uint16
    j = 0
    for k, kind in enumerate(P.KINDS):
        kind_key_min[k], kind_key_max[k] = kind.key
        kind_val_min[k], kind_val_max[k] = kind.value
        kind_key_span[k] = kind_key_max[k] - kind_key_min[k]
        kind_val_span[k] = kind_val_max[k] - kind_val_min[k]
        kind_prefixed[k] = kind.prefixed
        response_mask[k] = 0 - <uint64_t>kind.response
        key_mask[k] = 0 - <uint64_t>(kind_key_max[k] != 0)
        value_mask[k] = 0 - <uint64_t>(kind_val_max[k] != 0)
        kind_first[k] = j
        for f in kind.fields:
            field_col[j] = S.INDEX[f.column]
            field_base[j] = f.base
            field_off[j] = f.offset
            field_width[j] = f.width
            assert f.width in (8, 4, 2, 1)
            j += 1
    kind_first[len(P.KINDS)] = j
    n_kinds = len(P.KINDS)
    assert j <= MAX_FIELDS
    for c, name in enumerate(S.NAMES):
        is_field_column[c] = any(f.column == name for kind in P.KINDS for f in kind.fields)
        column_width[c] = S.DTYPES[name].itemsize

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
    uint8_t* views[2]    # binary-view structs of the keys and the values, or NULL
    int window_bits      # the views' data buffers: windows of the input this long ...
    bint view_too_long   # ... which a value did not fit in


cdef int marker(const uint8_t* h, const Frame* f, Problem* e) noexcept nogil:
    """The snapshot marker V2.x kind for its version byte and value length, or a problem."""
    cdef uint8_t version = h[24 + f.fel]
    cdef int j
    for j in range(n_marker):
        if marker_version[j] == version and marker_len[j] == f.value_len:
            return marker_kind[j]
    return -problem(e, MARKER_VERSION, version, f.value_len)


cdef int framing(const uint8_t* h, int cls, Frame* f, Problem* e) noexcept nogil:
    """Walk the framing extras: OK with ``f.sid`` set, or a problem code."""
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
    if <uint32_t>(f.keylen - kind_key_min[kind]) > kind_key_span[kind]:
        return problem(e, KEY_LENGTH, opcode, f.keylen)
    if f.value_len - kind_val_min[kind] > kind_val_span[kind]:
        return problem(e, VALUE_LENGTH, opcode, f.value_len)
    f.kind = kind
    f.sid = 0
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


cdef struct Store:
    char* dst            # a requested field column
    uint32_t off         # field offset in the extras, or (base 1) in the value
    uint8_t base
    uint8_t width


# the requested field columns of each kind (stores[first[k]:first[k + 1]]), so the row
# loop never meets a column that was not asked for; and all requested field columns,
# zeroed block by block
cdef struct Plan:
    int first[MAX_KINDS + 1]
    Store stores[MAX_FIELDS]
    bint all_header
    int n_fields
    char* fields[MAX_COLUMNS]
    uint8_t widths[MAX_COLUMNS]


cdef void make_plan(Plan* plan, char** cols) noexcept nogil:
    cdef int k, j, c, m = 0
    cdef char* dst
    plan.n_fields = 0
    plan.all_header = True
    for c in range(n_columns):
        if cols[c] == NULL and not is_field_column[c]:
            plan.all_header = False
        if cols[c] != NULL and is_field_column[c]:
            plan.fields[plan.n_fields] = cols[c]
            plan.widths[plan.n_fields] = column_width[c]
            plan.n_fields += 1
    for k in range(n_kinds):
        plan.first[k] = m
        for j in range(kind_first[k], kind_first[k + 1]):
            dst = cols[field_col[j]]
            if dst != NULL:
                plan.stores[m] = Store(dst, field_off[j], field_base[j], field_width[j])
                m += 1
    plan.first[n_kinds] = m


# The input is fetched by a cursor running ahead of the parse: the parse loop moves it three
# lines a frame, and the loops that write a block's columns one or two lines a row, so the
# memory system keeps reading the next frames while the columns are written (measured 25%
# faster than fetching only while parsing). Offsets, not pointers: the cursor may be
# placed past the end of the input, where it fetches nothing.

cdef struct Ahead:
    const uint8_t* buf
    size_t p                # next line to fetch
    size_t stop             # the column writers fetch no further
    size_t last             # nor anybody from here on (the end of the input, less three lines)


cdef inline void ahead(Ahead* a) noexcept nogil:
    """Fetch one more line, if it is before ``a.stop``."""
    if a.p < a.stop:
        DCP_PREFETCH_L2(a.buf + a.p)
        a.p += 64


# The rows of the next block are fetched as well, column after column, while the block is
# parsed, three lines a frame (all columns: 8-10% faster than leaving the lines to be read
# when they are written).

cdef struct Out:
    char* col               # the column being fetched
    size_t p                # offset of its next line
    size_t stop             # end of the next block's rows in it
    int j                   # next column
    int n                   # columns (with the kinds and the binary views)
    size_t row0             # the next block's rows
    size_t rows
    char* cols[MAX_COLUMNS + 3]
    size_t width[MAX_COLUMNS + 3]


cdef inline void out_block(Out* o, size_t row0, size_t rows) noexcept nogil:
    o.j = 0
    o.p = o.stop = 0
    o.row0 = row0
    o.rows = rows


cdef void out_columns(Out* o, const Walk* w) noexcept nogil:
    cdef int c
    o.n = 0
    for c in range(n_columns):
        if w.cols[c] != NULL:
            o.cols[o.n] = w.cols[c]
            o.width[o.n] = column_width[c]
            o.n += 1
    o.cols[o.n] = <char*>w.kinds
    o.width[o.n] = 1
    o.n += 1
    for c in range(2):
        if w.views[c] != NULL:
            o.cols[o.n] = <char*>w.views[c]
            o.width[o.n] = 16
            o.n += 1
    out_block(o, 0, 0)


cdef inline void ahead_out(Out* o) noexcept nogil:
    """Fetch one more line of the next block's rows."""
    if o.p < o.stop:
        DCP_PREFETCH_L2(o.col + o.p)
        o.p += 64
    elif o.j < o.n:
        o.col = o.cols[o.j]
        o.p = o.row0 * o.width[o.j]
        o.stop = o.p + o.rows * o.width[o.j]
        o.j += 1


cdef inline void ahead_of(Ahead* a, size_t pos) noexcept nogil:
    """Fetch three more lines, if they are less than PREFETCH_FAR past ``pos`` (the frame
    being parsed); start PREFETCH_NEAR past it if the cursor is behind."""
    if a.p < pos + PREFETCH_FAR:
        if a.p < pos + PREFETCH_NEAR:
            a.p = pos + PREFETCH_NEAR
        if a.p < a.last:
            DCP_PREFETCH_L2(a.buf + a.p)
            DCP_PREFETCH_L2(a.buf + a.p + 64)
            DCP_PREFETCH_L2(a.buf + a.p + 128)
            a.p += 192


cdef inline void store_rows(const Store* st, const uint8_t* buf, const size_t* starts,
                            const uint16_t* which, size_t m, size_t i0) noexcept nogil:
    """One field of the rows ``which[:m]`` (all of one kind), read at ``starts[row]`` plus
    its offset: row ``i0 + which[x]`` of its column."""
    cdef size_t x
    cdef const uint8_t* src = buf + st.off
    if st.width == 8:
        for x in range(m):
            (<uint64_t*>st.dst)[i0 + which[x]] = be64(src + starts[which[x]])
    elif st.width == 4:
        for x in range(m):
            (<uint32_t*>st.dst)[i0 + which[x]] = be32(src + starts[which[x]])
    elif st.width == 2:
        for x in range(m):
            (<uint16_t*>st.dst)[i0 + which[x]] = be16(src + starts[which[x]])
    else:
        for x in range(m):
            (<uint8_t*>st.dst)[i0 + which[x]] = src[starts[which[x]]]


cdef void fields(const Plan* plan, const uint8_t* buf, const Frame* rows, size_t i0,
                 size_t n, Ahead* a) noexcept nogil:
    """Rows ``i0 ...`` of the requested field columns: zeros, then what each kind carries,
    kind by kind, so a field's offset and width are looked up once per block."""
    cdef uint16_t which[BLOCK]             # row numbers grouped by kind
    cdef size_t starts[2][BLOCK]           # where each row's extras and value start
    # the counting sort keeps LANES counters per kind (row b uses lane b % LANES): runs of
    # one kind then update different counters, not one counter through memory frame by frame
    cdef uint16_t at[LANES][MAX_KINDS]
    cdef uint16_t end[MAX_KINDS]
    cdef const Frame* f
    cdef size_t b, m
    cdef int k, j, lane
    cdef uint16_t total
    cdef const Store* st
    for j in range(plan.n_fields):
        memset(plan.fields[j] + i0 * plan.widths[j], 0, n * plan.widths[j])
    if plan.first[n_kinds] == 0:
        return
    memset(at, 0, sizeof(at))
    for b in range(n):
        f = &rows[b]
        at[b % LANES][f.kind] += 1
        ahead(a)
        starts[0][b] = f.pos + 24 + f.fel
        starts[1][b] = starts[0][b] + f.extlen + f.keylen
    total = 0
    for k in range(n_kinds):               # counts -> where each lane's rows of kind k go
        for lane in range(LANES):
            at[lane][k], total = total, total + at[lane][k]
        end[k] = total
    for b in range(n):
        k = rows[b].kind
        which[at[b % LANES][k]] = <uint16_t>b
        ahead(a)
        at[b % LANES][k] += 1
    m = 0
    for k in range(n_kinds):
        for j in range(plan.first[k], plan.first[k + 1]):
            st = &plan.stores[j]
            store_rows(st, buf, starts[st.base], which + m, end[k] - m, i0)
        m = end[k]


# header values that depend on the frame's kind (0 where it does not carry them)

cdef inline uint16_t vbucket(const uint8_t* buf, const Frame* f) noexcept nogil:
    return be16(buf + f.pos + 6) & ~response_mask[f.kind]


cdef inline uint16_t status(const uint8_t* buf, const Frame* f) noexcept nogil:
    return be16(buf + f.pos + 6) & response_mask[f.kind]


cdef inline uint64_t key_offset(uint64_t base, const Frame* f) noexcept nogil:
    return (base + f.pos + 24 + f.fel + f.extlen + f.prefix) & key_mask[f.kind]


cdef inline uint16_t key_len(const Frame* f) noexcept nogil:
    return (f.keylen - f.prefix) & key_mask[f.kind]


cdef inline uint64_t value_offset(uint64_t base, const Frame* f) noexcept nogil:
    return (base + f.pos + length(f) - f.value_len) & value_mask[f.kind]


cdef inline uint32_t value_len(const Frame* f) noexcept nogil:
    return f.value_len & value_mask[f.kind]


cdef inline uint64_t far_word(uint64_t start, int window_bits, uint64_t mask) noexcept nogil:
    """The second word of the view of a slice of more than 12 bytes at ``start``: the index
    of its data buffer (a window of the input) and its offset in it."""
    return (start >> window_bits) | ((start & mask) << 32)


cdef inline void put_view(uint8_t* v, const uint8_t* buf, size_t end, uint64_t start,
                          uint32_t size, uint64_t far) noexcept nogil:
    """One 16-byte binary-view struct, written as two little-endian words: the length and
    up to 12 inline bytes (zero-padded), or the length, a 4-byte prefix and ``far`` (the
    ``far_word`` of ``start``)."""
    cdef uint64_t lo, hi
    cdef uint8_t tail[12]
    cdef const uint8_t* p = buf + start
    if size > 12:
        lo = <uint64_t>size | (<uint64_t>le32(p) << 32)
        hi = far
    elif size == 0:                       # common: deletions, commits, markers
        lo = hi = 0
    else:
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
    lo = DCP_LE64(lo)
    hi = DCP_LE64(hi)
    memcpy(v, &lo, 8)
    memcpy(v + 8, &hi, 8)


cdef void put_views(Walk* w, const Frame* rows, size_t i0, size_t n) noexcept nogil:
    """Rows ``i0 ...`` of the key and value views asked for (zeros where a kind carries
    none), both from one read of each frame's row. Everything the loop reads is in locals
    before a view is stored: the stores go through byte pointers, which may alias
    anything."""
    cdef const uint8_t* buf = w.buf
    cdef size_t end = w.end
    cdef int bits = w.window_bits
    cdef uint64_t mask = (<uint64_t>1 << bits) - 1
    cdef bint one_window = end >> bits == 0     # every buffer index 0, every offset its start
    cdef uint8_t* keys = w.views[0] + 16 * i0 if w.views[0] != NULL else NULL
    cdef uint8_t* values = w.views[1] + 16 * i0 if w.views[1] != NULL else NULL
    cdef bint check = values != NULL and w.max_frame > mask   # a value may exceed a window
    cdef bint too_long = False
    cdef size_t b, pos, key_start, value_start
    cdef uint64_t key_far, value_far
    cdef uint32_t key_size, value_size
    cdef uint8_t kind
    for b in range(n):
        pos = rows[b].pos
        kind = rows[b].kind
        key_start = pos + 24 + rows[b].fel + rows[b].extlen + rows[b].prefix
        key_size = (rows[b].keylen - rows[b].prefix) & key_mask[kind]
        value_size = rows[b].value_len
        value_start = pos + 24 + rows[b].body - value_size
        value_size &= value_mask[kind]
        if check:
            too_long |= value_size > mask
        if one_window:
            key_far = key_start << 32
            value_far = value_start << 32
        else:
            key_far = far_word(key_start, bits, mask)
            value_far = far_word(value_start, bits, mask)
        if keys != NULL:
            put_view(keys + 16 * b, buf, end, key_start, key_size, key_far)
        if values != NULL:
            put_view(values + 16 * b, buf, end, value_start, value_size, value_far)
    if too_long:
        w.view_too_long = True


cdef void flush(Walk* w, const Plan* plan, const Frame* rows, size_t i0,
                size_t n, Ahead* a) noexcept nogil:
    """Write ``n`` decoded frames as rows ``i0 ...`` of the requested columns."""
    cdef size_t b
    cdef const uint8_t* buf = w.buf
    cdef char* dst
    cdef int c, at
    cdef uint64_t base = w.base
    cdef char** cols = w.cols
    cdef uint8_t* kinds = w.kinds
    for b in range(n):
        kinds[i0 + b] = rows[b].kind
    fields(plan, buf, rows, i0, n, a)
    if w.views[0] != NULL or w.views[1] != NULL:
        put_views(w, rows, i0, n)
    if plan.all_header:
        all_header(w, rows, i0, n, a)
        return
    # a projection: the header columns asked for, one at a time
    for c in range(n_columns):
        dst = cols[c]
        if dst == NULL or is_field_column[c]:
            continue
        if c == C_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = base + rows[b].pos
                ahead(a)
        elif c == C_MAGIC or c == C_OPCODE or c == C_DATATYPE:
            at = 0 if c == C_MAGIC else (1 if c == C_OPCODE else 5)
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = buf[rows[b].pos + at]
                ahead(a)
        elif c == C_VBUCKET:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = vbucket(buf, &rows[b])
                ahead(a)
        elif c == C_STATUS:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = status(buf, &rows[b])
                ahead(a)
        elif c == C_OPAQUE:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = be32(buf + rows[b].pos + 12)
                ahead(a)
        elif c == C_CAS:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = be64(buf + rows[b].pos + 16)
                ahead(a)
        elif c == C_BODY_LEN:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = rows[b].body
                ahead(a)
        elif c == C_FRAMING_LEN:
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = rows[b].fel
                ahead(a)
        elif c == C_EXTRAS_LEN:
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = rows[b].extlen
                ahead(a)
        elif c == C_KEY_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = key_offset(base, &rows[b])
                ahead(a)
        elif c == C_KEY_LEN:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = key_len(&rows[b])
                ahead(a)
        elif c == C_VALUE_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = value_offset(base, &rows[b])
                ahead(a)
        elif c == C_VALUE_LEN:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = value_len(&rows[b])
                ahead(a)
        elif c == C_COLLECTION_ID:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = rows[b].cid
                ahead(a)
        elif c == C_STREAM_ID:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = rows[b].sid
                ahead(a)


cdef inline void all_header(Walk* w, const Frame* rows, size_t i0, size_t n,
                            Ahead* a) noexcept nogil:
    """Every header column: one pass over the rows, each frame's header loaded once."""
    cdef char** cols = w.cols
    cdef const uint8_t* buf = w.buf
    cdef uint64_t base = w.base
    cdef uint64_t* offset = <uint64_t*>cols[C_OFFSET] + i0
    cdef uint8_t* magic = <uint8_t*>cols[C_MAGIC] + i0
    cdef uint8_t* opcode = <uint8_t*>cols[C_OPCODE] + i0
    cdef uint8_t* datatype = <uint8_t*>cols[C_DATATYPE] + i0
    cdef uint16_t* vbuckets = <uint16_t*>cols[C_VBUCKET] + i0
    cdef uint16_t* statuses = <uint16_t*>cols[C_STATUS] + i0
    cdef uint32_t* opaque = <uint32_t*>cols[C_OPAQUE] + i0
    cdef uint64_t* cas = <uint64_t*>cols[C_CAS] + i0
    cdef uint32_t* body = <uint32_t*>cols[C_BODY_LEN] + i0
    cdef uint8_t* framing_len = <uint8_t*>cols[C_FRAMING_LEN] + i0
    cdef uint8_t* extras_len = <uint8_t*>cols[C_EXTRAS_LEN] + i0
    cdef uint64_t* key_offsets = <uint64_t*>cols[C_KEY_OFFSET] + i0
    cdef uint16_t* key_lens = <uint16_t*>cols[C_KEY_LEN] + i0
    cdef uint64_t* value_offsets = <uint64_t*>cols[C_VALUE_OFFSET] + i0
    cdef uint32_t* value_lens = <uint32_t*>cols[C_VALUE_LEN] + i0
    cdef uint32_t* collection_id = <uint32_t*>cols[C_COLLECTION_ID] + i0
    cdef uint16_t* stream_id = <uint16_t*>cols[C_STREAM_ID] + i0
    cdef const Frame* f
    cdef const uint8_t* h
    cdef size_t b
    for b in range(n):
        f = &rows[b]
        h = buf + f.pos
        offset[b] = base + f.pos
        magic[b] = h[0]
        opcode[b] = h[1]
        datatype[b] = h[5]
        vbuckets[b] = vbucket(buf, f)
        statuses[b] = status(buf, f)
        opaque[b] = be32(h + 12)
        cas[b] = be64(h + 16)
        body[b] = f.body
        framing_len[b] = f.fel
        extras_len[b] = f.extlen
        key_offsets[b] = key_offset(base, f)
        key_lens[b] = key_len(f)
        value_offsets[b] = value_offset(base, f)
        value_lens[b] = value_len(f)
        collection_id[b] = f.cid
        stream_id[b] = f.sid
        ahead(a)
        ahead(a)


cdef int walk(Walk* w) noexcept nogil:
    """Validate and emit frames from ``w.pos``; 1 when the columns are full, -1 out of memory."""
    cdef Frame rows[BLOCK]
    cdef Plan plan
    cdef Problem e
    cdef Ahead a
    cdef Out o
    cdef size_t n = 0
    cdef Frame* f
    cdef int s, after, rc = 0
    cdef size_t q, pos = w.pos, count = w.count
    cdef size_t stop = min(w.limit, w.cap)
    cdef const uint8_t* buf = w.buf
    cdef size_t end = w.end
    cdef bint collections = w.collections
    cdef uint64_t max_frame = w.max_frame
    cdef bint checking = w.unverified    # the first frame of a resumed walk (see resync)
    make_plan(&plan, w.cols)
    out_columns(&o, w)
    a.buf = buf
    a.p = a.stop = pos
    a.last = end - 192 if end > 192 else 0
    while count < stop:
        f = &rows[n]
        ahead_of(&a, pos)
        ahead_out(&o)
        ahead_out(&o)
        ahead_out(&o)
        s = parse(buf, pos, end, collections, max_frame, f, &e)
        if checking and s != INCOMPLETE:
            # still resynchronising: only a frame start that resync would accept will do
            checking = False
            if s != OK or not opcode_known[buf[pos + 1]]:
                s = RESYNC if s != OK else problem(&e, RESYNC, 0, 0)
            else:
                after = plausible_after(w, pos + length(f))
                if after == UNKNOWN:
                    break
                if after == NO:
                    s = problem(&e, RESYNC, 0, 0)
                else:
                    w.unverified = False
        if s == OK:
            f.pos = pos
            pos += length(f)
            count += 1
            n += 1
            if n == BLOCK:
                a.stop = min(a.last, pos + PREFETCH_FAR)
                flush(w, &plan, rows, count - n, n, &a)
                n = 0
                out_block(&o, count, min(<size_t>BLOCK, w.cap - count))
            continue
        if s == INCOMPLETE:
            if not w.final or pos == end:
                break
            s = problem(&e, TRUNCATED, end - pos, length(f) if end - pos >= 24 else 24)
        if not w.skip:
            w.fail_code = s
            w.fail_pos = pos
            w.fail_a = e.a
            w.fail_b = e.b
            break
        w.unverified = False
        q = resync(w, pos, s, f)
        if w.stalled:
            w.stalled = False
            break
        if add_region(w, pos, q, s, e.a, e.b) < 0:
            rc = -1
            break
        pos = q
        if w.unverified:                 # the next chunk decides whether a frame starts here
            break
    else:
        if count == w.cap and count < w.limit:
            rc = 1
    a.stop = a.p
    flush(w, &plan, rows, count - n, n, &a)
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


# -- output memory ---------------------------------------------------------------------------
# Columns of a large scan are mapped spans that go back to a cache when their last array is
# dropped: the next scan (or the next batch of iter_batches) writes into pages that are
# already resident instead of faulting in and zeroing fresh ones, which costs as much as
# the scan itself. The cache holds at most KEEP_BYTES, and a span for at most KEEP_SECONDS
# (checked whenever a span is taken or given back). Small requests use the allocator. The
# clock and the growth of a mapping are in spans.h.

DEF SPAN_MIN = 1 << 20        # requests from this size up are mapped and recycled
DEF KEEP_SPANS = 128          # cache size: spans ...
DEF KEEP_BYTES = 512 << 20    # ... and bytes
DEF KEEP_SECONDS = 2.0

cdef extern from "spans.h":
    bint DCP_CAN_GROW
    void* DCP_GROW(void* p, size_t old, size_t new) nogil
    double dcp_now() nogil

cdef char* kept_at[KEEP_SPANS]          # oldest first
cdef size_t kept_size[KEEP_SPANS]
cdef double kept_since[KEEP_SPANS]
cdef size_t n_kept = 0, kept_bytes = 0
cdef size_t live_bytes = 0, peak_bytes = 0     # mapped spans in use
cdef PyThread_type_lock cache_lock = PyThread_allocate_lock()   # for free-threaded builds


cdef size_t span_size(size_t n) noexcept nogil:
    """``n`` rounded up to a size class: sixteenths of a power of two, whole pages."""
    cdef size_t step = 4096
    while step * 16 <= n:
        step *= 2
    return (n + step - 1) // step * step


cdef void unkeep(int i) noexcept nogil:
    global n_kept, kept_bytes
    kept_bytes -= kept_size[i]
    n_kept -= 1
    memmove(&kept_at[i], &kept_at[i + 1], (n_kept - i) * sizeof(char*))
    memmove(&kept_size[i], &kept_size[i + 1], (n_kept - i) * sizeof(size_t))
    memmove(&kept_since[i], &kept_since[i + 1], (n_kept - i) * sizeof(double))


cdef void expire(double now) noexcept nogil:
    """Unmap the spans kept longer than KEEP_SECONDS."""
    while n_kept and now - kept_since[0] > KEEP_SECONDS:
        munmap(kept_at[0], kept_size[0])
        unkeep(0)


cdef int kept_for(size_t size) noexcept nogil:
    """The kept span to serve a request of ``size`` bytes: the smallest that holds it with
    at most a quarter to spare, else (where mappings can grow) the largest smaller one;
    -1 if none."""
    cdef int i, fit = -1, under = -1
    for i in range(n_kept):
        if size <= kept_size[i] <= size + size // 4:
            if fit < 0 or kept_size[i] < kept_size[fit]:
                fit = i
        elif DCP_CAN_GROW and kept_size[i] < size and (under < 0 or kept_size[i] > kept_size[under]):
            under = i
    return fit if fit >= 0 else under


cdef class Room:
    """Writable memory for one column or buffer, exposed through the buffer protocol."""
    cdef char* at
    cdef size_t size          # bytes exposed
    cdef size_t mapped        # bytes mapped (0: from the allocator)

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.at, self.size, 0, flags)

    def __dealloc__(self):
        global live_bytes, n_kept, kept_bytes
        cdef double now
        if self.at == NULL:
            return
        if not self.mapped:
            PyMem_RawFree(self.at)
            return
        PyThread_acquire_lock(cache_lock, WAIT_LOCK)
        now = dcp_now()
        expire(now)
        live_bytes -= self.mapped
        if self.mapped > KEEP_BYTES:
            munmap(self.at, self.mapped)
        else:
            while n_kept and (n_kept == KEEP_SPANS or kept_bytes + self.mapped > KEEP_BYTES):
                munmap(kept_at[0], kept_size[0])
                unkeep(0)
            kept_at[n_kept] = self.at
            kept_size[n_kept] = self.mapped
            kept_since[n_kept] = now
            n_kept += 1
            kept_bytes += self.mapped
        PyThread_release_lock(cache_lock)

    cdef void trim(self, size_t used) noexcept nogil:
        """Give back the pages of a mapped span past ``used`` bytes when it is more than
        twice that (a scan that reserved far more rows than it found)."""
        global live_bytes
        cdef size_t keep = span_size(used) if used else 4096
        if self.mapped and keep <= self.mapped // 2:
            munmap(self.at + keep, self.mapped - keep)
            PyThread_acquire_lock(cache_lock, WAIT_LOCK)
            live_bytes -= self.mapped - keep
            PyThread_release_lock(cache_lock)
            self.mapped = keep
            self.size = min(self.size, keep)


cdef Room new_room(size_t n):
    global live_bytes, peak_bytes
    cdef Room r = Room.__new__(Room)
    cdef size_t size
    cdef int i
    cdef void* at = MAP_FAILED
    r.size = n
    if n < SPAN_MIN:
        if n_kept:
            PyThread_acquire_lock(cache_lock, WAIT_LOCK)
            expire(dcp_now())
            PyThread_release_lock(cache_lock)
        r.at = <char*>PyMem_RawMalloc(n if n else 1)
        if r.at == NULL:
            raise MemoryError()
        return r
    size = span_size(n)
    PyThread_acquire_lock(cache_lock, WAIT_LOCK)
    expire(dcp_now())
    i = kept_for(size)
    if i >= 0:
        at = kept_at[i]
        if kept_size[i] < size:          # its pages stay; only the new tail is fresh
            at = DCP_GROW(at, kept_size[i], size)
            if at == MAP_FAILED:
                munmap(kept_at[i], kept_size[i])
        else:
            size = kept_size[i]
        unkeep(i)
    if at == MAP_FAILED:
        at = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    if at != MAP_FAILED:
        live_bytes += size
        peak_bytes = max(peak_bytes, live_bytes)
    PyThread_release_lock(cache_lock)
    if at == MAP_FAILED:
        raise MemoryError()
    r.at, r.mapped = <char*>at, size
    return r


def room(Py_ssize_t n):
    """``n`` bytes of writable, uninitialised memory (a buffer-protocol object)."""
    if n < 0:
        raise ValueError("negative size")
    return new_room(n)


def mapped(bint reset=False):
    """Bytes of mapped spans in use now, the most in use at once since the last reset, and
    the bytes kept for reuse (the allocator's share is visible to tracemalloc)."""
    global peak_bytes
    found = live_bytes, peak_bytes, kept_bytes
    if reset:
        peak_bytes = live_bytes
    return found


cdef Room regrow(Room old, size_t count, size_t rows, size_t width):
    """A larger column holding the first ``count`` rows of ``old``."""
    cdef Room r = new_room(rows * width)
    if count:
        memcpy(r.at, old.at, count * width)
    return r


cdef object finish(Room r, size_t count, dtype):
    """The first ``count`` rows as a numpy array."""
    r.trim(count * dtype.itemsize)
    return np.frombuffer(r, dtype, count)


def scan_buffer(const uint8_t[::1] buf, request):
    """Scan ``buf[request.start:]`` as ``request`` (a ``contract.ScanRequest``) says; see
    ``pyscan.scan_buffer``."""
    cdef Walk w
    cdef char* cols[MAX_COLUMNS]
    cdef int rc, c
    cdef size_t upper, mean, rows
    cdef Py_ssize_t start = request.start, max_frames = request.max_frames
    cdef int view_bits = request.view_bits
    names = request.names
    if start < 0 or start > buf.shape[0]:
        raise ValueError(f"start {start} outside the buffer of {buf.shape[0]} bytes")
    if not 0 <= view_bits <= 31:
        raise ValueError(f"view_bits {view_bits} outside 0..31")
    w.buf = &buf[0] if buf.shape[0] else <const uint8_t*>""
    w.end = buf.shape[0]
    w.collections, w.skip, w.final = request.collections, request.skip, request.final
    w.max_frame = request.max_frame_size
    w.base = request.base
    w.pos = w.start = start
    w.unverified = request.unverified
    w.window_bits = view_bits
    w.view_too_long = False
    w.stalled = False
    w.count = w.n_regions = w.cap_regions = 0
    w.regions = NULL
    w.fail_code = 0
    upper = (w.end - start) // 24 + 1          # no frame is shorter than its header
    w.limit = min(<size_t>max_frames, upper) if max_frames >= 0 else upper
    w.cap = min(w.limit, estimate_frames(w.buf, start, w.end))
    if w.cap > (w.end - start) // MIN_MEAN + FIRST_ROWS:
        w.cap = min(w.cap, FIRST_ROWS)      # the first frames are no guide: measure, then grow
    widths = [S.DTYPES[name].itemsize for name in names]
    columns = [new_room(w.cap * widths[i]) for i in range(len(names))]
    kinds = new_room(w.cap)
    # the views of the key and value columns asked for
    viewed = [name for name, pair in S.BINARY.items() if view_bits and set(pair) <= set(names)]
    views = [new_room(w.cap * 16) if name in viewed else None for name in S.BINARY]
    try:
        while True:
            for c in range(n_columns):
                cols[c] = NULL
            for i, name in enumerate(names):
                cols[S.INDEX[name]] = (<Room>columns[i]).at
            w.cols = cols
            w.kinds = <uint8_t*>(<Room>kinds).at
            for c in range(2):
                w.views[c] = <uint8_t*>(<Room>views[c]).at if views[c] is not None else NULL
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
            if rows > (w.end - w.pos) // MIN_MEAN + FIRST_ROWS:
                rows = w.count + 1024        # the mean is no guide either: double
            w.cap = min(w.limit, w.count + rows)
            columns = [regrow(columns[i], w.count, w.cap, widths[i])
                       for i in range(len(names))]
            kinds = regrow(kinds, w.count, w.cap, 1)
            views = [None if v is None else regrow(v, w.count, w.cap, 16) for v in views]
        if w.fail_code:
            return ScanResult(0, start, {}, np.zeros(0, np.uint8), [], False, None,
                              (w.fail_pos, w.fail_code, w.fail_a, w.fail_b))
        arrays = {name: finish(columns[i], w.count, S.DTYPES[name])
                  for i, name in enumerate(names)}
        kinds = finish(kinds, w.count, np.dtype(np.uint8))
        if view_bits and not w.view_too_long:
            views = {name: finish(views[c], 16 * w.count, np.dtype(np.uint8)).reshape(-1, 16)
                     for c, name in enumerate(S.BINARY) if name in viewed}
        else:
            views = None
        regions = [(w.regions[r].start, w.regions[r].end - w.regions[r].start,
                    w.regions[r].code, w.regions[r].a, w.regions[r].b)
                   for r in range(w.n_regions)]
        return ScanResult(w.count, w.pos, arrays, kinds, regions, bool(w.unverified), views)
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
                if i + VIEW_AHEAD < n and first[j * n + i + VIEW_AHEAD] < end:
                    DCP_PREFETCH(data + first[j * n + i + VIEW_AHEAD])
                start = first[j * n + i]
                length = <uint64_t>sizes[j * n + i]      # a negative length is huge here
                if start > end or length > end - start or length > mask:
                    bad = i
                    break
                put_view(structs + 16 * (j * n + i), data, end, start, <uint32_t>length,
                         far_word(start, window_bits, mask))
            if bad >= 0:
                break
    if bad >= 0:
        for j in range(m):
            if size[j, bad] < 0 or at[j, bad] > end or <uint64_t>size[j, bad] > end - at[j, bad]:
                raise ValueError(f"views: range {bad} outside the buffer")
        raise ValueError(f"views: range {bad} longer than a window")


cdef extern from "bitmaps.h":
    void dcp_group_bits(const uint8_t* kinds, size_t n, int n_present, const uint8_t* present,
                        const uint8_t* slot, int n_groups, const int* rows, const int* first,
                        const uint8_t* members, uint8_t* out, size_t stride) noexcept nogil
    void dcp_group_bits_bitalg(const uint8_t* kinds, size_t n, int n_groups, const int* rows,
                               const uint64_t* sets, uint8_t* out, size_t stride) noexcept nogil
    bint dcp_has_bitalg() noexcept


cdef bint has_bitalg = dcp_has_bitalg()


def validity_bitmaps(const uint8_t[::1] kinds, const uint8_t[:, ::1] carried, bint wide=True):
    """Arrow validity bitmaps (little-endian bit order) of groups of frame kinds: bit i of
    row g is set where ``carried[g, kinds[i]]`` is not 0 (bits past the rows are 0). Also
    the state of each group: 2 every row valid (so too with no rows), 0 none, 1 some.

    One pass finds the kinds present; a second ORs, for each group with some rows valid,
    the rows of its kinds, 64 at a time. With AVX-512 BITALG a bit lookup per group does it
    instead, unless ``wide`` is false (the tests compare the two)."""
    cdef size_t n = kinds.shape[0], nbytes = (kinds.shape[0] + 7) // 8, i
    cdef size_t stride = (nbytes + 7) // 8 * 8          # whole 64-bit words a row
    cdef int n_groups = carried.shape[0], n_kinds = carried.shape[1]
    cdef uint8_t seen[256]
    cdef uint8_t present[256]
    cdef uint8_t slot[256]              # index in present of each kind present
    cdef int n_present = 0, g, k, inside, active = 0, n_members = 0
    if n_groups and n_kinds > 256:
        raise ValueError("more than 256 kinds")
    memset(seen, 0, sizeof(seen))
    with nogil:
        for i in range(n):
            seen[kinds[i]] = 1
    for k in range(256):
        if seen[k]:
            if k >= n_kinds:
                raise ValueError(f"kind {k} outside 0..{n_kinds - 1}")
            present[n_present] = k
            slot[k] = n_present
            n_present += 1
    state = np.empty(n_groups, np.int8)
    out = np.frombuffer(new_room(n_groups * stride), np.uint8).reshape(n_groups, stride)
    # the groups with some rows valid: their rows in out, their kinds (indexes into present)
    cdef int[::1] rows = np.zeros(n_groups + 1, np.intc)
    cdef int[::1] first = np.zeros(n_groups + 1, np.intc)
    cdef uint8_t[::1] members = np.zeros(n_groups * n_present + 1, np.uint8)
    cdef uint64_t[::1] sets = np.zeros(n_groups + 1, np.uint64)   # bit k: kind k in the group
    cdef int8_t[::1] states = state
    cdef uint8_t[:, ::1] bits = out
    for g in range(n_groups):
        inside = 0
        for k in range(n_present):
            inside += carried[g, present[k]] != 0
        states[g] = 2 if inside == n_present else (0 if inside == 0 else 1)
        if states[g] != 1:
            if nbytes:
                memset(&bits[g, 0], 0xFF if states[g] == 2 else 0, nbytes)
                if states[g] == 2 and n % 8:
                    bits[g, nbytes - 1] = (1 << (n % 8)) - 1
            continue
        rows[active] = g
        first[active] = n_members
        for k in range(n_present):
            if carried[g, present[k]]:
                members[n_members] = k
                n_members += 1
                if present[k] < 64:
                    sets[active] |= <uint64_t>1 << present[k]
        active += 1
    first[active] = n_members
    if active:
        with nogil:
            if wide and has_bitalg and present[n_present - 1] < 64:
                dcp_group_bits_bitalg(&kinds[0], n, active, &rows[0], &sets[0], &bits[0, 0],
                                      stride)
            else:
                dcp_group_bits(&kinds[0], n, n_present, present, slot, active, &rows[0],
                               &first[0], &members[0], &bits[0, 0], stride)
    return state, out[:, :nbytes]
