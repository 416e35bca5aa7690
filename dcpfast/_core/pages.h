/* Blocks on transparent huge pages for the large tables of cstate's KeyIndex
   (state_keys.pxi). A table of millions of entries is first touched once per 4 KiB page,
   and each such fault costs about as much as filling the page; on 2 MiB pages the kernel
   takes one fault where it took 512. Where the system gives huge pages on request (Linux's
   MADV_HUGEPAGE, "madvise" or "always" in /sys/kernel/mm/transparent_hugepage/enabled),
   a block of DCP_HUGE_MIN bytes or more is asked for them before its first touch (the
   2 MiB-aligned part of it), as numpy asks for its arrays of 4 MiB and more; elsewhere,
   or when the system says no, these are plain malloc, realloc and calloc. The blocks
   are the C library's: free them with free. */
#ifndef DCPFAST_PAGES_H
#define DCPFAST_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#  include <sys/mman.h>
#endif

#define DCP_HUGE_PAGE ((uintptr_t)2 << 20)
#define DCP_HUGE_MIN ((size_t)4 << 20)

#if defined(__linux__) && defined(MADV_HUGEPAGE)
#  define DCP_HUGE 1
static void dcp_huge_advise(void *p, size_t n)
{
    uintptr_t first = ((uintptr_t)p + DCP_HUGE_PAGE - 1) & ~(DCP_HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(DCP_HUGE_PAGE - 1);
    if (end > first)
        (void)madvise((void *)first, end - first, MADV_HUGEPAGE);
}
#else
#  define DCP_HUGE 0
#endif

/* n bytes, uninitialised. */
static void *dcp_huge_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
#if DCP_HUGE
    if (p != NULL && n >= DCP_HUGE_MIN)
        dcp_huge_advise(p, n);
#endif
    return p;
}

/* n zeroed bytes. */
static void *dcp_huge_calloc(size_t n)
{
#if DCP_HUGE
    void *p;
    if (n < DCP_HUGE_MIN)
        return calloc(n ? n : 1, 1);
    p = dcp_huge_malloc(n);
    if (p != NULL)
        memset(p, 0, n);
    return p;
#else
    return calloc(n ? n : 1, 1);
#endif
}

/* The block p (of which the first used bytes matter) at n bytes, or NULL with p as it
   was. A large one is a new block, asked for huge pages before the copy touches it. */
static void *dcp_huge_realloc(void *p, size_t used, size_t n)
{
#if DCP_HUGE
    void *q;
    if (n >= DCP_HUGE_MIN) {
        q = dcp_huge_malloc(n);
        if (q == NULL)
            return NULL;
        if (p != NULL)
            memcpy(q, p, used < n ? used : n);
        free(p);
        return q;
    }
#endif
    (void)used;
    return realloc(p, n ? n : 1);
}

#endif
