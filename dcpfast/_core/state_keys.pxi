# Dense document ids: the hash of a document's stream, collection and key, the KeyIndex
# table and its pieces (``pystate.KeyIndex``).

# -- documents: ids, keys, order ---------------------------------------------------------

# a KeyIndex table entry: the hash's top 24 bits, and where its document's record is in
# the index's data, plus one (40 bits)
cdef uint64_t TAG = 0xFFFFFF0000000000, AT = 0xFFFFFFFFFF, LOW = 0xFFFFFFFF
DEF HEADER = 16             # a record: id, key length, stream, collection (uint32 each)
cdef char _nothing[1]       # where the keys of an empty buffer are (all empty)
DEF PREFETCH = 16           # keys whose table slot is fetched ahead of the one found
DEF CHUNK = 4096            # keys copied out of their frames, then found, at a time
DEF ROOM = 1 << 17          # the bytes they are copied to (a longer key stays in place)
DEF FAR = 64                # frames whose key is fetched ahead of the one copied


cdef extern from "keys.h":
    # the hash and the comparison of keys, a word at a time (C, so that
    # tests/c/keys_probe.c checks them on their own)
    uint64_t fmix "dcp_fmix"(uint64_t h) noexcept nogil
    uint64_t hash_key "dcp_hash_key"(const uint8_t* p, int64_t n, uint32_t unit,
                                     uint32_t cid) noexcept nogil
    bint same_bytes "dcp_same_bytes"(const uint8_t* a, const uint8_t* b,
                                     int64_t n) noexcept nogil


# the key index's tables live in spans of the memory core's working cache (``cmemory``): a
# state call's next index finds its pages resident instead of faulting in and zeroing
# fresh ones
cdef int TABLE = SPAN_HUGE | SPAN_WORK     # the flags of the index's tables


cdef int block(char** at, size_t* span, size_t keep, size_t n) noexcept nogil:
    """The table at ``at[0]`` (a span of ``span[0]`` bytes, or NULL) made to hold ``n``
    bytes, its first ``keep`` kept; -1, the table as it was, where memory ran out."""
    cdef size_t got = 0
    cdef char* moved
    if at[0] == NULL:
        moved = span_take(n, &got, TABLE)
    else:
        moved = span_grow(at[0], span[0], keep, n, &got, TABLE)
    if moved == NULL:
        return -1
    at[0], span[0] = moved, got
    return 0


cdef char* scratch(size_t n, size_t* got) noexcept nogil:
    """``n`` bytes of working memory, uninitialised: a large request a span (resident
    where the cache has one), a small one the allocator's (``cmemory.take``). NULL: no
    memory."""
    return take(n, got, SPAN_WORK)


cdef void unscratch(void* at, size_t got) noexcept nogil:
    """Give back what ``scratch`` gave (``at`` may be NULL)."""
    give(at, got, SPAN_WORK)


cdef struct Record:         # the head of a document's record in a KeyIndex's data
    uint32_t id
    uint32_t length
    uint32_t unit
    uint32_t cid


