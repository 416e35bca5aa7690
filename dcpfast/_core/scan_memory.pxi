# Output memory. A scan's columns, frame kinds and binary views are carved out of one
# allocation (``Columns``), whatever the batch size; a large one is a span of the memory
# core's output cache (``cmemory``) that goes back to the cache when its last array is
# dropped, so the next scan (or the next batch of iter_batches) writes into pages that are
# already resident instead of faulting in and zeroing fresh ones, which costs as much as
# the scan itself. The cache, its bounds and the thread that gives idle spans back are in
# spans.h; smaller requests use the allocator (the rule of ``cmemory.take``).

DEF ALIGN = 64                # each part of a Columns starts on a cache line

cdef extern from "Python.h":
    # tracemalloc's account of memory that Python's allocators did not give
    int PyTraceMalloc_Track(unsigned int domain, uintptr_t ptr, size_t size)
    int PyTraceMalloc_Untrack(unsigned int domain, uintptr_t ptr)


cdef class _Room:
    """Writable memory for one buffer, exposed through the buffer protocol."""
    cdef char* at
    cdef size_t size          # bytes exposed
    cdef size_t span          # bytes of the span (0: from the allocator)

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.at, self.size, 0, flags)

    def __dealloc__(self):
        if self.at == NULL:
            return
        if not self.span:
            PyTraceMalloc_Untrack(0, <uintptr_t>self.at)
        give(self.at, self.span, 0)

    cdef void trim(self, size_t used) noexcept nogil:
        """Give back the pages of a span past ``used`` bytes when it was asked for more
        than twice that (a scan that reserved far more rows than it found)."""
        cdef size_t keep = span_size(used) if used else 4096
        if self.span and keep <= self.size // 2:
            self.span = span_trim(self.at, keep, self.span)
            self.size = min(self.size, self.span)


cdef _Room new_room(size_t n):
    cdef _Room r = _Room.__new__(_Room)
    r.size = n
    with nogil:
        r.at = take(n, &r.span, 0)
    if r.at == NULL:
        raise MemoryError()
    if not r.span:            # tracemalloc counts the allocator's share, as it counts Python's
        PyTraceMalloc_Track(0, <uintptr_t>r.at, n if n else 1)
    return r


def room(Py_ssize_t n):
    """``n`` bytes of writable, uninitialised memory (a buffer-protocol object)."""
    if n < 0:
        raise ValueError("negative size")
    return new_room(n)


cdef inline size_t aligned(size_t n) noexcept nogil:
    return (n + ALIGN - 1) // ALIGN * ALIGN


