# Big- and little-endian loads for the compiled loops: memcpy (no unaligned casts) plus a
# byte swap where the machine's order differs (the macros are in wire.h).

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from "wire.h":
    uint16_t DCP_BE16(uint16_t) noexcept nogil
    uint32_t DCP_BE32(uint32_t) noexcept nogil
    uint64_t DCP_BE64(uint64_t) noexcept nogil
    uint16_t DCP_LE16(uint16_t) noexcept nogil
    uint32_t DCP_LE32(uint32_t) noexcept nogil
    uint64_t DCP_LE64(uint64_t) noexcept nogil
    void DCP_PREFETCH(const void*) noexcept nogil
    void DCP_PREFETCH_L2(const void*) noexcept nogil


cdef inline uint16_t be16(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return DCP_BE16(v)


cdef inline uint32_t be32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return DCP_BE32(v)


cdef inline uint64_t be64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return DCP_BE64(v)


cdef inline uint16_t le16(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return DCP_LE16(v)


cdef inline uint32_t le32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return DCP_LE32(v)


cdef inline uint64_t le64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return DCP_LE64(v)
