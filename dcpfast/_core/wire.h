/* Byte order and prefetch for the compiled loops of dcpfast._core (declared in wire.pxd):
   DCP_BE* and DCP_LE* turn a value loaded from big- or little-endian bytes into the
   machine's order (a byte swap where they differ); DCP_PREFETCH* hint a read ahead. */
#ifndef DCPFAST_WIRE_H
#define DCPFAST_WIRE_H

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

#endif
