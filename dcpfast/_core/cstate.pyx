# cython: language_level=3
"""The per-row loops of the stream checks and of the document state, compiled; ``pystate``
is the pure-Python twin, with the same names and signatures, and its docstrings say what
each function is given and answers. The loops run without the GIL and make no Python
object per row: ``check_streams`` and ``walk_state`` step through the rows of a stretch
keeping each stream's state in a row of a uint64 array, ``KeyIndex`` hashes documents to
dense ids and sorts them in key order.
"""

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np

from . import contract as C
from .wire cimport DCP_BE64

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
          "K_FLOOR": K_FLOOR, "K_LOST": K_LOST, "K_FRESH": K_FRESH}
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
                    if row >= 0:
                        point[row], known[row] = p, 1
                    else:
                        carried_slots.append(s)
                        carried_points.append(p)
                    restarted(st, p, not (bits & COMPLETED))
                    bits &= ~(<uint64_t>LAZY)
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


cdef inline uint64_t fmix(uint64_t h) noexcept nogil:
    h ^= h >> 33
    h *= M1
    h ^= h >> 33
    h *= M2
    h ^= h >> 33
    return h


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
        w = 0
        memcpy(&w, p, n)
        h = (h ^ w) * M5
    return fmix(h)


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
    const int64_t* offs


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
    lx = keys.offs[x.doc + 1] - keys.offs[x.doc]
    ly = keys.offs[y.doc + 1] - keys.offs[y.doc]
    common = (lx if lx < ly else ly) - 16
    if common > 0:
        c = memcmp(keys.data + keys.offs[x.doc] + 16, keys.data + keys.offs[y.doc] + 16,
                   common)
        if c != 0:
            return c < 0
    if lx != ly:
        return lx < ly
    return x.pos < y.pos


cdef inline bint same_key(const Keys* keys, const Sorted* x, const Sorted* y) noexcept nogil:
    """Whether ``x`` and ``y`` have the same vbucket, collection and key."""
    cdef int64_t lx = keys.offs[x.doc + 1] - keys.offs[x.doc]
    cdef int64_t ly = keys.offs[y.doc + 1] - keys.offs[y.doc]
    return x.group == y.group and x.w0 == y.w0 and x.w1 == y.w1 and lx == ly and \
        (lx <= 16 or memcmp(keys.data + keys.offs[x.doc] + 16,
                            keys.data + keys.offs[y.doc] + 16, lx - 16) == 0)


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


