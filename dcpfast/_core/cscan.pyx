"""Cython scan core: walks concatenated DCP frames without the GIL into numpy columns.

The frame kinds, field layouts and column order come from ``protocol`` and ``schema``
at import time; this module holds only the loops. ``pyscan`` is its pure-Python twin, with
the same names and signatures; what a scan is asked and answers is ``contract``.

The module is one compilation unit in pieces, each one concern: ``scan_tables.pxi`` (the
tables), ``scan_frames.pxi`` (frame checks and resynchronisation), ``scan_prefetch.pxi``
(the cursors that fetch ahead), ``scan_columns.pxi`` (a block's columns),
``scan_binary.pxi`` (binary views and gathered copies), ``scan_walk.pxi`` (the loop),
``scan_memory.pxi`` (output memory, in the memory core's spans: ``cmemory``),
``scan_sniff.pxi`` (collections on or off) and ``scan_bitmaps.pxi`` (validity bitmaps, C
kernels in ``bitmaps.h``). Each Python-facing function lives in the piece of its
concern; this file holds the scan itself (``scan_buffer``), which sets up a walk and its
output memory and runs it.
"""

cimport cython
from libc.stdint cimport int8_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.math cimport pow
from libc.string cimport memcpy, memmove, memset
from cpython.buffer cimport PyBuffer_FillInfo
from cpython.pythread cimport (PyThread_acquire_lock, PyThread_allocate_lock,
                               PyThread_release_lock, PyThread_type_lock, WAIT_LOCK)
from libc.stdlib cimport free, realloc

import numpy as np

from .. import protocol as P
from .. import schema as S
from . import contract
from .cmemory cimport copy_out, give, span_size, span_trim, take
from .contract import ScanResult
from .wire cimport DCP_LE64, DCP_PREFETCH, DCP_PREFETCH_L2, be16, be32, be64, le32, le64

DEF MAX_KINDS = 64
DEF MAX_FIELDS = 256
DEF MAX_COLUMNS = 64
DEF BLOCK = 512            # frames decoded before their columns are written
DEF PREFETCH_NEAR = 1024  # input bytes fetched ahead of the frame being parsed: at least ...
DEF PREFETCH_FAR = 131072 # ... and at most
DEF ESTIMATE_PREFETCH = 4096  # input bytes fetched ahead while the first frames are measured
DEF MAX_UINT64 = 0xFFFFFFFFFFFFFFFF

# rows reserved before the scan has measured the frames, and the mean frame length below
# which a reservation is no guide (the rule of contract.FIRST_ROWS)
cdef size_t FIRST_ROWS = contract.FIRST_ROWS
cdef size_t MIN_MEAN = contract.MIN_MEAN

cdef enum:
    OK = 0
    INCOMPLETE = -1

include "scan_tables.pxi"
include "scan_frames.pxi"
include "scan_prefetch.pxi"
include "scan_columns.pxi"
include "scan_binary.pxi"
include "scan_walk.pxi"
include "scan_memory.pxi"
include "scan_sniff.pxi"
include "scan_bitmaps.pxi"


def scan_buffer(const uint8_t[::1] buf, request, Columns out=None, Py_ssize_t first=0):
    """Scan ``buf[request.start:]`` as ``request`` (a ``contract.ScanRequest``) says; a
    ``contract.ScanResult``. The rows go to ``out`` from its row ``first`` when given
    (grown as needed, its rows before ``first`` kept, and left as it is after the scan),
    else to a ``Columns`` of the scan's own. A frame limit (``request.max_frames``) that
    fits the rows ``out`` holds from ``first`` never grows it: a thread may write rows of
    the same ``Columns`` past them meanwhile."""
    cdef Walk w
    cdef char* cols[MAX_COLUMNS]
    cdef int rc
    names = tuple(request.names)
    start_walk(&w, buf, request)
    # the views of the key and value columns asked for
    viewed = tuple(name for name, pair in S.BINARY.items()
                   if request.view_bits and set(pair) <= set(names))
    own = out is None
    if own:
        if first:
            raise ValueError("a first row needs an output")
        out = Columns(names, w.cap, viewed)
    elif out.names != names or not set(viewed) <= set(out.viewed):
        raise ValueError("the output holds other columns than the request names")
    if not 0 <= first <= <Py_ssize_t>out.rows:
        raise ValueError(f"first row {first} outside the {out.rows} rows of the output")
    w.first = w.count = first
    w.limit += first
    w.cap += first
    out.reserve(w.cap, first)
    w.cap = out.rows
    try:
        while True:
            point(&w, cols, out, viewed)
            with nogil:
                rc = walk(&w)
            if rc < 0:
                raise MemoryError()
            if rc == 0:
                break
            # the columns are full: larger ones, with the rows written so far copied over
            out.reserve(more_rows(&w), w.count)
            w.cap = out.rows
        return result(&w, request, out, viewed, own)
    finally:
        free(w.regions)


