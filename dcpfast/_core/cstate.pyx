# cython: language_level=3
"""The per-row loops of the stream checks and of the document state, compiled; ``pystate``
is the pure-Python twin, with the same names and signatures, and its docstrings say what
each function is given and answers. The loops run without the GIL and make no Python
object per row: ``check_streams`` and ``walk_state`` step through the rows of a stretch
keeping each stream's state in a row of a uint64 array, ``KeyIndex`` hashes documents to
dense ids and sorts them in key order.

The module is one compilation unit in pieces: ``state_checks.pxi`` (the stream checks),
``state_walk.pxi`` (the state walk, ``newest``, ``pair_durable``), ``state_keys.pxi``
(``KeyIndex``) and ``state_sort.pxi`` (its key order).
"""

cimport cython
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, qsort, realloc
from libc.string cimport memcmp, memcpy, memset

import numpy as np

from . import contract as C
from .cmemory cimport SPAN_HUGE, SPAN_WORK, give, span_give, span_grow, span_take, take
from .wire cimport DCP_BE64, DCP_PREFETCH

# the codes of ``contract``, as compile-time numbers (checked against it at import)
cdef enum:
    EV_ITEM = 0
    EV_ADVANCE = 1
    EV_MARKER = 2
    EV_OSO_START = 3
    EV_OSO_END = 4
    EV_END = 5
    EV_REQUEST = 6
    EV_RESPONSE = 7
    EV_NONE = 255
    INFO_COLLECTIONS = 1
    INFO_UNFILTERED = 2
    INFO_SEED = 4
    GIVEN_FOUND = 1
    GIVEN_RANGE = 2
    R_BACKWARDS = 0
    R_OUTSIDE = 1
    R_EARLY = 2
    R_ENDED_INSIDE = 3
    R_OSO_NOT_ENDED = 4
    R_OSO_NOT_STARTED = 5
    C_BITS = 0
    C_OPAQUE = 1
    C_CHAIN = 2
    C_START = 3
    C_END = 4
    C_FLAGS = 5
    C_REACH = 6
    W_MUTATION = 0
    W_DELETION = 1
    W_EXPIRATION = 2
    W_PREPARE = 3
    W_COMMIT = 4
    W_ADVANCE = 7
    W_MARKER = 8
    W_OSO = 9
    W_RESTART = 10
    W_END = 11
    W_LOSS = 12
    W_SKIP = 14
    K_BITS = 0
    K_CHAIN = 1
    K_CUT = 2
    K_START = 3
    K_END = 4
    K_CONSISTENT = 5
    K_FLOOR = 6
    K_LOST = 16
    K_FRESH = 32
    K_ITEMS = 64


_CODES = {"GIVEN_FOUND": GIVEN_FOUND, "GIVEN_RANGE": GIVEN_RANGE, "EV_ITEM": EV_ITEM,
          "EV_ADVANCE": EV_ADVANCE, "EV_MARKER": EV_MARKER,
          "EV_OSO_START": EV_OSO_START, "EV_OSO_END": EV_OSO_END, "EV_END": EV_END,
          "EV_REQUEST": EV_REQUEST, "EV_RESPONSE": EV_RESPONSE, "EV_NONE": EV_NONE,
          "INFO_COLLECTIONS": INFO_COLLECTIONS, "INFO_UNFILTERED": INFO_UNFILTERED,
          "INFO_SEED": INFO_SEED, "R_BACKWARDS": R_BACKWARDS, "R_OUTSIDE": R_OUTSIDE,
          "R_EARLY": R_EARLY, "R_ENDED_INSIDE": R_ENDED_INSIDE,
          "R_OSO_NOT_ENDED": R_OSO_NOT_ENDED, "R_OSO_NOT_STARTED": R_OSO_NOT_STARTED,
          "C_BITS": C_BITS, "C_OPAQUE": C_OPAQUE, "C_CHAIN": C_CHAIN, "C_START": C_START,
          "C_END": C_END, "C_FLAGS": C_FLAGS, "C_REACH": C_REACH, "W_MUTATION": W_MUTATION,
          "W_DELETION": W_DELETION, "W_EXPIRATION": W_EXPIRATION, "W_PREPARE": W_PREPARE,
          "W_COMMIT": W_COMMIT,
          "W_ADVANCE": W_ADVANCE, "W_MARKER": W_MARKER, "W_OSO": W_OSO,
          "W_RESTART": W_RESTART, "W_END": W_END, "W_LOSS": W_LOSS, "W_SKIP": W_SKIP,
          "K_BITS": K_BITS,
          "K_CHAIN": K_CHAIN,
          "K_CUT": K_CUT, "K_START": K_START, "K_END": K_END, "K_CONSISTENT": K_CONSISTENT,
          "K_FLOOR": K_FLOOR, "K_LOST": K_LOST, "K_FRESH": K_FRESH,
          "K_ITEMS": K_ITEMS}
if any(getattr(C, name) != value for name, value in _CODES.items()):
    raise ImportError("cstate was compiled against other contract codes: rebuild it")


# check state bits: as in pystate
cdef enum:
    OPEN = 1
    STARTED = 2
    LAST_START = 4
    CHAIN = 8
    REACH = 16
    ADVANCED = 32
    UNFILTERED = 64
    OPAQUE = 128
    ENDED = 256
    SPAN_SHIFT = 9
    SPAN_MASK = 3 << 9
    NO_SPAN = 0
    MARKER = 1
    OSO = 2
    OSO_CLOSED = 3
    DISK = 0x02
    HISTORY = 0x10
    STATUS_OK = 0
# walk state bits
cdef enum:
    IN_OSO = 1
    LAZY = 2
    HAS_MARKER = 4
    COMPLETED = 8
    LOST = K_LOST
    FRESH = K_FRESH
    ITEMS = K_ITEMS

cdef uint64_t U64_MAX = 0xFFFFFFFFFFFFFFFF
cdef uint64_t CLOCK = ~(<uint64_t>0xFFFF)


include "state_checks.pxi"
include "state_walk.pxi"
include "state_keys.pxi"
include "state_sort.pxi"
