# cython: language_level=3
"""The per-row loops of the stream checks and of the document state, compiled; ``pystate``
is the pure-Python twin, with the same names and signatures, and its docstrings say what
each function does; what each is given and answers is a request and a result of
``contract``. The loops run without the GIL and make no Python object per row:
``check_streams`` and ``walk_state`` step through the rows of a stretch keeping each
stream's state in a row of a uint64 array, ``KeyIndex`` hashes documents to dense ids and
sorts them in key order.

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

# the codes of ``contract`` as compile-time constants (an enum, and ``_CODES``): the stream
# checks' and the walk's codes, the bits both cores keep in a stream's check and walk state
# (``CS_*``, ``WS_*``) and the protocol's numbers they read (``P_*``). setup.py writes
# contract.pxi from contract.py, and the import stops where they differ
include "contract.pxi"
C.check_codes(_CODES, __name__)

cdef uint64_t U64_MAX = 0xFFFFFFFFFFFFFFFF
cdef uint64_t CLOCK = ~(<uint64_t>0xFFFF)


include "state_checks.pxi"
include "state_walk.pxi"
include "state_keys.pxi"
include "state_sort.pxi"
