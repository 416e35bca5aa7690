# Documents in key order: a radix sort on each one's vbucket and collection, then each
# group by the digits of its first 16 key bytes, most significant first, and merges of the
# small parts that leaves (``KeyIndex.order``).

# -- documents in key order --------------------------------------------------------------

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


# the most bits of a key digit: the write heads of its 2^11 buckets stay in the cache
DEF DIGIT = 11
# a part of at most this many documents is merge-sorted, not split by another digit
DEF SMALL_PART = 32


cdef int group_passes(Sorted* a, Sorted* b, Py_ssize_t n, Sorted** out) noexcept nogil:
    """Sort ``a`` (``b`` the scratch) stably on ``group``, least significant 16-bit digit
    first, the digits the same in every element skipped; ``out``: whichever of the two
    holds the result. -1: no memory."""
    cdef int64_t* count = NULL
    cdef uint64_t ands = U64_MAX, ors = 0
    cdef Py_ssize_t i, j
    cdef int shift
    cdef Sorted* t
    for i in range(n):
        ands &= a[i].group
        ors |= a[i].group
    for shift in range(0, 64, 16):
        if not (((ands ^ ors) >> shift) & 0xFFFF):
            continue
        if count == NULL:
            count = <int64_t*>malloc(65537 * sizeof(int64_t))
            if count == NULL:
                return -1
        memset(count, 0, 65537 * sizeof(int64_t))
        for i in range(n):
            count[((a[i].group >> shift) & 0xFFFF) + 1] += 1
        for j in range(1, 65537):            # count[d]: where digit d's elements start
            count[j] += count[j - 1]
        for i in range(n):
            j = count[(a[i].group >> shift) & 0xFFFF]
            count[(a[i].group >> shift) & 0xFFFF] = j + 1
            b[j] = a[i]
        t = a
        a = b
        b = t
    free(count)
    out[0] = a
    return 0


cdef Sorted* radix_sort(const Keys* keys, Sorted* a, Sorted* b, Py_ssize_t n) noexcept nogil:
    """Sort ``a`` (``b`` the scratch): by ``group`` (``group_passes``), then each group on
    its keys (``key_digits``); returns whichever of the two holds the result (NULL: no
    memory)."""
    cdef Py_ssize_t i, j
    cdef Sorted* done
    cdef Sorted* other
    if group_passes(a, b, n, &done) < 0:
        return NULL
    other = b if done == a else a
    i = 0
    while i < n:
        j = i + 1
        while j < n and done[j].group == done[i].group:
            j += 1
        if j - i > 1 and key_digits(keys, done + i, other + i, j - i, 1) < 0:
            return NULL
        i = j
    return done


cdef int key_digits(const Keys* keys, Sorted* a, Sorted* b, Py_ssize_t n,
                    int f) noexcept nogil:
    """Sort ``a`` in place (``b`` the scratch) on ``w0``, ``w1`` (from field ``f``: 1
    ``w0``, 0 ``w1``) and the rest of the key, most significant digit first: the elements
    go to buckets by the highest bits (at most ``DIGIT``, about eight elements a bucket)
    not the same in all of them, then each bucket the same way; a small part is
    merge-sorted. -1: no memory."""
    cdef uint64_t ands, ors, key, diff, mask
    cdef int64_t* count
    cdef Py_ssize_t i, j, start
    cdef int top, shift, width = DIGIT
    cdef Sorted* part
    while width > 3 and (<Py_ssize_t>1 << (width + 3)) > n:
        width -= 1
    mask = (<uint64_t>1 << width) - 1
    while n > SMALL_PART and f >= 0:
        ands, ors = U64_MAX, 0
        for i in range(n):
            key = a[i].w0 if f == 1 else a[i].w1
            ands &= key
            ors |= key
        diff = ands ^ ors
        if not diff:
            f -= 1
            continue
        top = 63
        while not (diff >> top) & 1:
            top -= 1
        shift = top - width + 1 if top >= width - 1 else 0
        count = <int64_t*>calloc(mask + 2, sizeof(int64_t))
        if count == NULL:
            return -1
        for i in range(n):
            key = a[i].w0 if f == 1 else a[i].w1
            count[((key >> shift) & mask) + 1] += 1
        for j in range(1, <Py_ssize_t>mask + 2):   # count[d]: where digit d's start
            count[j] += count[j - 1]
        for i in range(n):
            key = a[i].w0 if f == 1 else a[i].w1
            j = count[(key >> shift) & mask]
            count[(key >> shift) & mask] = j + 1
            b[j] = a[i]
        memcpy(a, b, n * sizeof(Sorted))
        start = 0                            # count[d]: where digit d's elements end
        for j in range(<Py_ssize_t>mask + 1):
            if count[j] - start > 1 and key_digits(keys, a + start, b + start,
                                                   count[j] - start, f) < 0:
                free(count)
                return -1
            start = count[j]
        free(count)
        return 0
    if n > 1:
        part = merge_sort(keys, a, b, n)
        if part != a:
            memcpy(a, part, n * sizeof(Sorted))
    return 0


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