cdef class KeyIndex:
    """Dense document ids (``pystate.KeyIndex``): an open-addressing hash table over the
    (stream, collection, key) of each document, whose key bytes it keeps in one buffer."""

    cdef uint8_t* data
    cdef int64_t data_len, data_cap
    cdef int64_t* offs              # n + 1 offsets into data
    cdef uint32_t* units
    cdef uint32_t* cids
    cdef uint64_t* hashes
    cdef int64_t n, cap
    cdef int64_t* table
    cdef uint64_t mask

    def __cinit__(self):
        self.n, self.cap, self.data_len, self.data_cap = 0, 0, 0, 0
        self.data = NULL
        self.offs = NULL
        self.units = self.cids = NULL
        self.hashes = NULL
        self.table = NULL
        self._grow_docs(1024)
        self._grow_data(16384)
        self._rehash(2048)
        self.offs[0] = 0

    def __dealloc__(self):
        free(self.data)
        free(self.offs)
        free(self.units)
        free(self.cids)
        free(self.hashes)
        free(self.table)

    def __len__(self):
        return self.n

    cdef int _grow_docs(self, int64_t cap) except -1:
        cdef void* p
        p = realloc(self.offs, (cap + 1) * sizeof(int64_t))
        if p == NULL:
            raise MemoryError()
        self.offs = <int64_t*>p
        p = realloc(self.units, cap * sizeof(uint32_t))
        if p == NULL:
            raise MemoryError()
        self.units = <uint32_t*>p
        p = realloc(self.cids, cap * sizeof(uint32_t))
        if p == NULL:
            raise MemoryError()
        self.cids = <uint32_t*>p
        p = realloc(self.hashes, cap * sizeof(uint64_t))
        if p == NULL:
            raise MemoryError()
        self.hashes = <uint64_t*>p
        self.cap = cap
        return 0

    cdef int _grow_data(self, int64_t cap) except -1:
        cdef void* p = realloc(self.data, cap)
        if p == NULL:
            raise MemoryError()
        self.data = <uint8_t*>p
        self.data_cap = cap
        return 0

    cdef int _rehash(self, int64_t size) except -1:
        cdef int64_t* table = <int64_t*>malloc(size * sizeof(int64_t))
        cdef int64_t d
        cdef uint64_t mask = <uint64_t>size - 1, at
        if table == NULL:
            raise MemoryError()
        memset(table, 0xFF, size * sizeof(int64_t))
        for d in range(self.n):
            at = self.hashes[d] & mask
            while table[at] >= 0:
                at = (at + 1) & mask
            table[at] = d
        free(self.table)
        self.table, self.mask = table, mask
        return 0

    def ids(self, buf, const int64_t[::1] starts, const int64_t[::1] lengths,
            const uint32_t[::1] unit, const uint32_t[::1] cid):
        """The id of each document (``pystate.KeyIndex.ids``)."""
        cdef const uint8_t[::1] data = buf
        cdef Py_ssize_t n = starts.shape[0], i
        cdef int64_t total = 0, d, length, at
        cdef uint64_t h, slot
        cdef const uint8_t* p
        if lengths.shape[0] != n or unit.shape[0] != n or cid.shape[0] != n:
            raise ValueError("every column needs one value per key")
        for i in range(n):
            if starts[i] < 0 or lengths[i] < 0 or starts[i] + lengths[i] > data.shape[0]:
                raise ValueError("a key outside the buffer")
            total += lengths[i]
        out = np.empty(n, np.int64)
        cdef int64_t[::1] ids = out
        # room for every key being new: the loop below then never allocates
        if self.n + n > self.cap:
            self._grow_docs(max(2 * self.cap, self.n + n))
        if self.data_len + total > self.data_cap:
            self._grow_data(max(2 * self.data_cap, self.data_len + total))
        if 2 * (self.n + n) > <int64_t>(self.mask + 1):
            size = <int64_t>(self.mask + 1)
            while 2 * (self.n + n) > size:
                size *= 2
            self._rehash(size)
        if n == 0:
            return out
        with nogil:
            for i in range(n):
                p = &data[0] + starts[i]
                length = lengths[i]
                h = hash_key(p, length, unit[i], cid[i])
                slot = h & self.mask
                while True:
                    d = self.table[slot]
                    if d < 0:
                        d = self.n
                        self.table[slot] = d
                        self.hashes[d], self.units[d], self.cids[d] = h, unit[i], cid[i]
                        at = self.offs[d]
                        if length:
                            memcpy(self.data + at, p, length)
                        self.offs[d + 1] = at + length
                        self.data_len = at + length
                        self.n += 1
                        break
                    if self.hashes[d] == h and self.units[d] == unit[i] \
                            and self.cids[d] == cid[i] \
                            and self.offs[d + 1] - self.offs[d] == length \
                            and (length == 0
                                 or memcmp(self.data + self.offs[d], p, length) == 0):
                        break
                    slot = (slot + 1) & self.mask
                ids[i] = d
        return out

    cdef int _check(self, const int64_t[::1] ids) except -1:
        cdef Py_ssize_t i
        for i in range(ids.shape[0]):
            if not 0 <= ids[i] < self.n:
                raise ValueError(f"document id {ids[i]} outside 0..{self.n - 1}")
        return 0

    def keys(self, const int64_t[::1] ids):
        """The key bytes of ``ids`` as Arrow binary buffers (``pystate.KeyIndex.keys``)."""
        cdef Py_ssize_t n = ids.shape[0], i
        cdef int64_t total = 0, d, length
        self._check(ids)
        for i in range(n):
            total += self.offs[ids[i] + 1] - self.offs[ids[i]]
        offsets_arr = np.empty(n + 1, np.int64)
        data_arr = np.empty(total, np.uint8)
        cdef int64_t[::1] offsets = offsets_arr
        cdef uint8_t[::1] out = data_arr
        offsets[0] = 0
        with nogil:
            for i in range(n):
                d = ids[i]
                length = self.offs[d + 1] - self.offs[d]
                if length:
                    memcpy(&out[offsets[i]], self.data + self.offs[d], length)
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
            units[i], cids[i] = self.units[ids[i]], self.cids[ids[i]]
        return units_arr, cids_arr

    def order(self, const int64_t[::1] ids):
        """``ids``' positions in key order, and the ties (``pystate.KeyIndex.order``): a
        merge sort on each document's vbucket, collection and first 16 key bytes, the rest
        of the key compared only where those tie."""
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
        keys.data, keys.offs = self.data, self.offs
        a = <Sorted*>malloc(n * sizeof(Sorted))
        b = <Sorted*>malloc(n * sizeof(Sorted))
        try:
            if a == NULL or b == NULL:
                raise MemoryError()
            with nogil:
                for i in range(n):
                    d = ids[i]
                    length = self.offs[d + 1] - self.offs[d]
                    a[i].group = (<uint64_t>(self.units[d] >> 16) << 32) | self.cids[d]
                    a[i].w0 = word(self.data + self.offs[d], length)
                    a[i].w1 = word(self.data + self.offs[d] + 8, length - 8)
                    a[i].doc, a[i].pos = d, i
                done = merge_sort(&keys, a, b, n)
                for i in range(n):
                    order[i] = done[i].pos
                    ties[i] = i > 0 and same_key(&keys, &done[i], &done[i - 1])
        finally:
            free(a)
            free(b)
        return out, ties_arr.view(bool)
