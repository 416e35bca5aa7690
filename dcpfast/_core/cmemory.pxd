# The memory core's C-level functions, for the compiled cores that keep memory in its span
# caches: ``from .cmemory cimport ...`` (Cython shares them through the module's C API).
# The caches themselves (spans.h) live in cmemory alone.

cdef extern from "span_flags.h":
    # the flags of a request: tracemalloc sees its use (numpy's arrays); fresh pages asked
    # for as huge pages (a table read at random); the state engine's working memory
    enum:
        SPAN_TRACED "DCP_SPAN_TRACED"
        SPAN_HUGE "DCP_SPAN_HUGE"
        SPAN_WORK "DCP_SPAN_WORK"

# ``n`` bytes: from DCP_SPAN_MIN up a span of the cache ``flags`` names (its size in
# ``got``), below it the allocator's (``got`` 0); NULL when out of memory. ``give`` gives
# back what it gave (``at`` may be NULL).
cdef char* take(size_t n, size_t* got, int flags) noexcept nogil
cdef void give(void* at, size_t got, int flags) noexcept nogil

# A span of at least ``n`` bytes, whatever ``n`` (its size in ``got``); one grown to ``n``
# bytes, its first ``keep`` kept (NULL, the span as it was, when out of memory); one given
# back, of its current size.
cdef char* span_take(size_t n, size_t* got, int flags) noexcept nogil
cdef char* span_grow(char* at, size_t size, size_t keep, size_t n, size_t* got,
                     int flags) noexcept nogil
cdef void span_give(void* at, size_t size, int flags) noexcept nogil

# The size of the span a request of ``n`` bytes gets.
cdef size_t span_size(size_t n) noexcept nogil

# A span of the scan's output memory in use, of ``size`` bytes, cut to its first ``keep``
# (whole pages): the bytes it holds now (``size`` where pages cannot be given back).
cdef size_t span_trim(char* at, size_t keep, size_t size) noexcept nogil

# ``n`` bytes copied to output memory that is not read again soon (large copies with
# streaming stores).
cdef void copy_out(char* dst, const char* src, size_t n) noexcept nogil
