# cython: language_level=3
"""The per-row loops of the stream checks and of the document state, compiled; ``pystate``
is the pure-Python twin, with the same names and signatures, and its docstrings say what
each function is given and answers. The loops run without the GIL and make no Python
object per row: ``check_streams`` and ``walk_state`` step through the rows of a stretch
keeping each stream's state in a row of a uint64 array, ``KeyIndex`` hashes documents to
dense ids and sorts them in key order.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np

from . import contract as C
from .wire cimport DCP_BE64, DCP_PREFETCH

# the codes of ``contract``, as compile-time numbers (checked against it at import)
cdef enum:
    EV_ITEM = 0
    EV_ADVANCE = 1
    EV_MARKER = 2
    EV_OSO_START = 3
    EV_OSO_END = 4
    EV_END = 5
    EV_REQUEST = 6
    EV_RESPONSE = 7
    EV_NONE = 255
    INFO_COLLECTIONS = 1
    INFO_UNFILTERED = 2
    INFO_SEED = 4
    GIVEN_FOUND = 1
    GIVEN_RANGE = 2
    R_BACKWARDS = 0
    R_OUTSIDE = 1
    R_EARLY = 2
    R_ENDED_INSIDE = 3
    R_OSO_NOT_ENDED = 4
    R_OSO_NOT_STARTED = 5
    C_BITS = 0
    C_OPAQUE = 1
    C_CHAIN = 2
    C_START = 3
    C_END = 4
    C_FLAGS = 5
    C_REACH = 6
    W_MUTATION = 0
    W_DELETION = 1
    W_EXPIRATION = 2
    W_PREPARE = 3
    W_ADVANCE = 7
    W_MARKER = 8
    W_OSO = 9
    W_RESTART = 10
    W_END = 11
    W_LOSS = 12
    K_BITS = 0
    K_CHAIN = 1
    K_CUT = 2
    K_START = 3
    K_END = 4
    K_CONSISTENT = 5
    K_FLOOR = 6
    K_LOST = 16
    K_FRESH = 32
    K_ITEMS = 64


_CODES = {"GIVEN_FOUND": GIVEN_FOUND, "GIVEN_RANGE": GIVEN_RANGE, "EV_ITEM": EV_ITEM, "EV_ADVANCE": EV_ADVANCE, "EV_MARKER": EV_MARKER,
          "EV_OSO_START": EV_OSO_START, "EV_OSO_END": EV_OSO_END, "EV_END": EV_END,
          "EV_REQUEST": EV_REQUEST, "EV_RESPONSE": EV_RESPONSE, "EV_NONE": EV_NONE,
          "INFO_COLLECTIONS": INFO_COLLECTIONS, "INFO_UNFILTERED": INFO_UNFILTERED,
          "INFO_SEED": INFO_SEED, "R_BACKWARDS": R_BACKWARDS, "R_OUTSIDE": R_OUTSIDE,
          "R_EARLY": R_EARLY, "R_ENDED_INSIDE": R_ENDED_INSIDE,
          "R_OSO_NOT_ENDED": R_OSO_NOT_ENDED, "R_OSO_NOT_STARTED": R_OSO_NOT_STARTED,
          "C_BITS": C_BITS, "C_OPAQUE": C_OPAQUE, "C_CHAIN": C_CHAIN, "C_START": C_START,
          "C_END": C_END, "C_FLAGS": C_FLAGS, "C_REACH": C_REACH, "W_MUTATION": W_MUTATION,
          "W_DELETION": W_DELETION, "W_EXPIRATION": W_EXPIRATION, "W_PREPARE": W_PREPARE,
          "W_ADVANCE": W_ADVANCE, "W_MARKER": W_MARKER, "W_OSO": W_OSO,
          "W_RESTART": W_RESTART, "W_END": W_END, "W_LOSS": W_LOSS, "K_BITS": K_BITS,
          "K_CHAIN": K_CHAIN,
          "K_CUT": K_CUT, "K_START": K_START, "K_END": K_END, "K_CONSISTENT": K_CONSISTENT,
          "K_FLOOR": K_FLOOR, "K_LOST": K_LOST, "K_FRESH": K_FRESH,
          "K_ITEMS": K_ITEMS}
if any(getattr(C, name) != value for name, value in _CODES.items()):
    raise ImportError("cstate was compiled against other contract codes: rebuild it")


# check state bits: as in pystate
cdef enum:
    OPEN = 1
    STARTED = 2
    LAST_START = 4
    CHAIN = 8
    REACH = 16
    ADVANCED = 32
    UNFILTERED = 64
    OPAQUE = 128
    ENDED = 256
    SPAN_SHIFT = 9
    SPAN_MASK = 3 << 9
    NO_SPAN = 0
    MARKER = 1
    OSO = 2
    OSO_CLOSED = 3
    DISK = 0x02
    HISTORY = 0x10
    STATUS_OK = 0
# walk state bits
cdef enum:
    IN_OSO = 1
    LAZY = 2
    HAS_MARKER = 4
    COMPLETED = 8
    LOST = K_LOST
    FRESH = K_FRESH
    ITEMS = K_ITEMS

cdef uint64_t U64_MAX = 0xFFFFFFFFFFFFFFFF
cdef uint64_t CLOCK = ~(<uint64_t>0xFFFF)


# -- the stream checks -------------------------------------------------------------------

cdef struct Found:
    int64_t at
    uint8_t rule
    uint8_t given
    uint64_t found, low, high


cdef struct Finds:
    Found* rows
    size_t n, cap


cdef int add(Finds* f, int64_t at, uint8_t rule, uint64_t found, uint8_t given,
             uint64_t low, uint64_t high) except -1 nogil:
    cdef Found* grown
    if f.n == f.cap:
        f.cap = f.cap * 2 if f.cap else 64
        grown = <Found*>realloc(f.rows, f.cap * sizeof(Found))
        if grown == NULL:
            with gil:
                raise MemoryError()
        f.rows = grown
    f.rows[f.n].at, f.rows[f.n].rule, f.rows[f.n].found = at, rule, found
    f.rows[f.n].given, f.rows[f.n].low, f.rows[f.n].high = given, low, high
    f.n += 1
    return 0


cdef int short(Finds* f, const uint64_t* st, int64_t i, uint8_t rule, bint reached) \
        except -1 nogil:
    return add(f, i, rule, st[C_REACH] if reached else 0,
               GIVEN_RANGE | (GIVEN_FOUND if reached else 0), st[C_START], st[C_END])


cdef int closed(Finds* f, const uint64_t* st, uint64_t bits, int span, int64_t i, int ev,
                bint collections, uint32_t status, uint64_t start, uint64_t end,
                uint32_t flags) except -1 nogil:
    """The checks on the snapshot that row ``i`` closes (``pystate._closed``)."""
    cdef bint reached = (bits & REACH) != 0
    cdef uint64_t top
    cdef uint8_t rule
    if span == MARKER:
        top = st[C_END]
        if reached and st[C_REACH] >= top:
            return 0
        rule = R_ENDED_INSIDE if ev == EV_END else R_EARLY
        if not (st[C_FLAGS] & DISK):
            if not collections or bits & UNFILTERED:
                short(f, st, i, rule, reached)
            return 0
        if not collections or not (bits & ADVANCED):
            return 0
        if ev == EV_MARKER and not ((flags & HISTORY) and not (st[C_FLAGS] & HISTORY)
                                    and end == top and start <= top):
            short(f, st, i, rule, reached)
        elif ev == EV_END and status == STATUS_OK:
            short(f, st, i, rule, reached)
    elif span == OSO and ev == EV_END and status == STATUS_OK and collections \
            and bits & ADVANCED:
        add(f, i, R_ENDED_INSIDE, st[C_REACH] if reached else 0,
            GIVEN_FOUND if reached else 0, 0, 0)
    return 0


def check_streams(const uint8_t[::1] event, const int64_t[::1] slot, const uint8_t[::1] info,
                  const uint32_t[::1] opaque, const uint64_t[::1] seqno,
                  const uint64_t[::1] snap_start, const uint64_t[::1] snap_end,
                  const uint32_t[::1] snap_flags, const uint32_t[::1] end_status,
                  uint64_t[:, ::1] state, uint8_t[::1] starts):
    """The stream checks (``pystate.check_streams``)."""
    cdef Py_ssize_t n = event.shape[0], i
    cdef Finds f
    cdef int ev, span
    cdef uint64_t bits, q, chain
    cdef uint64_t* st
    cdef bint collections
    cdef int64_t s
    if any(m != n for m in (slot.shape[0], info.shape[0], opaque.shape[0], seqno.shape[0],
                            snap_start.shape[0], snap_end.shape[0], snap_flags.shape[0],
                            end_status.shape[0], starts.shape[0])):
        raise ValueError("every column needs one value per row")
    if state.shape[1] != C.C_FIELDS:
        raise ValueError("the check state has C_FIELDS columns")
    for i in range(n):
        if event[i] != EV_NONE and not 0 <= slot[i] < state.shape[0]:
            raise ValueError(f"slot {slot[i]} outside the check state")
    f.rows, f.n, f.cap = NULL, 0, 0
    try:
        with nogil:
            for i in range(n):
                ev = event[i]
                if ev == EV_NONE:
                    continue
                s = slot[i]
                st = &state[s, 0]
                bits = st[C_BITS]
                if not (bits & OPEN) or bits & ENDED:
                    bits = OPEN
                    starts[i] = 1
                if ev == EV_REQUEST or ev == EV_RESPONSE:
                    if not ((bits & LAST_START) and (bits & OPAQUE)
                            and st[C_OPAQUE] == opaque[i]):
                        bits = OPEN | STARTED
                        starts[i] = 1
                    bits |= LAST_START | OPAQUE
                    st[C_OPAQUE] = opaque[i]
                    if ev == EV_REQUEST:
                        if info[i] & INFO_UNFILTERED:
                            bits |= UNFILTERED
                        if info[i] & INFO_SEED:
                            bits |= CHAIN
                            st[C_CHAIN] = seqno[i]
                    st[C_BITS] = bits
                    continue
                if bits & OPAQUE and st[C_OPAQUE] != opaque[i]:
                    bits = OPEN
                    starts[i] = 1
                bits = (bits | OPAQUE) & ~(<uint64_t>LAST_START)
                st[C_OPAQUE] = opaque[i]
                span = (bits & SPAN_MASK) >> SPAN_SHIFT
                collections = (info[i] & INFO_COLLECTIONS) != 0
                if ev == EV_ITEM or ev == EV_ADVANCE:
                    q = seqno[i]
                    if span != OSO:
                        chain = st[C_CHAIN]
                        if bits & CHAIN and (q < chain or (q == chain and ev != EV_ADVANCE)):
                            add(&f, i, R_BACKWARDS, q, GIVEN_FOUND | GIVEN_RANGE, chain, chain)
                        st[C_CHAIN] = q
                        bits |= CHAIN
                        if ev == EV_ITEM:
                            if span == MARKER:
                                if q < st[C_START] or q > st[C_END]:
                                    add(&f, i, R_OUTSIDE, q, GIVEN_FOUND | GIVEN_RANGE,
                                        st[C_START], st[C_END])
                            elif span == OSO_CLOSED or bits & STARTED:
                                add(&f, i, R_OUTSIDE, q, GIVEN_FOUND, 0, 0)
                    if ev == EV_ADVANCE:
                        bits |= ADVANCED
                    if not (bits & REACH) or q > st[C_REACH]:
                        st[C_REACH] = q
                    bits |= REACH
                elif ev == EV_MARKER or ev == EV_OSO_START:
                    closed(&f, st, bits, span, i, ev, collections, 0, snap_start[i],
                           snap_end[i], snap_flags[i])
                    if span == OSO:
                        add(&f, i, R_OSO_NOT_ENDED, 0, 0, 0, 0)
                    bits &= ~(<uint64_t>(SPAN_MASK | REACH))
                    if ev == EV_MARKER:
                        bits |= MARKER << SPAN_SHIFT
                        st[C_START], st[C_END] = snap_start[i], snap_end[i]
                        st[C_FLAGS] = snap_flags[i]
                    else:
                        bits |= OSO << SPAN_SHIFT
                elif ev == EV_OSO_END:
                    if span == OSO:
                        if bits & REACH:
                            st[C_CHAIN] = st[C_REACH]
                            bits |= CHAIN
                        bits = (bits & ~(<uint64_t>(SPAN_MASK | REACH))) \
                            | (OSO_CLOSED << SPAN_SHIFT)
                    elif bits & STARTED or span != NO_SPAN:
                        add(&f, i, R_OSO_NOT_STARTED, 0, 0, 0, 0)
                elif ev == EV_END:
                    closed(&f, st, bits, span, i, ev, collections, end_status[i], 0, 0, 0)
                    bits |= ENDED
                st[C_BITS] = bits
        at = np.empty(f.n, np.int64)
        rule = np.empty(f.n, np.uint8)
        found = np.empty(f.n, np.uint64)
        given = np.empty(f.n, np.uint8)
        low = np.empty(f.n, np.uint64)
        high = np.empty(f.n, np.uint64)
        for i in range(<Py_ssize_t>f.n):
            at[i], rule[i], found[i] = f.rows[i].at, f.rows[i].rule, f.rows[i].found
            given[i], low[i], high[i] = f.rows[i].given, f.rows[i].low, f.rows[i].high
        return at, rule, found, given, low, high
    finally:
        free(f.rows)


# -- the state walk ----------------------------------------------------------------------

cdef inline bint is_item(int w) noexcept nogil:
    return w <= W_ADVANCE


cdef inline bint is_timed(int w) noexcept nogil:
    return w == W_MUTATION or w == W_DELETION or w == W_EXPIRATION or w == W_PREPARE


cdef inline void restarted(uint64_t* st, uint64_t p, bint lower) noexcept nogil:
    st[K_CHAIN] = p
    if lower and p < st[K_CONSISTENT]:
        st[K_CONSISTENT] = p
    if p < st[K_CUT]:
        st[K_CUT] = U64_MAX


cdef inline uint64_t complete(uint64_t* st, uint64_t bits, uint64_t limit) noexcept nogil:
    cdef uint64_t end = st[K_END]
    if end <= limit and end < st[K_CUT] and not (bits & LOST):
        st[K_CONSISTENT] = end
        bits |= COMPLETED
    return bits & ~(<uint64_t>HAS_MARKER)


cdef inline uint64_t floor_of(uint64_t* st, uint64_t bits, int w, uint64_t start,
                              uint32_t oso, uint64_t seqno) noexcept nogil:
    """The first marker, OSO start or item of a run (``pystate._floor``)."""
    cdef uint64_t floor
    if w == W_MARKER:
        floor = (start if start > 0 else 1) - 1
    elif w == W_OSO:
        if not (oso & 1) or oso & 2:
            return bits
        floor = 0
    elif is_item(w):
        floor = (seqno if seqno > 0 else 1) - 1
    else:
        return bits
    if floor < st[K_FLOOR]:
        st[K_FLOOR] = floor
    return bits & ~(<uint64_t>FRESH)


def walk_state(const uint8_t[::1] what, const int64_t[::1] slot, const uint64_t[::1] seqno,
               const uint64_t[::1] cas, const uint64_t[::1] snap_start,
               const uint64_t[::1] snap_end, const uint32_t[::1] oso,
               const uint8_t[::1] rolled, const uint64_t[::1] limit, const uint8_t[::1] lost,
               uint64_t at_time, uint64_t[:, ::1] carry, uint8_t[::1] bad,
               uint64_t[::1] previous, uint8_t[::1] applies, uint64_t[::1] point,
               uint8_t[::1] known):
    """The state walk of a stretch (``pystate.walk_state``)."""
    cdef Py_ssize_t n = what.shape[0], i, k, slots = carry.shape[0]
    cdef int64_t s, row
    cdef int w
    cdef uint64_t bits, q, p, chain
    cdef uint32_t flags
    cdef uint64_t* st
    cdef bint every_lost = False
    cdef int64_t* pending
    if any(m != n for m in (slot.shape[0], seqno.shape[0], cas.shape[0],
                            snap_start.shape[0], snap_end.shape[0], oso.shape[0],
                            rolled.shape[0], limit.shape[0], lost.shape[0], bad.shape[0],
                            previous.shape[0], applies.shape[0], point.shape[0],
                            known.shape[0])):
        raise ValueError("every column needs one value per row")
    if carry.shape[1] != C.K_FIELDS:
        raise ValueError("the walk state has K_FIELDS columns")
    for i in range(n):
        if what[i] != W_LOSS and not 0 <= slot[i] < slots:
            raise ValueError(f"slot {slot[i]} outside the walk state")
    carried_slots, carried_points = [], []
    pending = <int64_t*>malloc((slots + 1) * sizeof(int64_t))
    if pending == NULL:
        raise MemoryError()
    try:
        for k in range(slots):
            pending[k] = -1
        for i in range(n):
            w = what[i]
            if w == W_LOSS:
                if not every_lost:
                    every_lost = True
                    for k in range(slots):
                        carry[k, K_BITS] |= LOST
                continue
            s = slot[i]
            st = &carry[s, 0]
            bits = st[K_BITS]
            if lost[i]:
                bits |= LOST
            if bits & FRESH and w != W_RESTART and w != W_END:
                bits = floor_of(st, bits, w, snap_start[i], oso[i], seqno[i])
            if w == W_RESTART:
                bits = (bits & ~(<uint64_t>(IN_OSO | HAS_MARKER))) | FRESH
                if rolled[i]:
                    bits &= ~(<uint64_t>(LAZY | COMPLETED))
                    pending[s] = -1
                    if bits & ITEMS:
                        point[i], known[i] = seqno[i], 1
                    restarted(st, seqno[i], True)
                else:
                    bits = (bits | LAZY) & ~(<uint64_t>COMPLETED)
                    pending[s] = i
            elif w == W_MARKER:
                if bits & HAS_MARKER:
                    bits = complete(st, bits, limit[i])
                bits |= HAS_MARKER
                st[K_START], st[K_END] = snap_start[i], snap_end[i]
            elif w == W_OSO:
                flags = oso[i]
                if flags & 2 and bits & HAS_MARKER and st[K_CHAIN] >= st[K_END]:
                    bits = complete(st, bits, limit[i])
                if flags & 1 and not (flags & 2):
                    bits |= IN_OSO
                else:
                    bits &= ~(<uint64_t>IN_OSO)
            elif is_item(w):
                q = seqno[i]
                if bits & LAZY:
                    p = (q if q > 0 else 1) - 1
                    row = pending[s]
                    pending[s] = -1
                    if not (bits & ITEMS):
                        pass                  # it discards nothing: not reported
                    elif row >= 0:
                        point[row], known[row] = p, 1
                    else:
                        carried_slots.append(s)
                        carried_points.append(p)
                    restarted(st, p, not (bits & COMPLETED))
                    bits &= ~(<uint64_t>LAZY)
                bits |= ITEMS
                chain = st[K_CHAIN]
                if not (bits & IN_OSO) and q <= chain:
                    bad[i], previous[i] = 1, chain
                    st[K_BITS] = bits
                    continue
                if q > chain:
                    st[K_CHAIN] = q
                if at_time != U64_MAX and is_timed(w) and (cas[i] & CLOCK) > at_time \
                        and q < st[K_CUT]:
                    st[K_CUT] = q
                if bits & HAS_MARKER and not (bits & IN_OSO) and q >= st[K_END]:
                    bits = complete(st, bits, limit[i])
                applies[i] = q <= limit[i] and q < st[K_CUT]
            st[K_BITS] = bits
    finally:
        free(pending)
    return (np.array(carried_slots, np.int64),
            np.array(carried_points, np.uint64).reshape(len(carried_points)))


def newest(const int64_t[::1] ids, const int64_t[::1] order_key, Py_ssize_t size):
    """Per id, the element with the highest order key (``pystate.newest``)."""
    cdef Py_ssize_t n = ids.shape[0], i
    cdef int64_t g, b
    if order_key.shape[0] != n:
        raise ValueError("one order key per id")
    best_arr = np.full(size, -1, np.int64)
    cdef int64_t[::1] best = best_arr
    for i in range(n):
        if not 0 <= ids[i] < size:
            raise ValueError(f"id {ids[i]} outside 0..{size - 1}")
    with nogil:
        for i in range(n):
            g = ids[i]
            b = best[g]
            if b < 0 or order_key[i] >= order_key[b]:
                best[g] = i
    return best_arr


# -- documents: ids, keys, order ---------------------------------------------------------

# the multipliers of the key hash (MurmurHash3's finaliser and golden-ratio constants)
cdef uint64_t M1 = 0xff51afd7ed558ccd, M2 = 0xc4ceb9fe1a85ec53, M3 = 0x9E3779B97F4A7C15
cdef uint64_t M4 = 0x87c37b91114253d5, M5 = 0x4cf5ad432745937f
# a KeyIndex table entry: the hash's high half, the document id plus one
cdef uint64_t HIGH = 0xFFFFFFFF00000000, LOW = 0xFFFFFFFF
cdef char _nothing[1]       # where the keys of an empty buffer are (all empty)
DEF AHEAD = 16              # keys hashed ahead of the one looked up


cdef inline uint64_t fmix(uint64_t h) noexcept nogil:
    h ^= h >> 33
    h *= M1
    h ^= h >> 33
    h *= M2
    h ^= h >> 33
    return h


cdef inline uint64_t tail(const uint8_t* p, int64_t n) noexcept nogil:
    """The last ``n`` (< 8) bytes at ``p`` as the low bytes of a word, byte by byte (a
    short copy into a word stalls the load that follows it)."""
    cdef uint64_t w = 0
    cdef int64_t k
    for k in range(n):
        w |= <uint64_t>p[k] << (8 * k)
    return w


cdef inline uint64_t hash_key(const uint8_t* p, int64_t n, uint32_t unit,
                              uint32_t cid) noexcept nogil:
    cdef uint64_t h = ((<uint64_t>unit << 32) | cid) * M3 + <uint64_t>n
    cdef uint64_t w
    while n >= 8:
        memcpy(&w, p, 8)
        h = (h ^ w) * M4
        h ^= h >> 31
        p += 8
        n -= 8
    if n:
        h = (h ^ tail(p, n)) * M5
    return fmix(h)


cdef inline bint same_bytes(const uint8_t* a, const uint8_t* b, int64_t n) noexcept nogil:
    """Whether the ``n`` bytes at ``a`` and ``b`` are equal (short keys: no call)."""
    cdef uint64_t x, y
    while n >= 8:
        memcpy(&x, a, 8)
        memcpy(&y, b, 8)
        if x != y:
            return False
        a += 8
        b += 8
        n -= 8
    return tail(a, n) == tail(b, n)


cdef struct Doc:            # a document of a KeyIndex
    uint64_t hash
    int64_t off              # its key in the index's data
    uint32_t length
    uint32_t unit
    uint32_t cid


cdef struct Sorted:         # a document being sorted: its order fields and position
    uint64_t group           # vbucket << 32 | collection id
    uint64_t w0, w1          # key bytes 0..7 and 8..15, big-endian, zero-padded
    int64_t doc
    int64_t pos


cdef inline uint64_t word(const uint8_t* p, int64_t n) noexcept nogil:
    cdef uint64_t w = 0
    if n > 8:
        n = 8
    if n > 0:
        memcpy(&w, p, n)
    return DCP_BE64(w)


cdef struct Keys:           # the key bytes a sort compares
    const uint8_t* data
    const Doc* docs


cdef inline bint before(const Keys* keys, const Sorted* x, const Sorted* y) noexcept nogil:
    """Whether ``x`` sorts strictly before ``y``."""
    cdef int64_t lx, ly, common
    cdef int c
    if x.group != y.group:
        return x.group < y.group
    if x.w0 != y.w0:
        return x.w0 < y.w0
    if x.w1 != y.w1:
        return x.w1 < y.w1
    lx, ly = keys.docs[x.doc].length, keys.docs[y.doc].length
    common = (lx if lx < ly else ly) - 16
    if common > 0:
        c = memcmp(keys.data + keys.docs[x.doc].off + 16,
                   keys.data + keys.docs[y.doc].off + 16, common)
        if c != 0:
            return c < 0
    if lx != ly:
        return lx < ly
    return x.pos < y.pos


cdef inline bint same_key(const Keys* keys, const Sorted* x, const Sorted* y) noexcept nogil:
    """Whether ``x`` and ``y`` have the same vbucket, collection and key."""
    cdef int64_t lx = keys.docs[x.doc].length
    return x.group == y.group and x.w0 == y.w0 and x.w1 == y.w1 \
        and lx == keys.docs[y.doc].length \
        and (lx <= 16 or memcmp(keys.data + keys.docs[x.doc].off + 16,
                                keys.data + keys.docs[y.doc].off + 16, lx - 16) == 0)


cdef Sorted* radix_sort(const Keys* keys, Sorted* a, Sorted* b, Py_ssize_t n) noexcept nogil:
    """Sort ``a`` (``b`` the scratch), stable: least significant digit first over the
    16-bit digits of ``w0`` and ``group`` (digits the same in every element skipped),
    then each run that ties on both by ``merge_sort`` (on ``w1`` and the rest of the
    key); returns whichever of the two holds the result (NULL: no memory)."""
    cdef int64_t* count = <int64_t*>malloc(65537 * sizeof(int64_t))
    cdef uint64_t ands[3]
    cdef uint64_t ors[3]
    cdef uint64_t key
    cdef Py_ssize_t i, j, f
    cdef int shift
    cdef Sorted* t
    cdef Sorted* part
    if count == NULL:
        return NULL
    ands[0] = ands[1] = ands[2] = U64_MAX
    ors[0] = ors[1] = ors[2] = 0
    for i in range(n):
        ands[0] &= a[i].w1
        ors[0] |= a[i].w1
        ands[1] &= a[i].w0
        ors[1] |= a[i].w0
        ands[2] &= a[i].group
        ors[2] |= a[i].group
    for f in range(1, 3):
        for shift in range(0, 64, 16):
            if not (((ands[f] ^ ors[f]) >> shift) & 0xFFFF):
                continue
            memset(count, 0, 65537 * sizeof(int64_t))
            for i in range(n):
                key = a[i].w1 if f == 0 else (a[i].w0 if f == 1 else a[i].group)
                count[((key >> shift) & 0xFFFF) + 1] += 1
            for j in range(1, 65537):        # count[d]: where digit d's elements start
                count[j] += count[j - 1]
            for i in range(n):
                key = a[i].w1 if f == 0 else (a[i].w0 if f == 1 else a[i].group)
                j = count[(key >> shift) & 0xFFFF]
                count[(key >> shift) & 0xFFFF] = j + 1
                b[j] = a[i]
            t = a
            a = b
            b = t
    free(count)
    i = 0
    while i < n:
        j = i + 1
        while j < n and a[j].group == a[i].group and a[j].w0 == a[i].w0:
            j += 1
        if j - i > 1:
            part = merge_sort(keys, a + i, b + i, j - i)
            if part != a + i:
                memcpy(a + i, part, (j - i) * sizeof(Sorted))
        i = j
    return a


cdef Sorted* merge_sort(const Keys* keys, Sorted* a, Sorted* b, Py_ssize_t n) noexcept nogil:
    """Sort ``a`` (``b`` the scratch): runs of 16 by insertion, then bottom-up merges;
    returns whichever of the two holds the result."""
    cdef Py_ssize_t width, lo, mid, hi, i, j, k
    cdef Sorted* t
    cdef Sorted tmp
    for lo in range(0, n, 16):
        hi = lo + 16 if lo + 16 < n else n
        for i in range(lo + 1, hi):
            tmp = a[i]
            j = i
            while j > lo and before(keys, &tmp, &a[j - 1]):
                a[j] = a[j - 1]
                j -= 1
            a[j] = tmp
    width = 16
    while width < n:
        lo = 0
        while lo < n:
            mid = lo + width if lo + width < n else n
            hi = lo + 2 * width if lo + 2 * width < n else n
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if before(keys, &a[j], &a[i]):
                    b[k] = a[j]
                    j += 1
                else:
                    b[k] = a[i]
                    i += 1
                k += 1
            while i < mid:
                b[k] = a[i]
                i += 1
                k += 1
            while j < hi:
                b[k] = a[j]
                j += 1
                k += 1
            lo = hi
        t = a
        a = b
        b = t
        width *= 2
    return a


cdef struct Pair:           # a (stream, collection) of a KeyIndex, and its first document
    uint64_t key             # unit << 32 | collection id
    int64_t first            # -1: an empty slot


cdef class KeyIndex


cdef Pair* pair_slot(KeyIndex ix, uint64_t key) noexcept nogil:
    """The slot of ``key`` in the pair table: its own, or the empty one it would take."""
    cdef uint64_t at = fmix(key) & ix.pair_mask
    while ix.pairs[at].first >= 0 and ix.pairs[at].key != key:
        at = (at + 1) & ix.pair_mask
    return &ix.pairs[at]


cdef int rehash_pairs(KeyIndex ix, int64_t size) noexcept nogil:
    """The pair table at ``size`` slots (a power of two), every pair placed again."""
    cdef Pair* old = ix.pairs
    cdef int64_t k, n = <int64_t>ix.pair_mask + 1 if old != NULL else 0
    cdef Pair* slot
    ix.pairs = <Pair*>malloc(size * sizeof(Pair))
    if ix.pairs == NULL:
        ix.pairs = old
        return -1
    for k in range(size):
        ix.pairs[k].first = -1
    ix.pair_mask = <uint64_t>size - 1
    for k in range(n):
        if old[k].first >= 0:
            slot = pair_slot(ix, old[k].key)
            slot[0] = old[k]
    free(old)
    return 0


cdef int grow_docs(KeyIndex ix, int64_t cap) noexcept nogil:
    cdef Doc* grown
    if <uint64_t>cap >= LOW:
        return -1                            # ids must fit a table entry's 32 bits
    grown = <Doc*>realloc(ix.docs, cap * sizeof(Doc))
    if grown == NULL:
        return -1
    ix.docs, ix.cap = grown, cap
    return 0


cdef int grow_data(KeyIndex ix, int64_t cap) noexcept nogil:
    cdef uint8_t* grown = <uint8_t*>realloc(ix.data, cap)
    if grown == NULL:
        return -1
    ix.data, ix.data_cap = grown, cap
    return 0


cdef int rehash(KeyIndex ix, int64_t size) noexcept nogil:
    """The table at ``size`` entries (a power of two), every document placed again."""
    cdef uint64_t* table = <uint64_t*>calloc(size, sizeof(uint64_t))
    cdef uint64_t mask = <uint64_t>size - 1, at, h
    cdef int64_t d
    if table == NULL:
        return -1
    for d in range(ix.n):
        h = ix.docs[d].hash
        at = h & mask
        while table[at]:
            at = (at + 1) & mask
        table[at] = (h & HIGH) | <uint64_t>(d + 1)
    free(ix.table)
    ix.table, ix.mask = table, mask
    return 0


cdef int64_t find(KeyIndex ix, const uint8_t* p, int64_t length, uint32_t unit,
                  uint32_t cid, uint64_t h) noexcept nogil:
    """The id of the document of hash ``h``, added if new (-1: no memory)."""
    cdef uint64_t slot = h & ix.mask, entry
    cdef int64_t d
    cdef Doc* doc
    cdef Pair* pair
    while True:
        entry = ix.table[slot]
        if entry == 0:
            break
        if (entry & HIGH) == (h & HIGH):
            d = <int64_t>(entry & LOW) - 1
            doc = &ix.docs[d]
            if doc.unit == unit and doc.cid == cid and doc.length == length \
                    and same_bytes(ix.data + doc.off, p, length):
                return d
        slot = (slot + 1) & ix.mask
    if ix.n == ix.cap and grow_docs(ix, 2 * ix.cap) < 0:
        return -1
    if ix.data_len + length > ix.data_cap \
            and grow_data(ix, max(2 * ix.data_cap, ix.data_len + length)) < 0:
        return -1
    d = ix.n
    ix.n += 1
    doc = &ix.docs[d]
    doc.hash, doc.off, doc.length, doc.unit, doc.cid = h, ix.data_len, length, unit, cid
    pair = pair_slot(ix, (<uint64_t>unit << 32) | cid)
    if pair.first < 0:
        pair.key, pair.first = (<uint64_t>unit << 32) | cid, d
        ix.n_pairs += 1
        if 2 * ix.n_pairs > <int64_t>(ix.pair_mask + 1) \
                and rehash_pairs(ix, 2 * <int64_t>(ix.pair_mask + 1)) < 0:
            return -1
    if length:
        memcpy(ix.data + ix.data_len, p, length)
    ix.data_len += length
    if 2 * ix.n > <int64_t>(ix.mask + 1):
        if rehash(ix, 2 * <int64_t>(ix.mask + 1)) < 0:
            return -1
    else:
        ix.table[slot] = (h & HIGH) | <uint64_t>(d + 1)
    return d


cdef class KeyIndex:
    """Dense document ids (``pystate.KeyIndex``): an open-addressing hash table over the
    (stream, collection, key) of each document, whose key bytes it keeps in one buffer.
    A table entry holds a document's id plus one (0: empty) in its low 32 bits and the
    high 32 bits of its hash above them, so that most probes touch no document; the table
    is kept at most half full as it grows."""

    cdef uint8_t* data
    cdef int64_t data_len, data_cap
    cdef Doc* docs
    cdef int64_t n, cap
    cdef uint64_t* table
    cdef uint64_t mask
    cdef Pair* pairs                # (stream, collection) -> its first document
    cdef int64_t n_pairs
    cdef uint64_t pair_mask

    def __cinit__(self):
        self.n = self.cap = self.data_len = self.data_cap = self.n_pairs = 0
        self.data = NULL
        self.docs = NULL
        self.table = NULL
        self.pairs = NULL
        if grow_docs(self, 1024) < 0 or grow_data(self, 16384) < 0 or rehash(self, 2048) < 0 \
                or rehash_pairs(self, 64) < 0:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)
        free(self.docs)
        free(self.table)
        free(self.pairs)

    def __len__(self):
        return self.n

    def ids(self, buf, const int64_t[::1] starts, const int64_t[::1] lengths,
            const uint32_t[::1] unit, const uint32_t[::1] cid):
        """The id of each document (``pystate.KeyIndex.ids``)."""
        view = memoryview(buf)
        cdef const uint8_t[::1] data = view if view.format == "B" else view.cast("B")
        cdef Py_ssize_t n = starts.shape[0], i
        cdef int64_t d = 0
        cdef const uint8_t* base
        if lengths.shape[0] != n or unit.shape[0] != n or cid.shape[0] != n:
            raise ValueError("every column needs one value per key")
        for i in range(n):
            if starts[i] < 0 or lengths[i] < 0 or lengths[i] >= 0xFFFFFFFF \
                    or starts[i] + lengths[i] > data.shape[0]:
                raise ValueError("a key outside the buffer")
        out = np.empty(n, np.int64)
        cdef int64_t[::1] ids = out
        if n == 0:
            return out
        base = &data[0] if data.shape[0] else <const uint8_t*>_nothing
        cdef uint64_t ring[AHEAD]
        cdef int64_t near[AHEAD]
        cdef uint64_t entry
        cdef Py_ssize_t j
        with nogil:
            # a pipeline: the table slot of the key AHEAD on, the document of the one
            # AHEAD / 2 on (its table entry arrived) and the key bytes of the one AHEAD / 4
            # on (its document arrived) are fetched while this one is found
            for j in range(min(n, AHEAD)):
                ring[j] = hash_key(base + starts[j], lengths[j], unit[j], cid[j])
                near[j] = -1
                DCP_PREFETCH(&self.table[ring[j] & self.mask])
            for i in range(n):
                j = i + AHEAD // 2
                if j < n:
                    entry = self.table[ring[j % AHEAD] & self.mask]
                    near[j % AHEAD] = -1
                    if entry and (entry & HIGH) == (ring[j % AHEAD] & HIGH):
                        d = <int64_t>(entry & LOW) - 1
                        if d < self.n:
                            near[j % AHEAD] = d
                            DCP_PREFETCH(&self.docs[d])
                j = i + AHEAD // 4
                if j < n and near[j % AHEAD] >= 0 and near[j % AHEAD] < self.n:
                    DCP_PREFETCH(self.data + self.docs[near[j % AHEAD]].off)
                d = find(self, base + starts[i], lengths[i], unit[i], cid[i],
                         ring[i % AHEAD])
                if d < 0:
                    break
                ids[i] = d
                j = i + AHEAD
                if j < n:
                    ring[j % AHEAD] = hash_key(base + starts[j], lengths[j], unit[j], cid[j])
                    near[j % AHEAD] = -1
                    DCP_PREFETCH(&self.table[ring[j % AHEAD] & self.mask])
        if d < 0:
            raise MemoryError()
        return out

    cdef int _check(self, const int64_t[::1] ids) except -1:
        cdef Py_ssize_t i
        for i in range(ids.shape[0]):
            if not 0 <= ids[i] < self.n:
                raise ValueError(f"document id {ids[i]} outside 0..{self.n - 1}")
        return 0

    def firsts(self, const uint32_t[::1] unit, const uint32_t[::1] cid):
        """The first document of each (stream, collection) (``pystate.KeyIndex.firsts``)."""
        cdef Py_ssize_t n = unit.shape[0], i
        if cid.shape[0] != n:
            raise ValueError("one collection per stream")
        out = np.empty(n, np.int64)
        cdef int64_t[::1] found = out
        for i in range(n):
            found[i] = pair_slot(self, (<uint64_t>unit[i] << 32) | cid[i]).first
        return out

    def keys(self, const int64_t[::1] ids):
        """The key bytes of ``ids`` as Arrow binary buffers (``pystate.KeyIndex.keys``)."""
        cdef Py_ssize_t n = ids.shape[0], i
        cdef int64_t total = 0, d, length
        self._check(ids)
        for i in range(n):
            total += self.docs[ids[i]].length
        offsets_arr = np.empty(n + 1, np.int64)
        data_arr = np.empty(total, np.uint8)
        cdef int64_t[::1] offsets = offsets_arr
        cdef uint8_t[::1] out = data_arr
        offsets[0] = 0
        with nogil:
            for i in range(n):
                d = ids[i]
                length = self.docs[d].length
                if length:
                    memcpy(&out[offsets[i]], self.data + self.docs[d].off, length)
                offsets[i + 1] = offsets[i] + length
        return offsets_arr, data_arr

    def streams(self, const int64_t[::1] ids):
        """The stream and collection id of ``ids`` (``pystate.KeyIndex.streams``)."""
        cdef Py_ssize_t n = ids.shape[0], i
        self._check(ids)
        units_arr = np.empty(n, np.uint32)
        cids_arr = np.empty(n, np.uint32)
        cdef uint32_t[::1] units = units_arr
        cdef uint32_t[::1] cids = cids_arr
        for i in range(n):
            units[i], cids[i] = self.docs[ids[i]].unit, self.docs[ids[i]].cid
        return units_arr, cids_arr

    def order(self, const int64_t[::1] ids):
        """``ids``' positions in key order, and the ties (``pystate.KeyIndex.order``): a
        radix sort on each document's vbucket, collection and first 16 key bytes, then a
        merge sort of the runs where those tie, on the rest of their keys."""
        cdef Py_ssize_t n = ids.shape[0], i
        cdef int64_t d, length
        cdef Sorted* a = NULL
        cdef Sorted* b = NULL
        cdef Sorted* done
        cdef Keys keys
        self._check(ids)
        out = np.empty(n, np.int64)
        ties_arr = np.zeros(n, np.uint8)
        cdef int64_t[::1] order = out
        cdef uint8_t[::1] ties = ties_arr
        if n == 0:
            return out, ties_arr.view(bool)
        keys.data, keys.docs = self.data, self.docs
        a = <Sorted*>malloc(n * sizeof(Sorted))
        b = <Sorted*>malloc(n * sizeof(Sorted))
        try:
            if a == NULL or b == NULL:
                raise MemoryError()
            with nogil:
                for i in range(n):
                    d = ids[i]
                    length = self.docs[d].length
                    a[i].group = (<uint64_t>(self.docs[d].unit >> 16) << 32) \
                        | self.docs[d].cid
                    a[i].w0 = word(self.data + self.docs[d].off, length)
                    a[i].w1 = word(self.data + self.docs[d].off + 8, length - 8)
                    a[i].doc, a[i].pos = d, i
                done = radix_sort(&keys, a, b, n)
                if done == NULL:
                    with gil:
                        raise MemoryError()
                for i in range(n):
                    order[i] = done[i].pos
                    ties[i] = i > 0 and same_key(&keys, &done[i], &done[i - 1])
        finally:
            free(a)
            free(b)
        return out, ties_arr.view(bool)
