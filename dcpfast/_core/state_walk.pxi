# The state walk: the rows of a stretch in stream order, each stream's walk state in a row
# of a uint64 array (``pystate.walk_state``); ``newest``.

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
    if end <= limit and end < st[K_CUT] and not (bits & K_LOST):
        st[K_CONSISTENT] = end
        bits |= WS_COMPLETED
    return bits & ~(<uint64_t>WS_HAS_MARKER)


cdef inline uint64_t floor_of(uint64_t* st, uint64_t bits, int w, uint64_t start,
                              uint32_t oso, uint64_t seqno) noexcept nogil:
    """The first marker, OSO start or item of a run (``pystate._floor``)."""
    cdef uint64_t floor
    if w == W_MARKER:
        floor = (start if start > 0 else 1) - 1
    elif w == W_OSO:
        if not (oso & P_OSO_START) or oso & P_OSO_END:
            return bits
        floor = 0
    elif is_item(w):
        floor = (seqno if seqno > 0 else 1) - 1
    else:
        return bits
    if floor < st[K_FLOOR]:
        st[K_FLOOR] = floor
    return bits & ~(<uint64_t>K_FRESH)


# long: one loop over the rows, each kind of row in its branch, read as one
def walk_state(request):
    """The state walk of a ``contract.WalkRequest`` (``pystate.walk_state``)."""
    cdef const uint8_t[::1] what = request.what
    cdef const int64_t[::1] slot = request.slot
    cdef const uint64_t[::1] seqno = request.seqno
    cdef const uint64_t[::1] cas = request.cas
    cdef const uint64_t[::1] snap_start = request.snap_start
    cdef const uint64_t[::1] snap_end = request.snap_end
    cdef const uint32_t[::1] oso = request.oso
    cdef const uint8_t[::1] rolled = request.rolled
    cdef const uint64_t[::1] limit = request.limit
    cdef const uint8_t[::1] lost = request.lost
    cdef uint64_t at_time = request.at_time
    cdef uint64_t[:, ::1] carry = request.carry
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
                            rolled.shape[0], limit.shape[0], lost.shape[0])):
        raise ValueError("every column needs one value per row")
    if carry.shape[1] != K_FIELDS:
        raise ValueError("the walk state has K_FIELDS columns")
    for i in range(n):
        if what[i] != W_LOSS and what[i] != W_SKIP and not 0 <= slot[i] < slots:
            raise ValueError(f"slot {slot[i]} outside the walk state")
    bad_arr, applies_arr, known_arr = (np.zeros(n, np.uint8) for _ in range(3))
    previous_arr, point_arr = np.zeros(n, np.uint64), np.zeros(n, np.uint64)
    cdef uint8_t[::1] bad = bad_arr, applies = applies_arr, known = known_arr
    cdef uint64_t[::1] previous = previous_arr, point = point_arr
    carried_slots, carried_points = [], []
    pending = <int64_t*>malloc((slots + 1) * sizeof(int64_t))
    if pending == NULL:
        raise MemoryError()
    try:
        for k in range(slots):
            pending[k] = -1
        for i in range(n):
            w = what[i]
            if w == W_SKIP:
                continue
            if w == W_LOSS:
                if not every_lost:
                    every_lost = True
                    for k in range(slots):
                        carry[k, K_BITS] |= K_LOST
                continue
            s = slot[i]
            st = &carry[s, 0]
            bits = st[K_BITS]
            if lost[i]:
                bits |= K_LOST
            if bits & K_FRESH and w != W_RESTART and w != W_END:
                bits = floor_of(st, bits, w, snap_start[i], oso[i], seqno[i])
            if w == W_RESTART:
                bits = (bits & ~(<uint64_t>(WS_IN_OSO | WS_HAS_MARKER))) | K_FRESH
                if rolled[i]:
                    bits &= ~(<uint64_t>(WS_LAZY | WS_COMPLETED))
                    pending[s] = -1
                    if bits & K_ITEMS:
                        point[i], known[i] = seqno[i], 1
                    restarted(st, seqno[i], True)
                else:
                    bits = (bits | WS_LAZY) & ~(<uint64_t>WS_COMPLETED)
                    pending[s] = i
            elif w == W_MARKER:
                if bits & WS_HAS_MARKER:
                    bits = complete(st, bits, limit[i])
                bits |= WS_HAS_MARKER
                st[K_START], st[K_END] = snap_start[i], snap_end[i]
            elif w == W_OSO:
                flags = oso[i]
                if flags & P_OSO_END and bits & WS_HAS_MARKER and st[K_CHAIN] >= st[K_END]:
                    bits = complete(st, bits, limit[i])
                if flags & P_OSO_START and not (flags & P_OSO_END):
                    bits |= WS_IN_OSO
                else:
                    bits &= ~(<uint64_t>WS_IN_OSO)
            elif is_item(w):
                q = seqno[i]
                if bits & WS_LAZY:
                    p = (q if q > 0 else 1) - 1
                    row = pending[s]
                    pending[s] = -1
                    if not (bits & K_ITEMS):
                        pass                  # it discards nothing: not reported
                    elif row >= 0:
                        point[row], known[row] = p, 1
                    else:
                        carried_slots.append(s)
                        carried_points.append(p)
                    restarted(st, p, not (bits & WS_COMPLETED))
                    bits &= ~(<uint64_t>WS_LAZY)
                bits |= K_ITEMS
                chain = st[K_CHAIN]
                if not (bits & WS_IN_OSO) and q <= chain:
                    bad[i], previous[i] = 1, chain
                    st[K_BITS] = bits
                    continue
                if q > chain:
                    st[K_CHAIN] = q
                if at_time != U64_MAX and is_timed(w) and (cas[i] & CLOCK) > at_time \
                        and q < st[K_CUT]:
                    st[K_CUT] = q
                if bits & WS_HAS_MARKER and not (bits & WS_IN_OSO) and q >= st[K_END]:
                    bits = complete(st, bits, limit[i])
                applies[i] = q <= limit[i] and q < st[K_CUT]
            st[K_BITS] = bits
    finally:
        free(pending)
    return C.WalkResult(bad=bad_arr.view(bool), previous=previous_arr,
                        applies=applies_arr.view(bool), point=point_arr,
                        known=known_arr.view(bool),
                        carried_slots=np.array(carried_slots, np.int64),
                        carried_points=np.array(carried_points, np.uint64)
                        .reshape(len(carried_points)))


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


