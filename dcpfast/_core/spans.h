/* The clock and the mapping growth of the recycled span cache of cscan (scan_memory.pxi):
   dcp_now() in seconds, and DCP_GROW, which extends a mapping in place or moves it
   (Linux's mremap; _GNU_SOURCE comes from Python.h) where DCP_CAN_GROW, else fails. */
#ifndef DCPFAST_SPANS_H
#define DCPFAST_SPANS_H

#include <time.h>
#if defined(__linux__)
#  include <sys/mman.h>
#  define DCP_CAN_GROW 1
#  define DCP_GROW(p, old, new) mremap((p), (old), (new), MREMAP_MAYMOVE)
#else
#  define DCP_CAN_GROW 0
#  define DCP_GROW(p, old, new) MAP_FAILED
#endif
static double dcp_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
