/* The platform layer of the recycled span cache of cscan (scan_memory.pxi):
     dcp_map(size)              anonymous read-write memory, or NULL;
     dcp_unmap(p, size)         gives a span back whole;
     dcp_unmap_tail(p, keep, size)
                                gives back the pages of a span past its first keep bytes
                                and returns the bytes it still holds (size where it cannot);
     DCP_GROW(p, old, new)      extends a span in place or moves it, or returns NULL and
                                leaves it as it was; only where DCP_CAN_GROW (Linux mremap,
                                _GNU_SOURCE comes from Python.h);
     dcp_now()                  a monotonic clock in seconds.
   Spans are mapped pages on POSIX systems (mmap) and on Windows (VirtualAlloc: the tail
   is decommitted, the reservation released whole); with -DDCP_NO_MMAP, or where neither
   exists, they come from the allocator. */
#ifndef DCPFAST_SPANS_H
#define DCPFAST_SPANS_H

#include <stddef.h>
#include <stdlib.h>

#if defined(_WIN32)
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  include <windows.h>
#else
#  include <time.h>
#endif
#if !defined(DCP_NO_MMAP) && defined(_WIN32)
#  define DCP_SPANS_WINDOWS 1
#elif !defined(DCP_NO_MMAP) && (defined(__unix__) || defined(__APPLE__))
#  define DCP_SPANS_POSIX 1
#  include <sys/mman.h>
#  include <unistd.h>
#endif

#if defined(DCP_SPANS_POSIX) && defined(__linux__) && defined(MREMAP_MAYMOVE)
#  define DCP_CAN_GROW 1
static void *DCP_GROW(void *p, size_t old, size_t new_size)
{
    void *at = mremap(p, old, new_size, MREMAP_MAYMOVE);
    return at == MAP_FAILED ? NULL : at;
}
#else
#  define DCP_CAN_GROW 0
static void *DCP_GROW(void *p, size_t old, size_t new_size)
{
    (void)p; (void)old; (void)new_size;
    return NULL;
}
#endif

#if defined(DCP_SPANS_POSIX)

static void *dcp_map(size_t size)
{
    void *at = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return at == MAP_FAILED ? NULL : at;
}
static void dcp_unmap(void *p, size_t size)
{
    munmap(p, size);
}
static size_t dcp_unmap_tail(void *p, size_t keep, size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);   /* 16 KiB on Apple silicon, 64 KiB on
                                                      some arm64 kernels */
    keep = (keep + page - 1) / page * page;
    if (keep >= size || munmap((char *)p + keep, size - keep) != 0)
        return size;
    return keep;
}

#elif defined(DCP_SPANS_WINDOWS)

static void *dcp_map(size_t size)
{
    return VirtualAlloc(NULL, size, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
}
static void dcp_unmap(void *p, size_t size)
{
    (void)size;
    VirtualFree(p, 0, MEM_RELEASE);              /* the whole reservation, tail included */
}
static size_t dcp_unmap_tail(void *p, size_t keep, size_t size)
{
    SYSTEM_INFO info;
    size_t page;
    GetSystemInfo(&info);
    page = info.dwPageSize;
    keep = (keep + page - 1) / page * page;
    if (keep >= size || !VirtualFree((char *)p + keep, size - keep, MEM_DECOMMIT))
        return size;
    return keep;
}

#else

static void *dcp_map(size_t size)
{
    return malloc(size);
}
static void dcp_unmap(void *p, size_t size)
{
    (void)size;
    free(p);
}
static size_t dcp_unmap_tail(void *p, size_t keep, size_t size)
{
    (void)p; (void)keep;
    return size;                                 /* the allocator keeps the block whole */
}

#endif

#if defined(_WIN32)
static double dcp_now(void)
{
    LARGE_INTEGER count, frequency;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&frequency);
    return (double)count.QuadPart / (double)frequency.QuadPart;
}
#else
static double dcp_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
#endif

#endif