def pair_durable(request):
    """Each commit of a ``contract.DurableRequest`` with the change before it in its group,
    and the prepares left waiting (``pystate.pair_durable``)."""
    cdef const int64_t[::1] group = request.group
    cdef const uint8_t[::1] what = request.what
    cdef const uint64_t[::1] seqno = request.seqno
    cdef const uint64_t[::1] prepared = request.prepared
    cdef Py_ssize_t size = request.size
    cdef Py_ssize_t n = group.shape[0], i, c = 0, w = 0
    cdef int64_t g, p
    if what.shape[0] != n or seqno.shape[0] != n or prepared.shape[0] != n:
        raise ValueError("every column needs one value per change")
    for i in range(n):
        if not 0 <= group[i] < size:
            raise ValueError(f"group {group[i]} outside 0..{size - 1}")
        if what[i] == W_COMMIT:
            c += 1
    last_arr = np.full(size, -1, np.int64)
    commits_arr = np.empty(c, np.int64)
    before_arr = np.empty(c, np.int64)
    ok_arr = np.zeros(c, np.uint8)
    cdef int64_t[::1] last = last_arr
    cdef int64_t[::1] commits = commits_arr
    cdef int64_t[::1] before = before_arr
    cdef uint8_t[::1] ok = ok_arr
    with nogil:
        c = 0
        for i in range(n):
            g = group[i]
            p = last[g]
            if what[i] == W_COMMIT:
                commits[c], before[c] = i, p
                ok[c] = p >= 0 and what[p] == W_PREPARE and prepared[i] == seqno[p]
                c += 1
            last[g] = i
        for i in range(n):
            if what[i] == W_PREPARE and last[group[i]] == i:
                w += 1
    waiting_arr = np.empty(w, np.int64)
    cdef int64_t[::1] waiting = waiting_arr
    with nogil:
        w = 0
        for i in range(n):
            if what[i] == W_PREPARE and last[group[i]] == i:
                waiting[w] = i
                w += 1
    return C.DurableResult(commits=commits_arr, before=before_arr, ok=ok_arr.view(bool),
                           waiting=waiting_arr)


def validity(request):
    """When the versions ``kept`` (None: all) of a ``contract.ValidityRequest`` last
    (``pystate.validity``), written into its ``out``, in one pass."""
    out = request.out
    cdef const uint64_t[::1] seqno = request.seqno
    cdef const uint64_t[::1] cas = request.cas
    cdef const uint64_t[::1] gone = request.gone
    cdef const uint8_t[::1] same = request.same
    cdef const int64_t[::1] kept = request.kept
    cdef uint64_t alive = request.alive
    cdef uint64_t discarded = request.discarded
    cdef uint64_t[::1] from_seqno = out.from_seqno
    cdef int64_t[::1] from_time = out.from_time
    cdef uint64_t[::1] to_seqno = out.to_seqno
    cdef int64_t[::1] to_time = out.to_time
    cdef uint8_t[::1] seqno_valid = out.seqno_valid
    cdef uint8_t[::1] time_valid = out.time_valid
    cdef Py_ssize_t n = seqno.shape[0], m, i, j
    cdef bint ended, follows
    if cas.shape[0] != n or gone.shape[0] != n or same.shape[0] != n:
        raise ValueError("one seqno, CAS, end and next flag per version")
    m = n if kept is None else kept.shape[0]
    if from_seqno.shape[0] != m or from_time.shape[0] != m or to_seqno.shape[0] != m \
            or to_time.shape[0] != m or seqno_valid.shape[0] != m or time_valid.shape[0] != m:
        raise ValueError("one answer per version kept")
    for j in range(m if kept is not None else 0):
        if not 0 <= kept[j] < n:
            raise ValueError(f"version {kept[j]} outside 0..{n - 1}")
    with nogil:
        for j in range(m):
            i = j if kept is None else kept[j]
            # a clear ends a version that no later version of its document ended first
            ended = gone[i] != alive and gone[i] != discarded and not (
                same[i] != 0 and i + 1 < n and seqno[i + 1] < gone[i])
            follows = same[i] != 0 and not ended and i + 1 < n
            from_seqno[j] = seqno[i]
            from_time[j] = <int64_t>(cas[i] & CLOCK)
            to_seqno[j] = gone[i] if ended else (seqno[i + 1] if follows else 0)
            to_time[j] = <int64_t>(cas[i + 1] & CLOCK) if follows else 0
            seqno_valid[j] = ended or same[i] != 0
            time_valid[j] = follows
    return out