@cython.auto_pickle(False)
cdef class Columns:
    """The output memory of a scan: ``rows`` rows of the columns ``names``, of the frame
    kinds and of the binary-view structs of the pairs ``viewed`` (names of
    ``schema.BINARY``), carved out of one allocation. ``scan_buffer`` fills it from a
    given row (growing it when the frames need more rows)."""
    cdef _Room room
    cdef readonly size_t rows
    cdef readonly tuple names
    cdef readonly tuple viewed
    cdef int n_parts                          # the columns, the kinds, the views
    cdef size_t width[MAX_COLUMNS + 3]
    cdef size_t offset[MAX_COLUMNS + 3]

    def __init__(self, names, Py_ssize_t rows, viewed=()):
        cdef int i
        if rows < 0:
            raise ValueError("negative rows")
        if len(names) > MAX_COLUMNS or not set(viewed) <= set(S.BINARY):
            raise ValueError("unknown columns or views")
        self.names, self.viewed = tuple(names), tuple(viewed)
        for i, name in enumerate(self.names):
            self.width[i] = S.DTYPES[name].itemsize
        self.width[len(self.names)] = 1
        for i in range(len(self.viewed)):
            self.width[len(self.names) + 1 + i] = 16
        self.n_parts = len(self.names) + 1 + len(self.viewed)
        self.room = self.carve(rows)
        self.rows = rows

    cdef _Room carve(self, size_t rows):
        """A room for ``rows`` rows of every part, with the parts' offsets set in it."""
        cdef size_t total = 0
        cdef int i
        for i in range(self.n_parts):
            self.offset[i] = total
            total += aligned(rows * self.width[i])
        return new_room(total)

    cdef char* part(self, int i) noexcept:
        return self.room.at + self.offset[i]

    def reserve(self, Py_ssize_t rows, Py_ssize_t keep):
        """Room for at least ``rows`` rows, the first ``keep`` of every part kept."""
        cdef _Room old = self.room
        cdef size_t before[MAX_COLUMNS + 3]
        cdef int i
        if rows <= <Py_ssize_t>self.rows:
            return
        if not 0 <= keep <= <Py_ssize_t>self.rows:
            raise ValueError("keep outside the rows held")
        memcpy(before, self.offset, sizeof(before))
        self.room = self.carve(rows)
        self.rows = rows
        for i in range(self.n_parts):
            memcpy(self.part(i), old.at + before[i], keep * self.width[i])

    def put(self, Py_ssize_t row, Columns other, Py_ssize_t first, Py_ssize_t count):
        """Copy rows ``first ... first + count`` of every part of ``other`` (a Columns of
        the same columns and views, or this one: overlapping rows are moved) to rows
        ``row ...`` of this one."""
        cdef int i
        cdef char* dst[MAX_COLUMNS + 3]
        cdef const char* src[MAX_COLUMNS + 3]
        cdef bint overlap = other is self and abs(row - first) < count
        if other.names != self.names or other.viewed != self.viewed:
            raise ValueError("put: the Columns hold other parts")
        if (row < 0 or first < 0 or count < 0 or row + count > <Py_ssize_t>self.rows
                or first + count > <Py_ssize_t>other.rows):
            raise ValueError("put: rows outside the Columns")
        for i in range(self.n_parts):
            dst[i] = self.part(i) + row * self.width[i]
            src[i] = other.part(i) + first * other.width[i]
        with nogil:
            for i in range(self.n_parts):
                if overlap:
                    memmove(dst[i], src[i], count * self.width[i])
                else:
                    copy_out(dst[i], src[i], count * self.width[i])

    def arrays(self, Py_ssize_t count):
        """The first ``count`` rows as numpy arrays: the columns by name, the kinds, and
        the views by name (``(count, 16)`` uint8)."""
        cdef int i, k = len(self.names)
        if not 0 <= count <= <Py_ssize_t>self.rows:
            raise ValueError("count outside the rows held")
        columns = {name: np.frombuffer(self.room, S.DTYPES[name], count, self.offset[i])
                   for i, name in enumerate(self.names)}
        kinds = np.frombuffer(self.room, np.uint8, count, self.offset[k])
        views = {name: np.frombuffer(self.room, np.uint8, 16 * count,
                                     self.offset[k + 1 + i]).reshape(-1, 16)
                 for i, name in enumerate(self.viewed)}
        return columns, kinds, views

    def finish(self, Py_ssize_t count):
        """``arrays(count)``, after moving the parts together and giving back the pages
        past them when the rows held are more than twice ``count`` (a scan that reserved
        far more rows than it found). The Columns holds ``count`` rows afterwards."""
        cdef size_t used = 0, at
        cdef int i
        if not 0 <= count <= <Py_ssize_t>self.rows:
            raise ValueError("count outside the rows held")
        for i in range(self.n_parts):
            used += aligned(count * self.width[i])
        if self.room.span and span_size(used) <= self.room.size // 2:
            used = 0
            for i in range(self.n_parts):     # each part moves down (or stays)
                at = used
                memmove(self.room.at + at, self.part(i), count * self.width[i])
                self.offset[i] = at
                used += aligned(count * self.width[i])
            self.room.trim(used)
            self.rows = count
        return self.arrays(count)
