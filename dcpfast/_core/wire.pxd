# Big- and little-endian loads for the compiled loops: memcpy (no unaligned casts) plus a
# byte swap where the machine's order differs.

from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #  define DCP_BSWAP16(x) __builtin_bswap16(x)
    #  define DCP_BSWAP32(x) __builtin_bswap32(x)
    #  define DCP_BSWAP64(x) __builtin_bswap64(x)
    #elif defined(_MSC_VER)
    #  include <stdlib.h>
    #  define DCP_BSWAP16(x) _byteswap_ushort(x)
    #  define DCP_BSWAP32(x) _byteswap_ulong(x)
    #  define DCP_BSWAP64(x) _byteswap_uint64(x)
    #endif
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #  define DCP_BE16(x) (x)
    #  define DCP_BE32(x) (x)
    #  define DCP_BE64(x) (x)
    #else
    #  define DCP_BE16(x) DCP_BSWAP16(x)
    #  define DCP_BE32(x) DCP_BSWAP32(x)
    #  define DCP_BE64(x) DCP_BSWAP64(x)
    #endif
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    #  define DCP_LE16(x) DCP_BSWAP16(x)
    #  define DCP_LE32(x) DCP_BSWAP32(x)
    #  define DCP_LE64(x) DCP_BSWAP64(x)
    #else
    #  define DCP_LE16(x) (x)
    #  define DCP_LE32(x) (x)
    #  define DCP_LE64(x) (x)
    #endif
    #if defined(__GNUC__) || defined(__clang__)
    #  define DCP_PREFETCH(p) __builtin_prefetch(p)
    #  define DCP_PREFETCH_L2(p) __builtin_prefetch(p, 0, 2)
    #else
    #  define DCP_PREFETCH(p) ((void)(p))
    #  define DCP_PREFETCH_L2(p) ((void)(p))
    #endif
    """
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
