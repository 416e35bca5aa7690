# Binary columns: Arrow binary-view structs of keys and values (written with the columns of
# a block, or by ``views`` for any slices), and ``gather``, which copies slices into one
# data buffer.

DEF VIEW_PREFETCH = 16     # slices ahead of the binary view being written

cdef inline uint64_t far_word(uint64_t start, int window_bits, uint64_t mask) noexcept nogil:
    """The second word of the view of a slice of more than 12 bytes at ``start``: the index
    of its data buffer (a window of the input) and its offset in it."""
    return (start >> window_bits) | ((start & mask) << 32)


cdef inline void put_view(uint8_t* v, const uint8_t* buf, size_t end, uint64_t start,
                          uint32_t size, uint64_t far) noexcept nogil:
    """One 16-byte binary-view struct, written as two little-endian words: the length and
    up to 12 inline bytes (zero-padded), or the length, a 4-byte prefix and ``far`` (the
    ``far_word`` of ``start``)."""
    cdef uint64_t lo, hi
    cdef uint8_t tail[12]
    cdef const uint8_t* p = buf + start
    if size > 12:
        lo = <uint64_t>size | (<uint64_t>le32(p) << 32)
        hi = far
    elif size == 0:                       # common: deletions, commits, markers
        lo = hi = 0
    else:
        if end - start < 12:              # too near the end to load 12 bytes at once
            memset(tail, 0, 12)
            memcpy(tail, p, size)
            p = tail
        lo = le64(p)
        hi = (lo >> 32) | (<uint64_t>le32(p + 8) << 32)
        lo = <uint64_t>size | (lo << 32)
        if size < 4:
            lo &= (<uint64_t>1 << (32 + 8 * size)) - 1
        if size <= 4:
            hi = 0
        else:
            hi &= <uint64_t>0xFFFFFFFFFFFFFFFF >> (8 * (12 - size))
    lo = DCP_LE64(lo)
    hi = DCP_LE64(hi)
    memcpy(v, &lo, 8)
    memcpy(v + 8, &hi, 8)


cdef void put_views(Walk* w, const Frame* rows, size_t i0, size_t n) noexcept nogil:
    """Rows ``i0 ...`` of the key and value views asked for (zeros where a kind carries
    none), both from one read of each frame's row. Everything the loop reads is in locals
    before a view is stored: the stores go through byte pointers, which may alias
    anything."""
    cdef const uint8_t* buf = w.buf
    cdef size_t end = w.end
    cdef int bits = w.window_bits
    cdef uint64_t mask = (<uint64_t>1 << bits) - 1
    cdef bint one_window = end >> bits == 0     # every buffer index 0, every offset its start
    cdef uint8_t* keys = w.views[0] + 16 * i0 if w.views[0] != NULL else NULL
    cdef uint8_t* values = w.views[1] + 16 * i0 if w.views[1] != NULL else NULL
    cdef bint check = values != NULL and w.max_frame > mask   # a value may exceed a window
    cdef bint too_long = False
    cdef size_t b, pos, key_start, value_start
    cdef uint64_t key_far, value_far
    cdef uint32_t key_size, value_size
    cdef uint8_t kind
    for b in range(n):
        pos = rows[b].pos
        kind = rows[b].kind
        key_start = pos + 24 + rows[b].fel + rows[b].extlen + rows[b].prefix
        key_size = (rows[b].keylen - rows[b].prefix) & key_mask[kind]
        value_size = rows[b].value_len
        value_start = pos + 24 + rows[b].body - value_size
        value_size &= value_mask[kind]
        if check:
            too_long |= value_size > mask
        if one_window:
            key_far = key_start << 32
            value_far = value_start << 32
        else:
            key_far = far_word(key_start, bits, mask)
            value_far = far_word(value_start, bits, mask)
        if keys != NULL:
            put_view(keys + 16 * b, buf, end, key_start, key_size, key_far)
        if values != NULL:
            put_view(values + 16 * b, buf, end, value_start, value_size, value_far)
    if too_long:
        w.view_too_long = True


def gather(const uint8_t[::1] buf, const uint64_t[::1] starts, const int64_t[::1] bounds,
           uint8_t[::1] out):
    """Copy ``buf[starts[i]:starts[i] + bounds[i+1] - bounds[i]]`` to ``out[bounds[i]:]``."""
    cdef Py_ssize_t i, n = starts.shape[0]
    cdef int64_t size
    if bounds.shape[0] != n + 1 or bounds[0] < 0 or out.shape[0] < bounds[n]:
        raise ValueError("gather: bounds do not match")
    for i in range(n):
        size = bounds[i + 1] - bounds[i]
        if size < 0 or starts[i] > <uint64_t>buf.shape[0] or size > buf.shape[0] - <Py_ssize_t>starts[i]:
            raise ValueError(f"gather: range {i} outside the buffer")
    with nogil:
        for i in range(n):
            size = bounds[i + 1] - bounds[i]
            if size:
                memcpy(&out[bounds[i]], &buf[starts[i]], size)


def views(const uint8_t[::1] buf, starts, lengths, out, int window_bits):
    """Arrow binary-view structs for slices of ``buf``: row j of ``out`` (16 bytes a slice)
    describes row j of ``starts``/``lengths`` (1-D arrays are one row); data buffer index =
    start >> window_bits. The rows are walked together, frame by frame, so a frame's key
    and value, which share cache lines, are read from memory once."""
    cdef const uint64_t[:, ::1] at = np.atleast_2d(starts)
    cdef const int64_t[:, ::1] size = np.atleast_2d(lengths)
    cdef uint8_t[:, ::1] dst = np.atleast_2d(out)
    cdef Py_ssize_t i, j, m = at.shape[0], n = at.shape[1], bad = -1
    cdef size_t end = buf.shape[0]
    cdef uint64_t mask = (<uint64_t>1 << window_bits) - 1, start, length
    cdef const uint8_t* data = &buf[0] if end else <const uint8_t*>""
    cdef const uint64_t* first
    cdef const int64_t* sizes
    cdef uint8_t* structs
    if (size.shape[0], size.shape[1]) != (m, n) or (dst.shape[0], dst.shape[1]) != (m, 16 * n):
        raise ValueError("views: sizes do not match")
    if n == 0 or m == 0:
        return
    first, sizes, structs = &at[0, 0], &size[0, 0], &dst[0, 0]
    with nogil:
        for i in range(n):
            for j in range(m):
                if i + VIEW_PREFETCH < n and first[j * n + i + VIEW_PREFETCH] < end:
                    DCP_PREFETCH(data + first[j * n + i + VIEW_PREFETCH])
                start = first[j * n + i]
                length = <uint64_t>sizes[j * n + i]      # a negative length is huge here
                if start > end or length > end - start or length > mask:
                    bad = i
                    break
                put_view(structs + 16 * (j * n + i), data, end, start, <uint32_t>length,
                         far_word(start, window_bits, mask))
            if bad >= 0:
                break
    if bad >= 0:
        for j in range(m):
            if size[j, bad] < 0 or at[j, bad] > end or <uint64_t>size[j, bad] > end - at[j, bad]:
                raise ValueError(f"views: range {bad} outside the buffer")
        raise ValueError(f"views: range {bad} longer than a window")
