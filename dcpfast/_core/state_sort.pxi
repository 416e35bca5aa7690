# Documents in key order: a radix sort on each one's vbucket and collection, then each
# group by merges (small) or by the digits of its first 16 key bytes and merges of the
# runs that tie on those (large) (``KeyIndex.order``).

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


DEF SMALL_GROUP = 2048       # a group sorted by merges below this, by digits above


cdef int digit_passes(Sorted* a, Sorted* b, Py_ssize_t n, int first, int last,
                      Sorted** out) noexcept nogil:
    """Sort ``a`` (``b`` the scratch) stably, least significant digit first, on the 16-bit
    digits of the fields ``first`` to ``last`` (0: ``w1``, 1: ``w0``, 2: ``group``), the
    digits the same in every element skipped; ``out``: whichever of the two holds the
    result. -1: no memory."""
    cdef int64_t* count = NULL
    cdef uint64_t ands, ors, key
    cdef Py_ssize_t i, j
    cdef int f, shift
    cdef Sorted* t
    for f in range(first, last + 1):
        ands, ors = U64_MAX, 0
        for i in range(n):
            key = a[i].w1 if f == 0 else (a[i].w0 if f == 1 else a[i].group)
            ands &= key
            ors |= key
        for shift in range(0, 64, 16):
            if not (((ands ^ ors) >> shift) & 0xFFFF):
                continue
            if count == NULL:
                count = <int64_t*>malloc(65537 * sizeof(int64_t))
                if count == NULL:
                    return -1
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
    out[0] = a
    return 0


cdef Sorted* radix_sort(const Keys* keys, Sorted* a, Sorted* b, Py_ssize_t n) noexcept nogil:
    """Sort ``a`` (``b`` the scratch), stable: by ``group`` (its 16-bit digits), then each
    group by itself: a small one by ``merge_sort`` (it fits the cache), a large one by
    the digits of ``w1`` and ``w0`` and each run that ties on both by ``merge_sort`` (on the
    rest of the key); returns whichever of the two holds the result (NULL: no memory)."""
    cdef Py_ssize_t i, j, k
    cdef Sorted* done
    cdef Sorted* other
    cdef Sorted* part
    if digit_passes(a, b, n, 2, 2, &done) < 0:
        return NULL
    other = b if done == a else a
    i = 0
    while i < n:
        j = i + 1
        while j < n and done[j].group == done[i].group:
            j += 1
        if j - i > SMALL_GROUP:
            if digit_passes(done + i, other + i, j - i, 0, 1, &part) < 0:
                return NULL
            if part != done + i:
                memcpy(done + i, part, (j - i) * sizeof(Sorted))
            k = i
            while k < j:                     # runs that tie on the first 16 key bytes
                i = k
                k = i + 1
                while k < j and done[k].w0 == done[i].w0 and done[k].w1 == done[i].w1:
                    k += 1
                if k - i > 1:
                    part = merge_sort(keys, done + i, other + i, k - i)
                    if part != done + i:
                        memcpy(done + i, part, (k - i) * sizeof(Sorted))
        elif j - i > 1:
            part = merge_sort(keys, done + i, other + i, j - i)
            if part != done + i:
                memcpy(done + i, part, (j - i) * sizeof(Sorted))
        i = j
    return done


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
    cdef int64_t* start = <int64_t*>calloc(ranks + 1, sizeof(int64_t))
    cdef Py_ssize_t i
    cdef int64_t k
    if start == NULL:
        return -1
    for i in range(n):
        start[rank[ids[i]] + 1] += 1
    for k in range(ranks):                   # where each rank's positions start
        start[k + 1] += start[k]
        ties[start[k]] = 0
    for i in range(n):
        k = rank[ids[i]]
        order[start[k]] = i
        start[k] += 1
    free(start)
    return 0