cdef struct Doc:            # a document of a KeyIndex
    uint64_t hash
    int64_t off              # its key bytes in the index's data (after its record head)
    uint32_t length
    uint32_t unit
    uint32_t cid


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
    if <uint64_t>cap >= LOW:
        return -1                            # ids must fit a table entry's 32 bits
    if block(<char**>&ix.docs, &ix.docs_span, ix.n * sizeof(Doc), cap * sizeof(Doc)) < 0:
        return -1
    ix.cap = min(<int64_t>(ix.docs_span // sizeof(Doc)), <int64_t>LOW - 1)
    return 0


cdef int grow_data(KeyIndex ix, int64_t cap) noexcept nogil:
    if block(<char**>&ix.data, &ix.data_span, ix.data_len, cap) < 0:
        return -1
    ix.data_cap = ix.data_span
    return 0


cdef int rehash(KeyIndex ix, int64_t size) noexcept nogil:
    """The table at ``size`` entries (a power of two), every document placed again."""
    cdef size_t got = 0
    cdef uint64_t* table = <uint64_t*>span_take(size * sizeof(uint64_t), &got, TABLE)
    cdef uint64_t mask = <uint64_t>size - 1, at, h
    cdef int64_t d
    if table == NULL:
        return -1
    memset(table, 0, size * sizeof(uint64_t))
    for d in range(ix.n):
        if d + PREFETCH < ix.n:              # the slot of a document further on
            DCP_PREFETCH(&table[ix.docs[d + PREFETCH].hash & mask])
        h = ix.docs[d].hash
        at = h & mask
        while table[at]:
            at = (at + 1) & mask
        table[at] = (h & TAG) | <uint64_t>(ix.docs[d].off - HEADER + 1)
    if ix.table != NULL:
        span_give(<char*>ix.table, ix.table_span, TABLE)
    ix.table, ix.mask, ix.table_span = table, mask, got
    return 0


cdef int64_t find(KeyIndex ix, const uint8_t* p, int64_t length, uint32_t unit,
                  uint32_t cid, uint64_t h) noexcept nogil:
    """The id of the document of hash ``h``, added if new (-1: no memory). A table entry
    leads to the document's record, whose head and key bytes decide (one memory access
    after the table's)."""
    cdef uint64_t slot = h & ix.mask, entry
    cdef int64_t d, size = HEADER + length
    cdef Record head
    cdef Doc* doc
    cdef Pair* pair
    while True:
        entry = ix.table[slot]
        if entry == 0:
            break
        if (entry & TAG) == (h & TAG):
            memcpy(&head, ix.data + (entry & AT) - 1, HEADER)
            if head.unit == unit and head.cid == cid and head.length == length \
                    and same_bytes(ix.data + (entry & AT) - 1 + HEADER, p, length):
                return head.id
        slot = (slot + 1) & ix.mask
    if ix.n == ix.cap and grow_docs(ix, 2 * ix.cap) < 0:
        return -1
    if <uint64_t>(ix.data_len + size) >= AT:
        return -1                            # a record's place must fit an entry
    if ix.data_len + size > ix.data_cap \
            and grow_data(ix, max(2 * ix.data_cap, ix.data_len + size)) < 0:
        return -1
    d = ix.n
    ix.n += 1
    doc = &ix.docs[d]
    doc.hash, doc.off, doc.length, doc.unit, doc.cid = h, ix.data_len + HEADER, length, \
        unit, cid
    head.id, head.length, head.unit, head.cid = <uint32_t>d, <uint32_t>length, unit, cid
    memcpy(ix.data + ix.data_len, &head, HEADER)
    ix.data_len += HEADER
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
        ix.table[slot] = (h & TAG) | <uint64_t>(doc.off - HEADER + 1)
    return d


cdef int64_t find_chunks(KeyIndex ix, const uint8_t* base, const int64_t* starts,
                         const int64_t* lengths, const uint32_t* unit, const uint32_t* cid,
                         Py_ssize_t n, int64_t* ids, uint8_t* room,
                         const uint8_t** key, uint64_t* hashes) noexcept nogil:
    """The ids of ``n`` keys (``find``), ``CHUNK`` at a time in two passes: each key of a
    chunk copied out of its frame into ``room`` and hashed, the keys ``FAR`` frames on
    fetched meanwhile (a read that runs through the input in order); then each one found,
    the table slot of the one ``PREFETCH`` on and the record of the one ``PREFETCH / 2`` on
    fetched meanwhile. In one pass the frames' lines and the table's random reads would
    compete for the same memory traffic, which two passes keep apart. ``key``, ``hashes``:
    room for a chunk. 0, or -1 where memory ran out."""
    cdef Py_ssize_t first = 0, count, i, j, k
    cdef int64_t used, length, d
    cdef uint64_t entry, h
    for k in range(min(n, FAR)):
        DCP_PREFETCH(base + starts[k])
        DCP_PREFETCH(base + starts[k] + lengths[k])
    while first < n:
        count = used = 0
        while first + count < n and count < CHUNK:
            k = first + count + FAR
            if k < n:
                DCP_PREFETCH(base + starts[k])
                DCP_PREFETCH(base + starts[k] + lengths[k])
            length = lengths[first + count]
            if length > ROOM // 4:
                key[count] = base + starts[first + count]
            elif used + length <= ROOM:
                memcpy(room + used, base + starts[first + count], length)
                key[count] = room + used
                used += length
            else:
                break
            hashes[count] = hash_key(key[count], length, unit[first + count],
                                     cid[first + count])
            count += 1
        for i in range(min(count, PREFETCH)):
            DCP_PREFETCH(&ix.table[hashes[i] & ix.mask])
        for i in range(count):
            j = i + PREFETCH // 2
            if j < count:
                h = hashes[j]
                entry = ix.table[h & ix.mask]
                if entry and (entry & TAG) == (h & TAG) \
                        and (entry & AT) + HEADER <= <uint64_t>ix.data_len:
                    DCP_PREFETCH(ix.data + (entry & AT) - 1)
                    DCP_PREFETCH(ix.data + (entry & AT) - 1 + HEADER + lengths[first + j])
            d = find(ix, key[i], lengths[first + i], unit[first + i], cid[first + i],
                     hashes[i])
            if d < 0:
                return -1
            ids[first + i] = d
            j = i + PREFETCH
            if j < count:
                DCP_PREFETCH(&ix.table[hashes[j] & ix.mask])
        first += count
    return 0


@cython.auto_pickle(False)
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
    cdef size_t data_span, docs_span, table_span   # the spans of the three tables
    cdef Pair* pairs                # (stream, collection) -> its first document
    cdef int64_t n_pairs
    cdef uint64_t pair_mask

    def __cinit__(self):
        self.n = self.cap = self.data_len = self.data_cap = self.n_pairs = 0
        self.data_span = self.docs_span = self.table_span = 0
        self.data = NULL
        self.docs = NULL
        self.table = NULL
        self.pairs = NULL
        if grow_docs(self, 1024) < 0 or grow_data(self, 16384) < 0 or rehash(self, 2048) < 0 \
                or rehash_pairs(self, 64) < 0:
            raise MemoryError()

    def __dealloc__(self):
        if self.data != NULL:
            span_give(<char*>self.data, self.data_span, TABLE)
        if self.docs != NULL:
            span_give(<char*>self.docs, self.docs_span, TABLE)
        if self.table != NULL:
            span_give(<char*>self.table, self.table_span, TABLE)
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
        cdef uint8_t* room = <uint8_t*>malloc(ROOM)
        cdef const uint8_t** key = <const uint8_t**>malloc(CHUNK * sizeof(uint8_t*))
        cdef uint64_t* hashes = <uint64_t*>malloc(CHUNK * sizeof(uint64_t))
        try:
            if room == NULL or key == NULL or hashes == NULL:
                raise MemoryError()
            with nogil:
                d = find_chunks(self, base, &starts[0], &lengths[0], &unit[0], &cid[0], n,
                                &ids[0], room, key, hashes)
        finally:
            free(room)
            free(key)
            free(hashes)
        if d < 0:
            raise MemoryError()
        return out

    def frame_ids(self, buf, uint64_t base, const int64_t[::1] rows,
                  const uint64_t[::1] key_offset, const uint16_t[::1] key_len,
                  const uint16_t[::1] vbucket, const uint16_t[::1] stream_id, cid):
        """The id of the document of each frame ``rows`` of a batch, read from the batch's
        columns (``pystate.KeyIndex.frame_ids``): each frame's key place, stream and
        collection gathered ``CHUNK`` frames at a time, then found as ``ids`` finds them
        (no column of every frame's key places is made). Every frame is checked first:
        the index is left as it was where one is refused."""
        view = memoryview(buf)
        cdef const uint8_t[::1] data = view if view.format == "B" else view.cast("B")
        cdef Py_ssize_t frames = key_offset.shape[0], n = rows.shape[0], i, first, count
        cdef int64_t r, d = 0
        cdef uint64_t size = data.shape[0]
        cdef const uint32_t[::1] cids
        cdef bint collections = cid is not None
        cdef const uint8_t* start
        if key_len.shape[0] != frames or vbucket.shape[0] != frames \
                or stream_id.shape[0] != frames:
            raise ValueError("every column needs one value per frame")
        if collections:
            cids = cid
            if cids.shape[0] != frames:
                raise ValueError("every column needs one value per frame")
        for i in range(n):
            r = rows[i]
            if not 0 <= r < frames or key_offset[r] < base or key_len[r] > size \
                    or key_offset[r] - base > size - key_len[r]:
                raise ValueError("a key outside the buffer")
        out = np.empty(n, np.int64)
        cdef int64_t[::1] ids = out
        if n == 0:
            return out
        start = &data[0] if data.shape[0] else <const uint8_t*>_nothing
        cdef uint8_t* room = <uint8_t*>malloc(ROOM)
        cdef const uint8_t** key = <const uint8_t**>malloc(CHUNK * sizeof(uint8_t*))
        cdef uint64_t* hashes = <uint64_t*>malloc(CHUNK * sizeof(uint64_t))
        cdef int64_t* starts = <int64_t*>malloc(CHUNK * sizeof(int64_t))
        cdef int64_t* lengths = <int64_t*>malloc(CHUNK * sizeof(int64_t))
        cdef uint32_t* units = <uint32_t*>malloc(CHUNK * sizeof(uint32_t))
        cdef uint32_t* in_collection = <uint32_t*>calloc(CHUNK, sizeof(uint32_t))
        try:
            if room == NULL or key == NULL or hashes == NULL or starts == NULL \
                    or lengths == NULL or units == NULL or in_collection == NULL:
                raise MemoryError()
            with nogil:
                first = 0
                while first < n and d == 0:
                    count = min(<Py_ssize_t>CHUNK, n - first)
                    for i in range(count):
                        r = rows[first + i]
                        starts[i] = <int64_t>(key_offset[r] - base)
                        lengths[i] = key_len[r]
                        units[i] = (<uint32_t>vbucket[r] << 16) | stream_id[r]
                        if collections:
                            in_collection[i] = cids[r]
                    d = find_chunks(self, start, starts, lengths, units, in_collection,
                                    count, &ids[first], room, key, hashes)
                    first += count
        finally:
            free(room)
            free(key)
            free(hashes)
            free(starts)
            free(lengths)
            free(units)
            free(in_collection)
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
        with nogil:
            for i in range(n):
                if i + PREFETCH < n:
                    DCP_PREFETCH(&self.docs[ids[i + PREFETCH]])
                total += self.docs[ids[i]].length
        offsets_arr = np.empty(n + 1, np.int64)
        data_arr = np.empty(total, np.uint8)
        cdef int64_t[::1] offsets = offsets_arr
        cdef uint8_t[::1] out = data_arr
        offsets[0] = 0
        with nogil:
            # ids in any order (a table's key order): the record of the id PREFETCH on and
            # the key bytes of the one PREFETCH / 2 on are fetched meanwhile
            for i in range(n):
                if i + PREFETCH < n:
                    DCP_PREFETCH(&self.docs[ids[i + PREFETCH]])
                if i + PREFETCH // 2 < n:
                    DCP_PREFETCH(self.data + self.docs[ids[i + PREFETCH // 2]].off)
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
        """``ids``' positions in key order, and the ties (``pystate.KeyIndex.order``): each
        document named gets the rank of its key (``_ranks``), then the positions are
        placed by rank (a counting sort, which keeps the positions of a rank in order)."""
        return self._order(ids, None, None)

    def order_versions(self, const int64_t[::1] ids, const uint64_t[::1] seqno,
                       const int64_t[::1] gpos):
        """``order`` with the positions of a document in the order of their (``seqno``,
        ``gpos``), and the seqnos in that order (``pystate.KeyIndex.order_versions``)."""
        if seqno.shape[0] != ids.shape[0] or gpos.shape[0] != ids.shape[0]:
            raise ValueError("one seqno and gpos per position")
        return self._order(ids, seqno, gpos)

    cdef tuple _order(self, const int64_t[::1] ids, const uint64_t[::1] seqno,
                      const int64_t[::1] gpos):
        cdef Py_ssize_t n = ids.shape[0]
        cdef int64_t ranks
        cdef int64_t* at = NULL                # per id: the rank of its key
        cdef size_t at_span = 0
        cdef bint within = seqno is not None
        self._check(ids)
        out = np.empty(n, np.int64)
        ties_arr = np.ones(n, np.uint8)
        seqno_arr = np.empty(n if within else 0, np.uint64)
        cdef int64_t[::1] order = out
        cdef uint8_t[::1] ties = ties_arr
        cdef uint64_t[::1] in_order = seqno_arr
        if n == 0:
            return (out, ties_arr.view(bool), seqno_arr) if within \
                else (out, ties_arr.view(bool))
        at = <int64_t*>scratch((self.n + 1) * sizeof(int64_t), &at_span)
        try:
            if at == NULL:
                raise MemoryError()
            ranks = self._ranks(ids, at)
            with nogil:
                if place_by_rank(&ids[0], n, at, ranks, &order[0], &ties[0]) < 0 \
                        or (within and sort_within(&order[0], &ties[0], n, &seqno[0],
                                                   &gpos[0], &in_order[0]) < 0):
                    with gil:
                        raise MemoryError()
        finally:
            unscratch(at, at_span)
        if within:
            return out, ties_arr.view(bool), seqno_arr
        return out, ties_arr.view(bool)

    cdef int64_t _ranks(self, const int64_t[::1] ids, int64_t* at) except -1:
        """The number of distinct keys (vbucket, collection, key bytes) among the
        documents ``ids`` names, and in ``at`` (one per id) each one's rank among them (-1
        for an id not named): the documents, each once and read in id order (the order
        they are stored in), by ``radix_sort``: on their vbucket and collection, then in
        each such group on their key bytes."""
        cdef Py_ssize_t n = ids.shape[0], i, k, u = 0
        cdef int64_t d, length, rank = -1
        cdef Sorted* a = NULL
        cdef Sorted* b = NULL
        cdef Sorted* done
        cdef size_t a_span = 0, b_span = 0
        cdef Keys keys
        keys.data, keys.docs = self.data, self.docs
        with nogil:
            for d in range(self.n + 1):
                at[d] = -1
            for i in range(n):
                if at[ids[i]] < 0:
                    at[ids[i]] = 0
                    u += 1
        try:
            a = <Sorted*>scratch(u * sizeof(Sorted), &a_span)
            b = <Sorted*>scratch(u * sizeof(Sorted), &b_span)
            if a == NULL or b == NULL:
                raise MemoryError()
            with nogil:
                k = 0
                for d in range(self.n):
                    if at[d] < 0:
                        continue
                    length = self.docs[d].length
                    a[k].group = (<uint64_t>(self.docs[d].unit >> 16) << 32) \
                        | self.docs[d].cid
                    a[k].w0 = word(self.data + self.docs[d].off, length)
                    a[k].w1 = word(self.data + self.docs[d].off + 8, length - 8)
                    a[k].doc, a[k].pos = d, k
                    k += 1
                done = radix_sort(&keys, a, b, u)
                if done == NULL:
                    with gil:
                        raise MemoryError()
                # documents of the same vbucket, collection and key share a rank
                for k in range(u):
                    if k == 0 or not same_key(&keys, &done[k], &done[k - 1]):
                        rank += 1
                    at[done[k].doc] = rank
        finally:
            unscratch(a, a_span)
            unscratch(b, b_span)
        return rank + 1
