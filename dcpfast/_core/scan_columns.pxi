# The columns of a block of decoded frames: the plan of the requested field columns, the
# field stores (grouped by kind), and the header columns (all of them in one pass, or a
# projection one column at a time).

DEF LANES = 4              # counters per kind when counting rows (runs of one kind)

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
                 size_t n, Prefetch* a) noexcept nogil:
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
        prefetch(a)
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
        prefetch(a)
        at[b % LANES][k] += 1
    m = 0
    for k in range(n_kinds):
        for j in range(plan.first[k], plan.first[k + 1]):
            st = &plan.stores[j]
            store_rows(st, buf, starts[st.base], which + m, end[k] - m, i0)
        m = end[k]


# header values that depend on the frame's kind (0 where it does not carry them)

cdef inline uint16_t vbucket(const uint8_t* buf, const Frame* f) noexcept nogil:
    return be16(buf + f.pos + 6) & vbucket_mask[f.kind]


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


# long: split, the compiler inlines otherwise and the scan takes more instructions
cdef void flush(Walk* w, const Plan* plan, const Frame* rows, size_t i0,
                size_t n, Prefetch* a) noexcept nogil:
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
                prefetch(a)
        elif c == C_MAGIC or c == C_OPCODE or c == C_DATATYPE:
            at = 0 if c == C_MAGIC else (1 if c == C_OPCODE else 5)
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = buf[rows[b].pos + at]
                prefetch(a)
        elif c == C_VBUCKET:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = vbucket(buf, &rows[b])
                prefetch(a)
        elif c == C_STATUS:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = status(buf, &rows[b])
                prefetch(a)
        elif c == C_OPAQUE:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = be32(buf + rows[b].pos + 12)
                prefetch(a)
        elif c == C_CAS:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = be64(buf + rows[b].pos + 16)
                prefetch(a)
        elif c == C_BODY_LEN:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = rows[b].body
                prefetch(a)
        elif c == C_FRAMING_LEN:
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = rows[b].fel
                prefetch(a)
        elif c == C_EXTRAS_LEN:
            for b in range(n):
                (<uint8_t*>dst)[i0 + b] = rows[b].extlen
                prefetch(a)
        elif c == C_KEY_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = key_offset(base, &rows[b])
                prefetch(a)
        elif c == C_KEY_LEN:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = key_len(&rows[b])
                prefetch(a)
        elif c == C_VALUE_OFFSET:
            for b in range(n):
                (<uint64_t*>dst)[i0 + b] = value_offset(base, &rows[b])
                prefetch(a)
        elif c == C_VALUE_LEN:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = value_len(&rows[b])
                prefetch(a)
        elif c == C_COLLECTION_ID:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = rows[b].cid
                prefetch(a)
        elif c == C_STREAM_ID:
            for b in range(n):
                (<uint16_t*>dst)[i0 + b] = rows[b].sid
                prefetch(a)
        elif c == C_SERVER_DURATION:
            for b in range(n):
                (<uint32_t*>dst)[i0 + b] = rows[b].server_us
                prefetch(a)



cdef inline void all_header(Walk* w, const Frame* rows, size_t i0, size_t n,
                            Prefetch* a) noexcept nogil:
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
    cdef uint32_t* server_us = <uint32_t*>cols[C_SERVER_DURATION] + i0
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
        server_us[b] = f.server_us
        prefetch(a)
        prefetch(a)
