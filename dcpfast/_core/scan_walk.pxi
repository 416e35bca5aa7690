# The walk: frames validated one after another, BLOCK at a time written to the columns, damage
# skipped or reported; the loop that every scan runs without the GIL.

# long: the per-frame loop; its steps are the helpers it calls (parse, resync, flush)
cdef int walk(Walk* w) noexcept nogil:
    """Validate and emit frames from ``w.pos``; 1 when the columns are full, -1 out of memory."""
    cdef Frame rows[BLOCK]
    cdef Plan plan
    cdef Problem e
    cdef Prefetch a
    cdef Out o
    cdef size_t n = 0
    cdef Frame* f
    cdef int s, after, rc = 0
    cdef size_t q, pos = w.pos, count = w.count
    cdef size_t most = min(w.limit, w.cap), stop = w.stop
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
    while count < most and pos < stop:
        f = &rows[n]
        prefetch_near(&a, pos)
        prefetch_out(&o)
        prefetch_out(&o)
        prefetch_out(&o)
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
        if count == w.cap and count < w.limit and pos < stop:
            rc = 1
    a.stop = a.p
    flush(w, &plan, rows, count - n, n, &a)
    w.count = count
    w.pos = pos
    return rc