cdef int place_by_rank(const int64_t* ids, Py_ssize_t n, const int64_t* rank,
                       int64_t ranks, int64_t* order, uint8_t* ties) noexcept nogil:
    """``order``: the positions of ``ids`` by the rank of each id (``rank``, of
    ``ranks``), in order within a rank (a counting sort); ``ties`` (all 1 before) 0 at each
    rank's first. -1: no memory."""
    cdef size_t span = 0
    cdef int64_t* start = <int64_t*>scratch((ranks + 1) * sizeof(int64_t), &span)
    cdef Py_ssize_t i
    cdef int64_t k
    if start == NULL:
        return -1
    memset(start, 0, (ranks + 1) * sizeof(int64_t))
    for i in range(n):
        start[rank[ids[i]] + 1] += 1
    for k in range(ranks):                   # where each rank's positions start
        start[k + 1] += start[k]
        ties[start[k]] = 0
    for i in range(n):
        k = rank[ids[i]]
        order[start[k]] = i
        start[k] += 1
    unscratch(start, span)
    return 0


# -- versions of a document in seqno order -----------------------------------------------

DEF FEW = 16                # versions of a document sorted in place (insertion)


cdef struct Version:        # a version being ordered within its document
    uint64_t seqno
    int64_t gpos
    int64_t pos


cdef inline bint version_before(uint64_t sa, int64_t ga, int64_t pa, uint64_t sb, int64_t gb,
                                int64_t pb) noexcept nogil:
    if sa != sb:
        return sa < sb
    if ga != gb:
        return ga < gb
    return pa < pb


cdef int version_cmp(const void* a, const void* b) noexcept nogil:
    cdef const Version* x = <const Version*>a
    cdef const Version* y = <const Version*>b
    if version_before(x.seqno, x.gpos, x.pos, y.seqno, y.gpos, y.pos):
        return -1
    return 1 if version_before(y.seqno, y.gpos, y.pos, x.seqno, x.gpos, x.pos) else 0


cdef int sort_within(int64_t* order, const uint8_t* ties, Py_ssize_t n, const uint64_t* seqno,
                     const int64_t* gpos, uint64_t* in_order) noexcept nogil:
    """Each run of ``order`` of one rank (``ties`` 1 after its first) in the order of its
    positions' (``seqno``, ``gpos``), positions in order where both tie, and the seqnos
    in that order in ``in_order``: the seqnos are gathered first (loads that do not wait
    on each other), runs already in order are passed over in one look, a few out of
    order sorted in place, more by ``qsort`` (never quadratic, whatever the stream). -1:
    no memory."""
    cdef Py_ssize_t lo = 0, hi, i, j, size, room_size = 0
    cdef int64_t p
    cdef uint64_t s
    cdef bint ordered
    cdef Version* room = NULL
    cdef Version* grown
    for i in range(n):
        in_order[i] = seqno[order[i]]
    while lo < n:
        hi = lo + 1
        ordered = True
        while hi < n and ties[hi]:
            if ordered and (in_order[hi] < in_order[hi - 1]
                            or (in_order[hi] == in_order[hi - 1]
                                and gpos[order[hi]] < gpos[order[hi - 1]])):
                ordered = False
            hi += 1
        size = hi - lo
        if not ordered and size <= FEW:
            for i in range(lo + 1, hi):
                p, s = order[i], in_order[i]
                j = i
                while j > lo and version_before(s, gpos[p], p, in_order[j - 1],
                                                gpos[order[j - 1]], order[j - 1]):
                    order[j], in_order[j] = order[j - 1], in_order[j - 1]
                    j -= 1
                order[j], in_order[j] = p, s
        elif not ordered:
            if size > room_size:
                grown = <Version*>realloc(room, size * sizeof(Version))
                if grown == NULL:
                    free(room)
                    return -1
                room, room_size = grown, size
            for i in range(size):
                p = order[lo + i]
                room[i].seqno, room[i].gpos, room[i].pos = in_order[lo + i], gpos[p], p
            qsort(room, size, sizeof(Version), version_cmp)
            for i in range(size):
                order[lo + i], in_order[lo + i] = room[i].pos, room[i].seqno
        lo = hi
    free(room)
    return 0
