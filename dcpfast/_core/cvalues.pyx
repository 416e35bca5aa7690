# cython: language_level=3
"""The per-value loops behind ``values.values``, compiled; ``pyvalues`` is the pure-Python
twin, with the same names and signatures, and its docstring says how values, their
buffers and their problems are given. No Python object is made per value here except
the two memoryviews handed to the Snappy library for a block the loop here finds unsound,
and a problem's tuple; the other blocks are inflated, and the xattr sections checked and
copied, without the GIL (threads decode runs of values at once).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memchr, memcmp, memcpy, memset
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.buffer cimport PyBUF_READ, PyBUF_WRITE

import numpy as np

from .. import protocol as P
from .wire cimport DCP_PREFETCH, be32

cdef int LEN = P.XATTR_LENGTH_SIZE
cdef uint32_t MIN_PAIR = P.XATTR_MIN_PAIR
cdef int MAX_PREAMBLE = P.SNAPPY_MAX_PREAMBLE
cdef int64_t GROW = P.SNAPPY_MAX_EXPANSION[0], SHRINK = P.SNAPPY_MAX_EXPANSION[1]
_VP = P.ValueProblem
cdef int SNAPPY_PREAMBLE = _VP.SNAPPY_PREAMBLE, SNAPPY_LENGTH = _VP.SNAPPY_LENGTH
cdef int XATTR_SHORT = _VP.XATTR_SHORT, XATTR_SECTION = _VP.XATTR_SECTION
cdef int XATTR_PAIR_HEADER = _VP.XATTR_PAIR_HEADER, XATTR_PAIR_LENGTH = _VP.XATTR_PAIR_LENGTH
cdef int XATTR_KEY = _VP.XATTR_KEY, XATTR_VALUE = _VP.XATTR_VALUE
cdef int XATTR_UTF8 = _VP.XATTR_UTF8, XATTR_DUPLICATE = _VP.XATTR_DUPLICATE
# pairs compared pairwise for duplicate keys; longer sections use a set
DEF SMALL_SECTION = 16
DEF GATHER_PREFETCH = 16     # values fetched ahead of the one copied (up to 4 lines each)
DEF READ_PREFETCH = 8        # values fetched ahead of the one read in order (stream order)
cdef char _nothing[1]


cdef extern from "xattr_keys.h":
    int64_t dcp_first_duplicate(const uint8_t* v, const uint32_t* at, const uint32_t* len,
                                size_t n) noexcept nogil


cdef struct Keys:           # the keys of a long section, in pair order
    uint32_t* at            # offsets in the value
    uint32_t* len
    size_t n, cap


def snappy_lengths(const uint8_t[::1] buf, const int64_t[::1] starts,
                   const int64_t[::1] lengths, int64_t[::1] out):
    """``out[i]`` = the uncompressed length a raw Snappy block declares, or -1 when its
    varint preamble is broken or declares more than the block can inflate to."""
    cdef Py_ssize_t i, n = starts.shape[0]
    cdef int64_t declared, size, used
    cdef int shift
    cdef uint8_t byte
    _check(buf, starts, lengths, n)
    cdef const uint8_t* base = _base(buf)
    problems = []
    for i in range(n):
        if i + READ_PREFETCH < n and base != NULL:
            DCP_PREFETCH(base + starts[i + READ_PREFETCH])
        size = lengths[i]
        declared = shift = used = 0
        while True:
            if used == size or used == MAX_PREAMBLE:
                declared = -1
                break
            byte = buf[starts[i] + used]
            used += 1
            if used == MAX_PREAMBLE and byte > 0x0F:
                declared = -1
                break
            declared |= <int64_t>(byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if declared < 0:
            out[i] = -1
            problems.append((i, SNAPPY_PREAMBLE, 0, 0))
        elif declared * SHRINK > (size - used) * GROW:
            out[i] = -1
            problems.append((i, SNAPPY_LENGTH, declared, size))
        else:
            out[i] = declared
    return problems


cdef int64_t _tag(const uint8_t* src, int64_t n, int64_t* ip, int64_t* offset) noexcept nogil:
    """The next element of a raw Snappy block at ``src[ip[0]:n]``: its length, with
    ``offset`` -1 for a literal (whose bytes then start at ``ip[0]``) or the distance back
    of a copy; ``ip[0]`` moves past the element's header. -1 when the block ends inside
    the header."""
    cdef uint8_t tag = src[ip[0]]
    cdef int64_t length, k, j
    ip[0] += 1
    if tag & 3 == 0:                               # a literal
        length = tag >> 2
        if length >= 60:                           # its length in 1 to 4 more bytes
            k = length - 59
            if k > n - ip[0]:
                return -1
            length = 0
            for j in range(k):
                length |= <int64_t>src[ip[0] + j] << (8 * j)
            ip[0] += k
        offset[0] = -1
        return length + 1
    if tag & 3 == 1:
        if n - ip[0] < 1:
            return -1
        offset[0] = (<int64_t>(tag >> 5) << 8) | src[ip[0]]
        ip[0] += 1
        return 4 + ((tag >> 2) & 7)
    k = 2 if tag & 3 == 2 else 4
    if n - ip[0] < k:
        return -1
    offset[0] = 0
    for j in range(k):
        offset[0] |= <int64_t>src[ip[0] + j] << (8 * j)
    ip[0] += k
    return 1 + (tag >> 2)


cdef bint _snappy(const uint8_t* src, int64_t n, uint8_t* dst,
                  int64_t size) noexcept nogil:
    """Inflate the raw Snappy block ``src[:n]`` into ``dst[:size]``: whether it inflates to
    exactly ``size`` bytes. Each write is checked to stay in ``dst[:size]`` before it is
    made (an unsound block may leave part of it written)."""
    cdef int64_t ip = 0, op = 0, declared = 0, length, offset, j
    cdef int shift = 0
    cdef uint8_t byte
    while True:                                    # the preamble: the inflated length
        if ip == n or shift > 28:
            return False
        byte = src[ip]
        ip += 1
        declared |= <int64_t>(byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    if declared != size:
        return False
    while ip < n:
        length = _tag(src, n, &ip, &offset)
        if length < 0 or length > size - op:
            return False
        if offset < 0:
            if length > n - ip:
                return False
            memcpy(dst + op, src + ip, length)
            ip += length
        elif offset == 0 or offset > op:
            return False
        else:
            if offset >= length:
                memcpy(dst + op, dst + op - offset, length)
            else:                                  # the copy overlaps what it makes
                for j in range(length):
                    dst[op + j] = dst[op + j - offset]
        op += length
    return op == size


def inflate(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths,
            uint8_t[::1] out, const int64_t[::1] bounds, decompress_into):
    """Inflate block ``i`` into ``out[bounds[i]:bounds[i + 1]]``: without the GIL by the
    loop here, and a block it finds unsound with ``decompress_into(source, destination)``
    (the library's, which words the problem, and has the last word); a block the library
    rejects, or that fills its slot short, is a problem, and its slot zeros (what either
    inflater wrote of it before it gave up is not kept)."""
    cdef Py_ssize_t i, n = starts.shape[0]
    cdef int64_t lo, hi
    # never hand the library a NULL pointer, even for an empty slot
    cdef char* src = <char*>&buf[0] if buf.shape[0] else _nothing
    cdef char* dst = <char*>&out[0] if out.shape[0] else _nothing
    _check(buf, starts, lengths, n)
    if bounds.shape[0] != n + 1 or bounds[0] < 0 or bounds[n] > out.shape[0]:
        raise ValueError("inflate: bounds do not match")
    for i in range(n):
        if bounds[i + 1] < bounds[i]:
            raise ValueError("inflate: bounds do not match")
    cdef uint8_t[::1] unsound = np.zeros(n, np.uint8)
    with nogil:
        for i in range(n):
            if i + READ_PREFETCH < n:
                _fetch(<uint8_t*>src + starts[i + READ_PREFETCH], lengths[i + READ_PREFETCH])
            lo, hi = bounds[i], bounds[i + 1]
            if not _snappy(<uint8_t*>src + starts[i], lengths[i], <uint8_t*>dst + lo,
                           hi - lo):
                unsound[i] = 1
    problems = []
    for i in range(n):
        if not unsound[i]:
            continue
        lo, hi = bounds[i], bounds[i + 1]
        try:
            written = decompress_into(
                PyMemoryView_FromMemory(src + starts[i], lengths[i], PyBUF_READ),
                PyMemoryView_FromMemory(dst + lo, hi - lo, PyBUF_WRITE))
        except Exception as exc:        # the library's own error types vary by version
            problems.append((i, _VP.SNAPPY, str(exc), 0))
        else:
            if written == hi - lo:
                continue
            problems.append((i, _VP.SNAPPY, f"inflated to {written} of {hi - lo} bytes", 0))
        memset(dst + lo, 0, hi - lo)
    return problems


cdef void _check(const uint8_t[::1] buf, const int64_t[::1] starts,
                 const int64_t[::1] lengths, Py_ssize_t n) except *:
    cdef Py_ssize_t i
    if lengths.shape[0] != n:
        raise ValueError("starts and lengths differ in length")
    for i in range(n):
        if starts[i] < 0 or lengths[i] < 0 or lengths[i] > buf.shape[0] - starts[i]:
            raise ValueError(f"value {i} lies outside its buffer")


cdef inline int _utf8(const uint8_t* p, int64_t n) noexcept nogil:
    """Whether ``p[:n]`` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF);
    ASCII is passed over eight bytes at a time."""
    cdef int64_t i = 0
    cdef uint8_t c, lo, hi
    cdef int more, k
    cdef uint64_t w
    while i < n:
        if i + 8 <= n:
            memcpy(&w, p + i, 8)
            if (w & 0x8080808080808080ULL) == 0:
                i += 8
                continue
        c = p[i]
        if c < 0x80:
            i += 1
            continue
        lo, hi = 0x80, 0xBF
        if 0xC2 <= c <= 0xDF:
            more = 1
        elif 0xE0 <= c <= 0xEF:
            more = 2
            if c == 0xE0:
                lo = 0xA0
            elif c == 0xED:
                hi = 0x9F
        elif 0xF0 <= c <= 0xF4:
            more = 3
            if c == 0xF0:
                lo = 0x90
            elif c == 0xF4:
                hi = 0x8F
        else:
            return 0
        if n - i - 1 < more or not lo <= p[i + 1] <= hi:
            return 0
        for k in range(2, more + 1):
            if not 0x80 <= p[i + k] <= 0xBF:
                return 0
        i += more + 1
    return 1


cdef int _section(const uint8_t* v, int64_t size, int64_t* end, int64_t* count,
                  int64_t* keys, int64_t* texts, int64_t* a, int64_t* b) noexcept nogil:
    """Check one value's xattr section; 0 or a problem code with its details in a, b, or
    -1 when memory runs out. The problem reported is the first in pair order: the keys of
    a section longer than ``SMALL_SECTION`` pairs are checked for duplicates once the walk
    has stopped, among the pairs before the one it stopped at."""
    cdef Keys held
    cdef int64_t b_in = b[0], first
    cdef int code
    held.at = held.len = NULL
    held.n = held.cap = 0
    code = _section_pairs(v, size, end, count, keys, texts, a, b, &held)
    if code >= 0 and held.n:
        first = dcp_first_duplicate(v, held.at, held.len, held.n)
        if first == -2:
            code = -1
        elif first >= 0:
            a[0], b[0] = <int64_t>held.at[first] - LEN, b_in
            code = XATTR_DUPLICATE
    free(held.at)
    free(held.len)
    return code


cdef inline int _hold(Keys* held, int64_t at, int64_t length) noexcept nogil:
    """Append a key to ``held``; -1 when memory runs out."""
    cdef size_t cap
    cdef uint32_t* grown
    if held.n == held.cap:
        cap = 2 * held.cap if held.cap else 64
        grown = <uint32_t*>realloc(held.at, cap * sizeof(uint32_t))
        if grown == NULL:
            return -1
        held.at = grown
        grown = <uint32_t*>realloc(held.len, cap * sizeof(uint32_t))
        if grown == NULL:
            return -1
        held.len = grown
        held.cap = cap
    held.at[held.n], held.len[held.n] = <uint32_t>at, <uint32_t>length
    held.n += 1
    return 0


cdef inline int _section_pairs(const uint8_t* v, int64_t size, int64_t* end, int64_t* count,
                               int64_t* keys, int64_t* texts, int64_t* a, int64_t* b,
                               Keys* held) noexcept nogil:
    """``_section``'s walk: the first ``SMALL_SECTION`` keys compared pairwise as they
    come, every key of a longer section put in ``held``, which the caller frees."""
    cdef int64_t pos, length, nul, j
    cdef const uint8_t* pair
    cdef const uint8_t* hit
    cdef int64_t key_at[SMALL_SECTION]
    cdef int64_t key_len[SMALL_SECTION]
    if size < LEN:
        a[0] = size
        return XATTR_SHORT
    end[0] = LEN + <int64_t>be32(v)
    if end[0] > size:
        a[0], b[0] = end[0] - LEN, size
        return XATTR_SECTION
    pos = LEN
    count[0] = keys[0] = texts[0] = 0
    while pos < end[0]:
        a[0] = pos
        if end[0] - pos < LEN:
            b[0] = end[0]
            return XATTR_PAIR_HEADER
        length = be32(v + pos)
        if length < MIN_PAIR or length > end[0] - pos - LEN:
            b[0] = length
            return XATTR_PAIR_LENGTH
        pair = v + pos + LEN
        hit = <const uint8_t*>memchr(pair, 0, length)
        nul = -1 if hit == NULL else hit - pair
        if nul < 1 or nul > length - 2:
            return XATTR_KEY
        if pair[length - 1] != 0 or memchr(pair + nul + 1, 0, length - nul - 2) != NULL:
            return XATTR_VALUE
        if not _utf8(pair, nul) or not _utf8(pair + nul + 1, length - nul - 2):
            return XATTR_UTF8
        if count[0] < SMALL_SECTION:
            for j in range(count[0]):
                if key_len[j] == nul and memcmp(v + key_at[j], pair, nul) == 0:
                    return XATTR_DUPLICATE
            key_at[count[0]], key_len[count[0]] = pos + LEN, nul
        else:
            if held.n == 0:
                for j in range(SMALL_SECTION):
                    if _hold(held, key_at[j], key_len[j]) < 0:
                        return -1
            if _hold(held, pos + LEN, nul) < 0:
                return -1
        count[0] += 1
        keys[0] += nul
        texts[0] += length - nul - 2
        pos += LEN + length
    return 0


def parse_xattrs(const uint8_t[::1] a, const uint8_t[::1] b, const uint8_t[::1] source,
                 const int64_t[::1] starts, const int64_t[::1] lengths, int64_t[::1] skip,
                 int64_t[::1] pairs):
    """Check the xattr section of each value: ``skip[i]`` = the section's size with its
    length word (where the body starts), ``pairs[i]`` = its pair count, both 0 for a
    damaged section. Returns the key and value bytes of the sound sections, and the
    problems."""
    cdef Py_ssize_t i, n = starts.shape[0], found = 0
    cdef int64_t end = 0, count = 0, keys = 0, texts = 0, da, db
    cdef int64_t key_bytes = 0, value_bytes = 0
    cdef int code = 0
    cdef const uint8_t* v
    _check_sources(a, b, source, starts, lengths, n)
    if skip.shape[0] != n or pairs.shape[0] != n:
        raise ValueError("parse_xattrs: outputs do not match")
    cdef const uint8_t* pa = _base(a)
    cdef const uint8_t* pb = _base(b)
    # a damaged section's row, code and details, gathered without the GIL
    cdef int64_t[:, ::1] damaged = np.empty((0, 4), np.int64)
    with nogil:
        for i in range(n):
            if i + READ_PREFETCH < n:
                _fetch(_at(pa, pb, source[i + READ_PREFETCH], starts[i + READ_PREFETCH]),
                       lengths[i + READ_PREFETCH])
            skip[i] = pairs[i] = 0
            v = _at(pa, pb, source[i], starts[i])
            da = db = 0
            code = _section(v, lengths[i], &end, &count, &keys, &texts, &da, &db)
            if code < 0:
                break
            if code:
                if found == damaged.shape[0]:
                    with gil:
                        damaged = np.resize(damaged, (2 * found + 16, 4))
                damaged[found, 0], damaged[found, 1] = i, code
                damaged[found, 2], damaged[found, 3] = da, db
                found += 1
                continue
            skip[i], pairs[i] = end, count
            key_bytes += keys
            value_bytes += texts
    if code < 0:
        raise MemoryError()
    problems = [(int(damaged[k, 0]), int(damaged[k, 1]), int(damaged[k, 2]),
                 int(damaged[k, 3])) for k in range(found)]
    return key_bytes, value_bytes, problems


cdef inline const uint8_t* _at(const uint8_t* a, const uint8_t* b, uint8_t src,
                               int64_t start) noexcept nogil:
    return (b if src else a) + start if (b if src else a) != NULL else NULL


cdef inline const uint8_t* _base(const uint8_t[::1] buf) noexcept:
    return &buf[0] if buf.shape[0] else NULL


cdef inline void _fetch(const uint8_t* p, int64_t size) noexcept nogil:
    """Ask for the first lines (up to 4) of the ``size`` bytes at ``p`` ahead of their read:
    values read in stream order lie a frame or more apart, a stride the hardware's own
    prefetch does not follow."""
    cdef int64_t line
    if p != NULL:
        for line in range(0, min(size, 256), 64):
            DCP_PREFETCH(p + line)


cdef void _check_sources(const uint8_t[::1] a, const uint8_t[::1] b,
                         const uint8_t[::1] source, const int64_t[::1] starts,
                         const int64_t[::1] lengths, Py_ssize_t n) except *:
    cdef Py_ssize_t i
    cdef Py_ssize_t size
    if source.shape[0] != n or lengths.shape[0] != n:
        raise ValueError("source, starts and lengths differ in length")
    for i in range(n):
        if source[i] > 1:
            raise ValueError(f"value {i}: source {source[i]} is not 0 or 1")
        size = b.shape[0] if source[i] else a.shape[0]
        if starts[i] < 0 or lengths[i] < 0 or lengths[i] > size - starts[i]:
            raise ValueError(f"value {i} lies outside its buffer")


def xattr_strings(const uint8_t[::1] a, const uint8_t[::1] b, const uint8_t[::1] source,
                  const int64_t[::1] starts, const int64_t[::1] lengths,
                  const int64_t[::1] pairs, int64_t[::1] key_offsets, uint8_t[::1] key_data,
                  int64_t[::1] value_offsets, uint8_t[::1] value_data):
    """Copy the keys and values of the sections ``parse_xattrs`` found sound (rows with
    ``pairs[i] > 0``) into Arrow string buffers: offsets (int64, one past the pairs) and
    data."""
    cdef Py_ssize_t i, n = starts.shape[0]
    cdef int64_t total = 0, pos, length, nul, j, k = 0, kpos = 0, vpos = 0
    cdef const uint8_t* v
    cdef const uint8_t* pair
    _check_sources(a, b, source, starts, lengths, n)
    if pairs.shape[0] != n:
        raise ValueError("xattr_strings: pairs do not match")
    for i in range(n):
        total += pairs[i]
    if key_offsets.shape[0] < total + 1 or value_offsets.shape[0] < total + 1:
        raise ValueError("xattr_strings: offsets too short")
    cdef const uint8_t* pa = _base(a)
    cdef const uint8_t* pb = _base(b)
    cdef const uint8_t* hit
    cdef int bad = 0                      # 1: a value changed since it was parsed; 2: too short
    key_offsets[0] = value_offsets[0] = 0
    with nogil:
        for i in range(n):
            if i + READ_PREFETCH < n:
                _fetch(_at(pa, pb, source[i + READ_PREFETCH], starts[i + READ_PREFETCH]),
                       lengths[i + READ_PREFETCH])
            if pairs[i] <= 0:
                continue
            v = _at(pa, pb, source[i], starts[i])
            pos = LEN
            for j in range(pairs[i]):
                # the section was checked by parse_xattrs; stay inside the value regardless
                if pos + LEN > lengths[i]:
                    bad = 1
                    break
                length = be32(v + pos)
                pair = v + pos + LEN
                if length > lengths[i] - pos - LEN or length < MIN_PAIR:
                    bad = 1
                    break
                hit = <const uint8_t*>memchr(pair, 0, length)
                nul = -1 if hit == NULL else hit - pair
                if nul < 0 or nul > <Py_ssize_t>length - 2 or kpos + nul > key_data.shape[0] \
                        or vpos + length - nul - 2 > value_data.shape[0]:
                    bad = 2
                    break
                if nul:
                    memcpy(&key_data[kpos], pair, nul)
                if length - nul - 2:
                    memcpy(&value_data[vpos], pair + nul + 1, length - nul - 2)
                kpos += nul
                vpos += length - nul - 2
                k += 1
                key_offsets[k] = kpos
                value_offsets[k] = vpos
                pos += LEN + length
            if bad:
                break
    if bad == 1:
        raise ValueError(f"xattr_strings: value {i} changed since it was parsed")
    if bad == 2:
        raise ValueError("xattr_strings: string buffers too short")


cdef int _check_entries(const int32_t[::1] chunk, const int64_t[::1] entry,
                        const int64_t* size, Py_ssize_t k, str name) except -1:
    """Each ``chunk[i]`` negative (a null) or one of the ``k`` chunks, and ``entry[i]``
    one of its ``size[chunk[i]]`` values."""
    cdef Py_ssize_t i
    cdef int64_t c
    for i in range(chunk.shape[0]):
        c = chunk[i]
        if c >= k or (c >= 0 and not 0 <= entry[i] < size[c]):
            raise ValueError(f"{name}: value {i} outside its chunk")
    return 0


cdef list _offset_tables(list offsets, list valids, const int64_t** at64,
                         const int32_t** at32, const uint8_t** ok, int64_t* size):
    """Each chunk's offsets (int32 or int64: one of ``at32``/``at64`` is set), validity
    flags (``_valid_table``) and number of values, for ``extents_at``: the views that keep
    those pointers."""
    cdef Py_ssize_t j
    cdef const int64_t[::1] wide
    cdef const int32_t[::1] narrow
    held = []
    for j in range(len(offsets)):
        if offsets[j].dtype == np.int32:
            narrow = offsets[j]
            held.append(narrow)
            size[j] = narrow.shape[0] - 1
            at32[j] = &narrow[0] if narrow.shape[0] else NULL
        else:
            wide = offsets[j]
            held.append(wide)
            size[j] = wide.shape[0] - 1
            at64[j] = &wide[0] if wide.shape[0] else NULL
        if size[j] < 0:
            raise ValueError("extents_at: a chunk's offsets hold one more than its values")
    held.extend(_valid_table(valids, ok, size, "extents_at"))
    return held


cdef list _valid_table(list valids, const uint8_t** ok, const int64_t* size, str name):
    """Each chunk's validity flags (``bool``, one per value; None: no nulls, ``ok``
    left NULL), for ``extents_at`` and ``chunk_extents``: the views that keep the pointers."""
    cdef Py_ssize_t j
    cdef const uint8_t[::1] flags
    held = []
    for j in range(len(valids)):
        if valids[j] is not None:
            flags = valids[j].view(np.uint8)
            if flags.shape[0] != size[j]:
                raise ValueError(f"{name}: a chunk's validity needs one flag per value")
            held.append(flags)
            ok[j] = &flags[0] if size[j] else NULL
    return held


def extents_at(list offsets, list valids, const int32_t[::1] chunk, const int64_t[::1] entry,
               int64_t[::1] starts, int64_t[::1] bounds, uint8_t[::1] valid):
    """Where each value taken lies, read from its chunk's offsets and validity
    (``pyvalues.extents_at``)."""
    cdef Py_ssize_t i, n = chunk.shape[0], k = len(offsets)
    cdef int64_t e, c, lo = 0, hi = 0
    if entry.shape[0] != n or starts.shape[0] != n or bounds.shape[0] != n + 1 \
            or valid.shape[0] != n:
        raise ValueError("extents_at: one entry, start, bound and answer per value")
    if len(valids) != k:
        raise ValueError("extents_at: one validity per chunk")
    cdef const int64_t** at64 = <const int64_t**>calloc(k + 1, sizeof(int64_t*))
    cdef const int32_t** at32 = <const int32_t**>calloc(k + 1, sizeof(int32_t*))
    cdef const uint8_t** ok = <const uint8_t**>calloc(k + 1, sizeof(uint8_t*))
    cdef int64_t* size = <int64_t*>malloc((k + 1) * sizeof(int64_t))
    if at64 == NULL or at32 == NULL or ok == NULL or size == NULL:
        free(at64)
        free(at32)
        free(ok)
        free(size)
        raise MemoryError()
    try:
        held = _offset_tables(offsets, valids, at64, at32, ok, size)
        _check_entries(chunk, entry, size, k, "extents_at")
        with nogil:
            for i in range(n):
                if i + GATHER_PREFETCH < n and chunk[i + GATHER_PREFETCH] >= 0:
                    c = chunk[i + GATHER_PREFETCH]
                    if at64[c] != NULL:
                        DCP_PREFETCH(at64[c] + entry[i + GATHER_PREFETCH])
                    else:
                        DCP_PREFETCH(at32[c] + entry[i + GATHER_PREFETCH])
                c = chunk[i]
                if c >= 0:
                    e = entry[i]
                    if ok[c] != NULL and not ok[c][e]:
                        c = -1
                    elif at64[c] != NULL:
                        lo, hi = at64[c][e], at64[c][e + 1]
                    else:
                        lo, hi = at32[c][e], at32[c][e + 1]
                if c < 0:
                    starts[i] = 0
                    bounds[i + 1] = bounds[i]
                    valid[i] = 0
                else:
                    starts[i] = lo
                    bounds[i + 1] = bounds[i] + hi - lo
                    valid[i] = 1
    finally:
        free(at64)
        free(at32)
        free(ok)
        free(size)


def spread_extents(const int32_t[::1] chunk, const int64_t[::1] starts,
                   const int64_t[::1] bounds, int32_t[::1] item_chunk, int64_t[::1] item_entry):
    """Each extent's items one by one: their chunk and place there
    (``pyvalues.spread_extents``)."""
    cdef Py_ssize_t i, n = chunk.shape[0]
    cdef int64_t k, at, count
    if starts.shape[0] != n or bounds.shape[0] != n + 1:
        raise ValueError("spread_extents: one start and bound per extent")
    for i in range(n):
        if bounds[i + 1] < bounds[i]:
            raise ValueError("spread_extents: bounds go down")
    if item_chunk.shape[0] != bounds[n] - bounds[0] \
            or item_entry.shape[0] != bounds[n] - bounds[0]:
        raise ValueError("spread_extents: one answer per item")
    with nogil:
        for i in range(n):
            at = bounds[i] - bounds[0]
            count = bounds[i + 1] - bounds[i]
            for k in range(count):
                item_chunk[at + k] = chunk[i]
                item_entry[at + k] = starts[i] + k


def chunk_extents(list sources, list starts, list lengths, list valids,
                  const int32_t[::1] base, const int32_t[::1] chunk, const int64_t[::1] entry,
                  int32_t[::1] source, int64_t[::1] start, int64_t[::1] bounds,
                  uint8_t[::1] valid):
    """Where each value taken lies, its chunk's values given as extents
    (``pyvalues.chunk_extents``)."""
    cdef Py_ssize_t i, j, n = chunk.shape[0], k = len(starts)
    cdef int64_t e, c
    cdef const int32_t[::1] source_column
    cdef const int64_t[::1] start_column
    cdef const int64_t[::1] length_column
    if entry.shape[0] != n or source.shape[0] != n or start.shape[0] != n \
            or bounds.shape[0] != n + 1 or valid.shape[0] != n:
        raise ValueError("chunk_extents: one entry, source, start, bound and answer per value")
    if len(sources) != k or len(lengths) != k or len(valids) != k or base.shape[0] != k:
        raise ValueError("chunk_extents: one source, start, length, validity column and base "
                         "per chunk")
    held = []                               # the views that keep the columns' pointers
    cdef const int32_t** sources_at = <const int32_t**>malloc((k + 1) * sizeof(int32_t*))
    cdef const int64_t** starts_at = <const int64_t**>malloc((k + 1) * sizeof(int64_t*))
    cdef const int64_t** lengths_at = <const int64_t**>malloc((k + 1) * sizeof(int64_t*))
    cdef const uint8_t** ok = <const uint8_t**>calloc(k + 1, sizeof(uint8_t*))
    cdef int64_t* size = <int64_t*>malloc((k + 1) * sizeof(int64_t))
    if sources_at == NULL or starts_at == NULL or lengths_at == NULL or ok == NULL \
            or size == NULL:
        free(sources_at)
        free(starts_at)
        free(lengths_at)
        free(ok)
        free(size)
        raise MemoryError()
    try:
        for j in range(k):
            source_column, start_column, length_column = sources[j], starts[j], lengths[j]
            size[j] = start_column.shape[0]
            if source_column.shape[0] != size[j] or length_column.shape[0] != size[j]:
                raise ValueError("chunk_extents: a chunk's columns differ in length")
            held.extend((source_column, start_column, length_column))
            sources_at[j] = &source_column[0] if size[j] else NULL
            starts_at[j] = &start_column[0] if size[j] else NULL
            lengths_at[j] = &length_column[0] if size[j] else NULL
        held.extend(_valid_table(valids, ok, size, "chunk_extents"))
        _check_entries(chunk, entry, size, k, "chunk_extents")
        with nogil:
            for i in range(n):
                if i + GATHER_PREFETCH < n and chunk[i + GATHER_PREFETCH] >= 0:
                    c = chunk[i + GATHER_PREFETCH]
                    DCP_PREFETCH(starts_at[c] + entry[i + GATHER_PREFETCH])
                    DCP_PREFETCH(lengths_at[c] + entry[i + GATHER_PREFETCH])
                c = chunk[i]
                if c >= 0 and ok[c] != NULL and not ok[c][entry[i]]:
                    c = -1
                if c < 0:
                    source[i] = 0
                    start[i] = 0
                    bounds[i + 1] = bounds[i]
                    valid[i] = 0
                else:
                    e = entry[i]
                    source[i] = base[c] + sources_at[c][e]
                    start[i] = starts_at[c][e]
                    bounds[i + 1] = bounds[i] + lengths_at[c][e]
                    valid[i] = 1
    finally:
        free(sources_at)
        free(starts_at)
        free(lengths_at)
        free(ok)
        free(size)


def gather_chunks(list chunks, const int32_t[::1] chunk, const int64_t[::1] starts,
                  const int64_t[::1] bounds, uint8_t[::1] out):
    """Copy value ``i`` (``bounds[i + 1] - bounds[i]`` bytes at ``starts[i]`` of buffer
    ``chunks[chunk[i]]``) to ``out[bounds[i]:]``: one gather from many buffers (the
    chunks of a column), with no copy of the chunks joined first."""
    cdef Py_ssize_t i, j, n = starts.shape[0], k = len(chunks)
    cdef int64_t size, line
    cdef const uint8_t* src
    cdef const uint8_t[::1] view
    if bounds.shape[0] != n + 1 or chunk.shape[0] != n or bounds[0] < 0 \
            or out.shape[0] < bounds[n]:
        raise ValueError("gather_chunks: bounds do not match")
    held = []                               # the views that keep the chunks' pointers
    cdef const uint8_t** base = <const uint8_t**>malloc((k + 1) * sizeof(uint8_t*))
    cdef int64_t* length = <int64_t*>malloc((k + 1) * sizeof(int64_t))
    if base == NULL or length == NULL:
        free(base)
        free(length)
        raise MemoryError()
    try:
        for j in range(k):
            view = chunks[j]
            held.append(view)
            base[j] = _base(view)
            length[j] = view.shape[0]
        for i in range(n):
            size = bounds[i + 1] - bounds[i]
            if size < 0 or chunk[i] < 0 or chunk[i] >= k or starts[i] < 0 \
                    or size > length[chunk[i]] - starts[i]:
                raise ValueError(f"gather_chunks: range {i} outside its chunk")
        with nogil:
            # the values lie anywhere in the chunks (a column taken into another order):
            # the first lines of one further on are fetched while this one is copied
            for i in range(n):
                if i + GATHER_PREFETCH < n:
                    j = i + GATHER_PREFETCH
                    src = base[chunk[j]] + starts[j]
                    for line in range(0, min(bounds[j + 1] - bounds[j], 256), 64):
                        DCP_PREFETCH(src + line)
                size = bounds[i + 1] - bounds[i]
                if size:
                    memcpy(&out[bounds[i]], base[chunk[i]] + starts[i], size)
    finally:
        free(base)
        free(length)
