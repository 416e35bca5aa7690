/* Blocks on transparent huge pages for the large tables of cstate's KeyIndex
   (state_keys.pxi). A table of millions of entries is first touched once per 4 KiB page,
   and each such fault costs about as much as filling the page; on 2 MiB pages the kernel
   takes one fault where it took 512. Where the system gives huge pages on request (Linux's
   MADV_HUGEPAGE, "madvise" or "always" in /sys/kernel/mm/transparent_hugepage/enabled;
   the macro needs _GNU_SOURCE or _DEFAULT_SOURCE, which Python.h defines), a block of
   DCP_HUGE_MIN bytes or more is asked for them before its first touch (the 2 MiB-aligned
   part of it), as numpy asks for its arrays of 4 MiB and more; elsewhere, or when the
   system says no, these are plain malloc, realloc and calloc. The advice is a hint on
   the pages of the block; where the C library serves a block from its heap, the pages
   keep it after the block is freed. The blocks are the C library's: free them with
   free. */
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
/* From this size up the C library maps a block of its own (glibc's largest threshold)
   and grows it by moving its pages (mremap), neither copying nor touching them. */
#define DCP_HUGE_MAPPED ((size_t)32 << 20)

#if defined(__linux__) && defined(MADV_HUGEPAGE)
#  define DCP_HUGE 1
static void dcp_huge_advise(void *p, size_t n)
{
    uintptr_t first = ((uintptr_t)p + DCP_HUGE_PAGE - 1) & ~(DCP_HUGE_PAGE - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(DCP_HUGE_PAGE - 1);
    if (n >= DCP_HUGE_MIN && end > first)
        (void)madvise((void *)first, end - first, MADV_HUGEPAGE);
}
#else
#  define DCP_HUGE 0
static void dcp_huge_advise(void *p, size_t n)
{
    (void)p;
    (void)n;
}
#endif

/* n bytes, uninitialised. */
static void *dcp_huge_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p != NULL)
        dcp_huge_advise(p, n);
    return p;
}

/* count items of size bytes, zeroed; NULL where that overflows or memory runs out. */
static void *dcp_huge_calloc(size_t count, size_t size)
{
    void *p;
    if (size && count > SIZE_MAX / size)
        return NULL;
    if (!DCP_HUGE || count * size < DCP_HUGE_MIN)
        return calloc(count ? count : 1, size ? size : 1);
    p = dcp_huge_malloc(count * size);
    if (p != NULL)
        memset(p, 0, count * size);
    return p;
}

/* The block p, whose first used bytes matter, at n bytes; or NULL with p as it was. From
   DCP_HUGE_MIN to DCP_HUGE_MAPPED it is a new block, asked for huge pages before the copy
   touches it (the old one is freed after: both are held meanwhile, as when the C library
   moves a block of its heap); a larger one grows as the C library grows it, its new pages
   asked for huge pages before their first touch. */
static void *dcp_huge_realloc(void *p, size_t used, size_t n)
{
    void *q;
    if (DCP_HUGE && n >= DCP_HUGE_MIN && used < DCP_HUGE_MAPPED) {
        q = dcp_huge_malloc(n);
        if (q == NULL)
            return NULL;
        if (p != NULL)
            memcpy(q, p, used < n ? used : n);
        free(p);
        return q;
    }
    q = realloc(p, n ? n : 1);
    if (q != NULL)
        dcp_huge_advise(q, n);
    return q;
}

#endif