cdef size_t estimate_frames(const uint8_t* buf, size_t pos, size_t end) noexcept nogil:
    """Frames in ``buf[pos:end]`` judged by the mean length of its first frames, plus room."""
    cdef size_t seen = 0, start = pos, length, fetched = pos
    while seen < 256 and end - pos >= 24 and magic_class[buf[pos]] >= 0:
        # the lengths form a chain of dependent reads: fetch ahead of it, or a cold input
        # costs one memory latency a frame (from the frame on: a long frame's body is
        # never read here, so the lines it spans are not fetched)
        if fetched < pos:
            fetched = pos
        while fetched < end and fetched < pos + ESTIMATE_PREFETCH:
            DCP_PREFETCH(buf + fetched)
            fetched += 64
        length = <size_t>24 + be32(buf + pos + 8)
        if length > end - pos:
            break
        pos += length
        seen += 1
    if seen == 0:
        return 64
    return (end - start) // ((pos - start) // seen) * 9 // 8 + 64


cdef void start_walk(Walk* w, const uint8_t[::1] buf, request) except *:
    """Check ``request`` and set up the walk it asks for, with ``w.cap`` the rows to
    reserve first (as many as the first frames suggest)."""
    cdef Py_ssize_t start = request.start, max_frames = request.max_frames
    cdef int view_bits = request.view_bits
    cdef size_t upper
    if start < 0 or start > buf.shape[0]:
        raise ValueError(f"start {start} outside the buffer of {buf.shape[0]} bytes")
    if not 0 <= view_bits <= 31:
        raise ValueError(f"view_bits {view_bits} outside 0..31")
    if not 0 <= request.base <= MAX_UINT64 - buf.shape[0]:
        raise ValueError(f"base {request.base} puts offsets outside 0..2**64-1")
    w.buf = &buf[0] if buf.shape[0] else <const uint8_t*>""
    w.end = buf.shape[0]
    w.stop = w.end if request.stop < 0 else min(<size_t>request.stop, w.end)
    w.collections, w.skip, w.final = request.collections, request.skip, request.final
    w.max_frame = request.max_frame_size
    w.base = request.base
    w.pos = w.start = start
    w.unverified = request.unverified
    w.window_bits = view_bits
    w.view_too_long = False
    w.stalled = False
    w.first = w.count = w.n_regions = w.cap_regions = 0
    w.regions = NULL
    w.fail_code = 0
    upper = (w.end - start) // 24 + 1          # no frame is shorter than its header
    w.limit = min(<size_t>max_frames, upper) if max_frames >= 0 else upper
    w.cap = min(w.limit, estimate_frames(w.buf, start, max(w.stop, start)))
    if w.cap > (max(w.stop, start) - start) // MIN_MEAN + FIRST_ROWS:
        w.cap = min(w.cap, FIRST_ROWS)      # the first frames are no guide: measure, then grow


cdef void point(Walk* w, char** cols, Columns out, tuple viewed) except *:
    """Point the walk at its output memory (again after it grew)."""
    cdef int c, k = len(out.names)
    for c in range(n_columns):
        cols[c] = NULL
    for i, name in enumerate(out.names):
        cols[S.INDEX[name]] = out.part(i)
    w.cols = cols
    w.kinds = <uint8_t*>out.part(k)
    for c, name in enumerate(S.BINARY):
        w.views[c] = <uint8_t*>out.part(k + 1 + out.viewed.index(name)) \
            if name in viewed else NULL


cdef size_t more_rows(const Walk* w) noexcept nogil:
    """The rows to reserve when the columns are full: room for the rest at the mean frame
    length so far."""
    cdef size_t mean = max(24, (w.pos - w.start) // max(w.count - w.first, 1))
    cdef size_t rows = (w.end - w.pos) // mean * 9 // 8 + 1024
    if rows > (w.end - w.pos) // MIN_MEAN + FIRST_ROWS:
        rows = w.count + 1024        # the mean is no guide either: double
    return min(w.limit, w.count + rows)


cdef object result(const Walk* w, request, Columns out, tuple viewed, bint own):
    """The ``ScanResult`` of a finished walk: its columns cut to the rows written (and the
    pages past them given back, when ``out`` is the scan's own)."""
    if w.fail_code:
        return ScanResult(0, request.start, {}, np.zeros(0, np.uint8), [], False, None,
                          (w.fail_pos, w.fail_code, w.fail_a, w.fail_b))
    arrays, kinds, views = out.finish(w.count) if own else out.arrays(w.count)
    if w.first:
        arrays = {name: column[w.first:] for name, column in arrays.items()}
        kinds = kinds[w.first:]
        views = {name: view[w.first:] for name, view in views.items()}
    if request.view_bits and not w.view_too_long:
        views = {name: views[name] for name in viewed}
    else:
        views = None
    regions = [(w.regions[r].start, w.regions[r].end - w.regions[r].start,
                w.regions[r].code, w.regions[r].a, w.regions[r].b)
               for r in range(w.n_regions)]
    return ScanResult(w.count - w.first, w.pos, arrays, kinds, regions, bool(w.unverified),
                      views)
