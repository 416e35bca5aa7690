# Arrow validity bitmaps of the columns that only some frame kinds carry; the kernels are in
# bitmaps.h.

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
