# Output memory. Columns of a large scan are mapped spans that go back to a cache when their
# last array is dropped: the next scan (or the next batch of iter_batches) writes into pages
# that are already resident instead of faulting in and zeroing fresh ones, which costs as
# much as the scan itself. The cache holds at most KEEP_BYTES, and a span for at most
# KEEP_SECONDS (checked whenever a span is taken or given back). Small requests use the
# allocator. The platform layer (mapping, unmapping, growth, the clock) is spans.h.

DEF SPAN_MIN = 1 << 20        # requests from this size up are mapped and recycled
DEF KEEP_SPANS = 128          # cache size: spans ...
DEF KEEP_BYTES = 512 << 20    # ... and bytes
DEF KEEP_SECONDS = 2.0

cdef extern from "spans.h":
    bint DCP_CAN_GROW
    void* DCP_GROW(void* p, size_t old, size_t new) nogil
    void* dcp_map(size_t size) nogil
    void dcp_unmap(void* p, size_t size) nogil
    size_t dcp_unmap_tail(void* p, size_t keep, size_t size) nogil
    double dcp_now() nogil

cdef char* kept_at[KEEP_SPANS]          # oldest first
cdef size_t kept_size[KEEP_SPANS]
cdef double kept_since[KEEP_SPANS]
cdef size_t n_kept = 0, kept_bytes = 0
cdef size_t live_bytes = 0, peak_bytes = 0     # mapped spans in use
cdef PyThread_type_lock cache_lock = PyThread_allocate_lock()   # for free-threaded builds


cdef size_t span_size(size_t n) noexcept nogil:
    """``n`` rounded up to a size class: sixteenths of a power of two, whole pages."""
    cdef size_t step = 4096
    while step * 16 <= n:
        step *= 2
    return (n + step - 1) // step * step


cdef void unkeep(int i) noexcept nogil:
    global n_kept, kept_bytes
    kept_bytes -= kept_size[i]
    n_kept -= 1
    memmove(&kept_at[i], &kept_at[i + 1], (n_kept - i) * sizeof(char*))
    memmove(&kept_size[i], &kept_size[i + 1], (n_kept - i) * sizeof(size_t))
    memmove(&kept_since[i], &kept_since[i + 1], (n_kept - i) * sizeof(double))


cdef void expire(double now) noexcept nogil:
    """Unmap the spans kept longer than KEEP_SECONDS."""
    while n_kept and now - kept_since[0] > KEEP_SECONDS:
        dcp_unmap(kept_at[0], kept_size[0])
        unkeep(0)


cdef int kept_for(size_t size) noexcept nogil:
    """The kept span to serve a request of ``size`` bytes: the smallest that holds it with
    at most a quarter to spare, else (where mappings can grow) the largest smaller one;
    -1 if none."""
    cdef int i, fit = -1, under = -1
    for i in range(n_kept):
        if size <= kept_size[i] <= size + size // 4:
            if fit < 0 or kept_size[i] < kept_size[fit]:
                fit = i
        elif DCP_CAN_GROW and kept_size[i] < size and (under < 0 or kept_size[i] > kept_size[under]):
            under = i
    return fit if fit >= 0 else under


cdef class _Room:
    """Writable memory for one column or buffer, exposed through the buffer protocol."""
    cdef char* at
    cdef size_t size          # bytes exposed
    cdef size_t mapped        # bytes mapped (0: from the allocator)

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.at, self.size, 0, flags)

    def __dealloc__(self):
        global live_bytes, n_kept, kept_bytes
        cdef double now
        if self.at == NULL:
            return
        if not self.mapped:
            PyMem_RawFree(self.at)
            return
        PyThread_acquire_lock(cache_lock, WAIT_LOCK)
        now = dcp_now()
        expire(now)
        live_bytes -= self.mapped
        if self.mapped > KEEP_BYTES:
            dcp_unmap(self.at, self.mapped)
        else:
            while n_kept and (n_kept == KEEP_SPANS or kept_bytes + self.mapped > KEEP_BYTES):
                dcp_unmap(kept_at[0], kept_size[0])
                unkeep(0)
            kept_at[n_kept] = self.at
            kept_size[n_kept] = self.mapped
            kept_since[n_kept] = now
            n_kept += 1
            kept_bytes += self.mapped
        PyThread_release_lock(cache_lock)

    cdef void trim(self, size_t used) noexcept nogil:
        """Give back the pages of a mapped span past ``used`` bytes when it is more than
        twice that (a scan that reserved far more rows than it found)."""
        global live_bytes
        cdef size_t keep = span_size(used) if used else 4096
        if self.mapped and keep <= self.mapped // 2:
            keep = dcp_unmap_tail(self.at, keep, self.mapped)
            PyThread_acquire_lock(cache_lock, WAIT_LOCK)
            live_bytes -= self.mapped - keep
            PyThread_release_lock(cache_lock)
            self.mapped = keep
            self.size = min(self.size, keep)


cdef _Room new_room(size_t n):
    global live_bytes, peak_bytes
    cdef _Room r = _Room.__new__(_Room)
    cdef size_t size
    cdef int i
    cdef void* at = NULL
    r.size = n
    if n < SPAN_MIN:
        if n_kept:
            PyThread_acquire_lock(cache_lock, WAIT_LOCK)
            expire(dcp_now())
            PyThread_release_lock(cache_lock)
        r.at = <char*>PyMem_RawMalloc(n if n else 1)
        if r.at == NULL:
            raise MemoryError()
        return r
    size = span_size(n)
    PyThread_acquire_lock(cache_lock, WAIT_LOCK)
    expire(dcp_now())
    i = kept_for(size)
    if i >= 0:
        at = kept_at[i]
        if kept_size[i] < size:          # its pages stay; only the new tail is fresh
            at = DCP_GROW(at, kept_size[i], size)
            if at == NULL:
                dcp_unmap(kept_at[i], kept_size[i])
        else:
            size = kept_size[i]
        unkeep(i)
    if at == NULL:
        at = dcp_map(size)
    if at != NULL:
        live_bytes += size
        peak_bytes = max(peak_bytes, live_bytes)
    PyThread_release_lock(cache_lock)
    if at == NULL:
        raise MemoryError()
    r.at, r.mapped = <char*>at, size
    return r


def room(Py_ssize_t n):
    """``n`` bytes of writable, uninitialised memory (a buffer-protocol object)."""
    if n < 0:
        raise ValueError("negative size")
    return new_room(n)


def mapped(bint reset=False):
    """Bytes of mapped spans in use now, the most in use at once since the last reset, and
    the bytes kept for reuse (the allocator's share is visible to tracemalloc)."""
    global peak_bytes
    found = live_bytes, peak_bytes, kept_bytes
    if reset:
        peak_bytes = live_bytes
    return found


cdef _Room regrow(_Room old, size_t count, size_t rows, size_t width):
    """A larger column holding the first ``count`` rows of ``old``."""
    cdef _Room r = new_room(rows * width)
    if count:
        memcpy(r.at, old.at, count * width)
    return r


cdef object finish(_Room r, size_t count, dtype):
    """The first ``count`` rows as a numpy array."""
    r.trim(count * dtype.itemsize)
    return np.frombuffer(r, dtype, count)
