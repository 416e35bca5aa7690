# The stream checks: one event per row of each vbucket stream, each stream's check state
# in a row of a uint64 array (``pystate.check_streams`` says what each rule is).

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


cdef int closed(Finds* f, const uint64_t* st, uint64_t bits, int snap, int64_t i, int ev,
                bint collections, uint32_t status, uint64_t start, uint64_t end,
                uint32_t flags) except -1 nogil:
    """The checks on the snapshot that row ``i`` closes (``pystate._closed``)."""
    cdef bint reached = (bits & CS_REACH) != 0
    cdef uint64_t top
    cdef uint8_t rule
    if snap == CS_SNAP_MARKER:
        top = st[C_END]
        if reached and st[C_REACH] >= top:
            return 0
        rule = R_ENDED_INSIDE if ev == EV_END else R_EARLY
        if not (st[C_FLAGS] & P_SNAP_DISK):
            if not collections or bits & CS_UNFILTERED:
                short(f, st, i, rule, reached)
            return 0
        if not collections or not (bits & CS_ADVANCED):
            return 0
        if ev == EV_MARKER and not ((flags & P_SNAP_HISTORY)
                                    and not (st[C_FLAGS] & P_SNAP_HISTORY)
                                    and end == top and start <= top):
            short(f, st, i, rule, reached)
        elif ev == EV_END and status == P_END_OK:
            short(f, st, i, rule, reached)
    elif snap == CS_SNAP_OSO and ev == EV_END and status == P_END_OK and collections \
            and bits & CS_ADVANCED:
        add(f, i, R_ENDED_INSIDE, st[C_REACH] if reached else 0,
            GIVEN_FOUND if reached else 0, 0, 0)
    return 0


# long: one loop over the rows, each event's rule in its branch, read as one
def check_streams(request):
    """The stream checks of a ``contract.CheckRequest`` (``pystate.check_streams``)."""
    cdef const uint8_t[::1] event = request.event
    cdef const int64_t[::1] slot = request.slot
    cdef const uint8_t[::1] info = request.info
    cdef const uint32_t[::1] opaque = request.opaque
    cdef const uint64_t[::1] seqno = request.seqno
    cdef const uint64_t[::1] snap_start = request.snap_start
    cdef const uint64_t[::1] snap_end = request.snap_end
    cdef const uint32_t[::1] snap_flags = request.snap_flags
    cdef const uint32_t[::1] end_status = request.end_status
    cdef uint64_t[:, ::1] state = request.state
    cdef Py_ssize_t n = event.shape[0], i
    cdef Finds f
    cdef int ev, snap
    cdef uint64_t bits, q, chain
    cdef uint64_t* st
    cdef bint collections
    cdef int64_t s
    if any(m != n for m in (slot.shape[0], info.shape[0], opaque.shape[0], seqno.shape[0],
                            snap_start.shape[0], snap_end.shape[0], snap_flags.shape[0],
                            end_status.shape[0])):
        raise ValueError("every column needs one value per row")
    if state.shape[1] != C_FIELDS:
        raise ValueError("the check state has C_FIELDS columns")
    starts_arr = np.zeros(n, np.uint8)
    cdef uint8_t[::1] starts = starts_arr
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
                if not (bits & CS_OPEN) or bits & CS_ENDED:
                    bits = CS_OPEN
                    starts[i] = 1
                if ev == EV_REQUEST or ev == EV_RESPONSE:
                    if not ((bits & CS_LAST_START) and (bits & CS_OPAQUE)
                            and st[C_OPAQUE] == opaque[i]):
                        bits = CS_OPEN | CS_STARTED
                        starts[i] = 1
                    bits |= CS_LAST_START | CS_OPAQUE
                    st[C_OPAQUE] = opaque[i]
                    if ev == EV_REQUEST:
                        if info[i] & INFO_UNFILTERED:
                            bits |= CS_UNFILTERED
                        if info[i] & INFO_SEED:
                            bits |= CS_CHAIN
                            st[C_CHAIN] = seqno[i]
                    st[C_BITS] = bits
                    continue
                if bits & CS_OPAQUE and st[C_OPAQUE] != opaque[i]:
                    bits = CS_OPEN
                    starts[i] = 1
                bits = (bits | CS_OPAQUE) & ~(<uint64_t>CS_LAST_START)
                st[C_OPAQUE] = opaque[i]
                snap = (bits & CS_SNAP_MASK) >> CS_SNAP_SHIFT
                collections = (info[i] & INFO_COLLECTIONS) != 0
                if ev == EV_ITEM or ev == EV_ADVANCE:
                    q = seqno[i]
                    if snap != CS_SNAP_OSO:
                        chain = st[C_CHAIN]
                        if bits & CS_CHAIN and (q < chain or (q == chain and ev != EV_ADVANCE)):
                            add(&f, i, R_BACKWARDS, q, GIVEN_FOUND | GIVEN_RANGE, chain, chain)
                        st[C_CHAIN] = q
                        bits |= CS_CHAIN
                        if ev == EV_ITEM:
                            if snap == CS_SNAP_MARKER:
                                if q < st[C_START] or q > st[C_END]:
                                    add(&f, i, R_OUTSIDE, q, GIVEN_FOUND | GIVEN_RANGE,
                                        st[C_START], st[C_END])
                            elif snap == CS_SNAP_OSO_CLOSED or bits & CS_STARTED:
                                add(&f, i, R_OUTSIDE, q, GIVEN_FOUND, 0, 0)
                    if ev == EV_ADVANCE:
                        bits |= CS_ADVANCED
                    if not (bits & CS_REACH) or q > st[C_REACH]:
                        st[C_REACH] = q
                    bits |= CS_REACH
                elif ev == EV_MARKER or ev == EV_OSO_START:
                    closed(&f, st, bits, snap, i, ev, collections, 0, snap_start[i],
                           snap_end[i], snap_flags[i])
                    if snap == CS_SNAP_OSO:
                        add(&f, i, R_OSO_NOT_ENDED, 0, 0, 0, 0)
                    bits &= ~(<uint64_t>(CS_SNAP_MASK | CS_REACH))
                    if ev == EV_MARKER:
                        bits |= CS_SNAP_MARKER << CS_SNAP_SHIFT
                        st[C_START], st[C_END] = snap_start[i], snap_end[i]
                        st[C_FLAGS] = snap_flags[i]
                    else:
                        bits |= CS_SNAP_OSO << CS_SNAP_SHIFT
                elif ev == EV_OSO_END:
                    if snap == CS_SNAP_OSO:
                        if bits & CS_REACH:
                            st[C_CHAIN] = st[C_REACH]
                            bits |= CS_CHAIN
                        bits = (bits & ~(<uint64_t>(CS_SNAP_MASK | CS_REACH))) \
                            | (CS_SNAP_OSO_CLOSED << CS_SNAP_SHIFT)
                    elif bits & CS_STARTED or snap != CS_NO_SNAP:
                        add(&f, i, R_OSO_NOT_STARTED, 0, 0, 0, 0)
                elif ev == EV_END:
                    closed(&f, st, bits, snap, i, ev, collections, end_status[i], 0, 0, 0)
                    bits |= CS_ENDED
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
        return C.CheckResult(C.Findings(at=at, rule=rule, found=found, given=given, low=low,
                                        high=high), starts=starts_arr.view(bool))
    finally:
        free(f.rows)
