# The prefetch cursors. The input is fetched by a cursor running ahead of the parse: the
# parse loop moves it three lines a frame, and the loops that write a block's columns one or
# two lines a row, so the memory system keeps reading the next frames while the columns are
# written (faster than fetching only while parsing). Offsets, not pointers:
# the cursor may be placed past the end of the input, where it fetches nothing.

cdef struct Prefetch:
    const uint8_t* buf
    size_t p                # next line to fetch
    size_t stop             # the column writers fetch no further
    size_t last             # nor anybody from here on (the end of the input, less three lines)


cdef inline void prefetch(Prefetch* a) noexcept nogil:
    """Fetch one more line, if it is before ``a.stop``."""
    if a.p < a.stop:
        DCP_PREFETCH_L2(a.buf + a.p)
        a.p += 64


# The rows of the next block are fetched as well, column after column, while the block is
# parsed, three lines a frame (all columns: faster than leaving the lines to be read when
# they are written).

cdef struct Out:
    char* col               # the column being fetched
    size_t p                # offset of its next line
    size_t stop             # end of the next block's rows in it
    int j                   # next column
    int n                   # columns (with the kinds and the binary views)
    size_t row0             # the next block's rows
    size_t rows
    char* cols[MAX_COLUMNS + 3]
    size_t width[MAX_COLUMNS + 3]


cdef inline void out_block(Out* o, size_t row0, size_t rows) noexcept nogil:
    o.j = 0
    o.p = o.stop = 0
    o.row0 = row0
    o.rows = rows


cdef void out_columns(Out* o, const Walk* w) noexcept nogil:
    cdef int c
    o.n = 0
    for c in range(n_columns):
        if w.cols[c] != NULL:
            o.cols[o.n] = w.cols[c]
            o.width[o.n] = column_width[c]
            o.n += 1
    o.cols[o.n] = <char*>w.kinds
    o.width[o.n] = 1
    o.n += 1
    for c in range(2):
        if w.views[c] != NULL:
            o.cols[o.n] = <char*>w.views[c]
            o.width[o.n] = 16
            o.n += 1
    out_block(o, 0, 0)


cdef inline void prefetch_out(Out* o) noexcept nogil:
    """Fetch one more line of the next block's rows."""
    if o.p < o.stop:
        DCP_PREFETCH_L2(o.col + o.p)
        o.p += 64
    elif o.j < o.n:
        o.col = o.cols[o.j]
        o.p = o.row0 * o.width[o.j]
        o.stop = o.p + o.rows * o.width[o.j]
        o.j += 1


cdef inline void prefetch_near(Prefetch* a, size_t pos) noexcept nogil:
    """Fetch three more lines, if they are less than PREFETCH_FAR past ``pos`` (the frame
    being parsed); start PREFETCH_NEAR past it if the cursor is behind."""
    if a.p < pos + PREFETCH_FAR:
        if a.p < pos + PREFETCH_NEAR:
            a.p = pos + PREFETCH_NEAR
        if a.p < a.last:
            DCP_PREFETCH_L2(a.buf + a.p)
            DCP_PREFETCH_L2(a.buf + a.p + 64)
            DCP_PREFETCH_L2(a.buf + a.p + 128)
            a.p += 192
