# cython: language_level=3
"""The memory core: the recycled span caches of the compiled cores' large memory (C in
``spans.h``, compiled into this module alone, so that each cache exists once in a
process), numpy's data-memory handler over the state engine's cache (``numpy_spans``,
C in ``numpy_spans.h``), and what the caches hold (``figures``, ``untraced``), with
``reset_peaks`` and ``release``. ``pymemory`` is its pure-Python twin, with the same
names and signatures.

The other compiled cores take their memory through the C-level functions that
``cmemory.pxd`` declares (``from .cmemory cimport ...``): the scan its output memory
(cache 0), the state core its key index's tables and its scratch (the working memory,
``SPAN_WORK``, cache 1).
"""

cimport cython

cdef extern from "spans.h":
    ctypedef struct dcp_figures:
        size_t in_use, peak, kept, spans, untraced, untraced_peak
    void dcp_spans_init() nogil
    char* dcp_take(size_t n, size_t* got, int flags) nogil
    void dcp_give(void* at, size_t got, int flags) nogil
    char* dcp_span_take(size_t n, size_t* got, int flags) nogil
    char* dcp_span_grow(char* at, size_t size, size_t keep, size_t n, size_t* got,
                        int flags) nogil
    void dcp_span_give(char* at, size_t size, int flags) nogil
    size_t dcp_span_size(size_t n) nogil
    size_t dcp_unmap_tail(void* p, size_t keep, size_t size) nogil
    void dcp_span_shrunk(size_t size) nogil
    void dcp_put(char* dst, const char* src, size_t n) nogil
    dcp_figures dcp_cache_figures(int i) nogil
    void dcp_span_reset() nogil
    size_t dcp_span_release() nogil

dcp_spans_init()

DEF N_CACHES = 2
# the caches by name, in spans.h's order
cdef tuple CACHE_NAMES = ("output", "working")


cdef char* take(size_t n, size_t* got, int flags) noexcept nogil:
    return dcp_take(n, got, flags)


cdef void give(void* at, size_t got, int flags) noexcept nogil:
    dcp_give(at, got, flags)


cdef char* span_take(size_t n, size_t* got, int flags) noexcept nogil:
    return dcp_span_take(n, got, flags)


cdef char* span_grow(char* at, size_t size, size_t keep, size_t n, size_t* got,
                     int flags) noexcept nogil:
    return dcp_span_grow(at, size, keep, n, got, flags)


cdef void span_give(void* at, size_t size, int flags) noexcept nogil:
    dcp_span_give(<char*>at, size, flags)


cdef size_t span_size(size_t n) noexcept nogil:
    return dcp_span_size(n)


cdef size_t span_trim(char* at, size_t keep, size_t size) noexcept nogil:
    cdef size_t now = dcp_unmap_tail(at, keep, size)
    dcp_span_shrunk(size - now)
    return now


cdef void copy_out(char* dst, const char* src, size_t n) noexcept nogil:
    dcp_put(dst, src, n)


cdef extern from "numpy_spans.h":
    object dcp_np_capsule()
    object dcp_np_set_handler(object handler)
    bint dcp_np_replaceable(object handler)

cdef object _NUMPY_SPANS = dcp_np_capsule()


@cython.auto_pickle(False)
cdef class numpy_spans:
    """A context in which numpy's arrays of 64 KiB and more made by this thread's current
    context take their memory from the state engine's span cache (numpy_spans.h says
    why): work that makes and drops many large arrays runs in it. The handler before it
    comes back on leaving; a context that set one of its own keeps it."""
    cdef object previous
    cdef bint installed

    def __enter__(self):
        current = dcp_np_set_handler(_NUMPY_SPANS)
        self.installed = dcp_np_replaceable(current)
        if self.installed:
            self.previous = current
        else:                       # someone's own handler: theirs stays
            dcp_np_set_handler(current)
        return self

    def __exit__(self, *exc):
        if self.installed:
            dcp_np_set_handler(self.previous)
            self.installed, self.previous = False, None
        return False


def figures():
    """What each cache holds, by name ("output": the scan's output memory, "working": the
    state engine's working memory): the bytes of its spans in use, the most in use at
    once since the last ``reset_peaks``, and the bytes and spans it keeps for reuse."""
    cdef dcp_figures f
    cdef int i
    found = {}
    for i in range(N_CACHES):
        f = dcp_cache_figures(i)
        found[CACHE_NAMES[i]] = (f.in_use, f.peak, f.kept, f.spans)
    return found


def untraced():
    """The bytes of spans in use that tracemalloc does not see (numpy reports its arrays
    in spans to it itself), and the most of them in use at once since the last
    ``reset_peaks`` (each cache's added: an upper bound): what a measure of memory adds to
    tracemalloc's, so that each byte counts once."""
    cdef dcp_figures f
    cdef size_t now = 0, peak = 0
    cdef int i
    for i in range(N_CACHES):
        f = dcp_cache_figures(i)
        now += f.untraced
        peak += f.untraced_peak
    return now, peak


def reset_peaks():
    """Start every cache's peaks again from what it has in use now."""
    dcp_span_reset()


def release():
    """Give back to the system now every span the caches keep for reuse (they would give
    them back after two idle seconds); the bytes given back."""
    cdef size_t freed
    with nogil:
        freed = dcp_span_release()
    return freed
