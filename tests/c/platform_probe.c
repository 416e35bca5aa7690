/* Exercises the C headers of dcpfast._core on their own, as each platform compiles them:
   the span cache and its platform layer (spans.h), the byte-order macros (wire.h), the
   portable bitmap kernel (bitmaps.h); spans grown with their bytes kept, as the state
   core's key index grows its tables, the rule of what memory is a span, the caches'
   figures and their release, through the functions the memory core (cmemory.pyx) wraps
   for the other cores (cmemory.pxd).
   Prints "ok" and what it found; exits non-zero at the first check that fails.
   tests/test_platform.py builds it in every mode it can. */
#define _GNU_SOURCE 1                           /* as Python.h defines it */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "spans.h"
#include "wire.h"
#include "bitmaps.h"

/* The caches' figures added: the bytes of spans in use that tracemalloc does not see
   (all of the probe's), their peaks, the bytes kept. */
static void stats(size_t *live, size_t *peak, size_t *kept)
{
    int i;
    *live = *peak = *kept = 0;
    for (i = 0; i < 2; i++) {
        dcp_figures f = dcp_cache_figures(i);
        *live += f.untraced;
        *peak += f.untraced_peak;
        *kept += f.kept;
    }
}

static int spans(size_t *kept_out)
{
    size_t size = (size_t)1 << 22, kept;
    char *p = (char *)dcp_map(size), *q;
    double before, after;
    if (p == NULL)
        return 10;
    memset(p, 7, size);
    kept = dcp_unmap_tail(p, 5000, size);
    if (kept < 5000 || kept > size)
        return 11;
    if (p[0] != 7 || p[4999] != 7 || p[kept - 1] != 7)
        return 12;
    if (DCP_CAN_GROW) {
        q = (char *)DCP_GROW(p, kept, 2 * size);
        if (q == NULL)
            return 13;
        if (q[0] != 7 || q[kept - 1] != 7)
            return 14;
        q[2 * size - 1] = 1;                    /* the grown tail is writable */
        p = q;
        kept = 2 * size;
    }
    dcp_unmap(p, kept);
    before = dcp_now();
    after = dcp_now();
    if (!(before > 0 && after >= before))
        return 15;
    *kept_out = kept;
    return 0;
}

/* The cache: a span given back serves the next request of its size; one far larger serves
   a small request with its tail given back (where pages can be); the stats add up. */
static int cache(void)
{
    size_t got = 0, again = 0, live, peak, kept;
    char *p, *q;
    dcp_spans_init();
    p = dcp_span_take((size_t)1 << 20, &got, 0);
    if (p == NULL || got < ((size_t)1 << 20))
        return 40;
    memset(p, 3, got);
    dcp_span_give(p, got, 0);
    stats(&live, &peak, &kept);
    if (live != 0 || peak < got || kept != got)
        return 41;
    q = dcp_span_take((size_t)1 << 20, &again, 0);
    if (q != p || again != got)
        return 42;
    dcp_put(q, p + 1, 0);
    dcp_span_give(q, again, 0);
    q = dcp_span_take((size_t)1 << 16, &again, 0);  /* else fresh, the kept one given back */
    if (q == NULL || again < ((size_t)1 << 16) || (DCP_CAN_TRIM && (q != p || again >= got)))
        return 43;
    stats(&live, &peak, &kept);
    if (live != again || kept != 0)
        return 44;
    if (DCP_CAN_TRIM && (q[0] != 3 || q[again - 1] != 3))      /* its head, as it was */
        return 45;
    dcp_span_give(q, again, 0);
    return 0;
}

/* A kept span far larger than a request is cut down to it only where a fresh span would
   give kept ones back: within the most in use at once lately, the request gets fresh
   pages (or a smaller span grown) and the large span stays kept for a large request. */
static int bounded(void)
{
    size_t got_x = 0, got_y = 0, got_z = 0, left, live, peak, kept, kept_before;
    char *x, *y, *z;
    x = dcp_span_take((size_t)8 << 20, &got_x, 0);           /* 8 MiB in use at once */
    if (x == NULL)
        return 60;
    left = dcp_unmap_tail(x, (size_t)1 << 20, got_x);     /* then 1 MiB of it */
    if (left < got_x)
        dcp_span_shrunk(got_x - left);
    y = dcp_span_take((size_t)4 << 20, &got_y, 0);
    if (y == NULL)
        return 61;
    dcp_span_give(y, got_y, 0);
    stats(&live, &peak, &kept_before);
    z = dcp_span_take((size_t)1 << 19, &got_z, 0);           /* far smaller than y */
    if (z == NULL)
        return 62;
    stats(&live, &peak, &kept);
    if (live + kept_before + got_z <= peak && (z == y || kept < got_y))
        return 63;                                        /* y cut down within bounds */
    dcp_span_give(z, got_z, 0);
    dcp_span_give(x, left, 0);
    return 0;
}

/* Where spans split, a kept span cut down to a request keeps the tail that the cache's
   bounds leave room for as a span of its own: the next request takes those very pages.
   Elsewhere the tail is given back. */
static int split(void)
{
    size_t got_x = 0, got_y = 0, got_z = 0, live, peak, kept, kept_before;
    char *x, *y, *z;
    x = dcp_span_take((size_t)16 << 20, &got_x, 0);          /* 16 MiB in use at once */
    if (x == NULL)
        return 70;
    memset(x, 5, got_x);
    dcp_span_give(x, got_x, 0);
    stats(&live, &peak, &kept_before);
    y = dcp_span_take((size_t)2 << 20, &got_y, 0);           /* far smaller: its head */
    if (y == NULL)
        return 71;
    if (!DCP_CAN_TRIM) {                                  /* whole, or fresh */
        dcp_span_give(y, got_y, 0);
        return 0;
    }
    if (y != x || got_y >= got_x)
        return 76;
    stats(&live, &peak, &kept);
    if (live + kept > live + kept_before)                 /* within what was there */
        return 72;
    if (DCP_CAN_SPLIT != (kept >= got_x - got_y - ((size_t)1 << 20) && kept > 0))
        return 73;                                        /* the tail kept, or given back */
    z = dcp_span_take((size_t)2 << 20, &got_z, 0);           /* while y is in use */
    if (z == NULL)
        return 74;
    if (DCP_CAN_SPLIT && (z != x + got_y || z[0] != 5 || z[got_z - 1] != 5))
        return 75;                                        /* the tail's resident pages */
    dcp_span_give(z, got_z, 0);
    dcp_span_give(y, got_y, 0);
    return 0;
}

static int wire(void)
{
    const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint16_t v16;
    uint32_t v32;
    uint64_t v64;
    memcpy(&v16, bytes, 2);
    memcpy(&v32, bytes, 4);
    memcpy(&v64, bytes, 8);
    if (DCP_BE16(v16) != 0x0102 || DCP_BE32(v32) != 0x01020304u ||
        DCP_BE64(v64) != 0x0102030405060708ull)
        return 20;
    if (DCP_LE16(v16) != 0x0201 || DCP_LE32(v32) != 0x04030201u ||
        DCP_LE64(v64) != 0x0807060504030201ull)
        return 21;
    DCP_PREFETCH(bytes);
    DCP_PREFETCH_L2(bytes);
    return 0;
}

/* 100 rows of kinds 0, 1, 2 in turn; one group of kinds {1, 2}: bit i set unless i % 3 == 0. */
static int bitmaps(void)
{
    uint8_t kinds[100], present[3] = {0, 1, 2}, slot[256] = {0, 1, 2}, members[2] = {1, 2};
    uint8_t out[16];
    int rows[1] = {0}, first[2] = {0, 2};
    size_t i;
    for (i = 0; i < 100; i++)
        kinds[i] = (uint8_t)(i % 3);
    memset(out, 0xAA, sizeof(out));
    dcp_group_bits(kinds, 100, 3, present, slot, 1, rows, first, members, out, 16);
    for (i = 0; i < 100; i++)
        if (((out[i / 8] >> (i % 8)) & 1) != (i % 3 != 0))
            return 30;
    for (i = 100; i < 104; i++)                 /* bits past the rows are cleared */
        if ((out[i / 8] >> (i % 8)) & 1)
            return 31;
    return 0;
}

/* Spans grown as the state core's key index grows its tables (asked for huge pages):
   each size in a chain that crosses DCP_HUGE_MIN and DCP_GROW_MIN (moved in place where
   mappings can grow) keeps the bytes before it and is writable to its end; the spans in
   use add up, and none is left in use at the end. */
static int grown(void)
{
    size_t sizes[] = {(size_t)16 << 10, (size_t)3 << 20, (size_t)9 << 20, (size_t)40 << 20,
                      (size_t)90 << 20};
    const int flags = DCP_SPAN_HUGE | DCP_SPAN_WORK;   /* the key index's */
    size_t got = 0, size = 0, kept = 0, live, peak, cached, before;
    char *p = NULL;
    int i;
    stats(&before, &peak, &cached);
    for (i = 0; i < 5; i++) {
        char *q = p == NULL ? dcp_span_take(sizes[i], &got, flags)
                            : dcp_span_grow(p, size, kept, sizes[i], &got, flags);
        size_t k;
        if (q == NULL || got < sizes[i])
            return 50 + i;
        for (k = 0; k < kept; k += 4093)
            if (q[k] != (char)(k % 251))
                return 56;
        if (kept && q[kept - 1] != (char)((kept - 1) % 251))
            return 57;
        q[got - 1] = 0;                         /* writable to its end */
        for (k = kept; k < sizes[i]; k++)
            q[k] = (char)(k % 251);
        p = q;
        size = got;
        kept = sizes[i];
        stats(&live, &peak, &cached);
        if (live != before + size)
            return 58;
    }
    dcp_span_give(p, size, flags);
    stats(&live, &peak, &cached);
    return live == before ? 0 : 59;
}

/* The one rule: below DCP_SPAN_MIN the allocator's (no span), from it a span of the cache
   the flags name; the peaks start again from what is in use; a release gives back every
   kept span, and the bytes it says. */
static int released(void)
{
    size_t got = 1, live, peak, kept, freed;
    char *small = dcp_take(DCP_SPAN_MIN - 1, &got, DCP_SPAN_WORK), *large;
    dcp_figures work = dcp_cache_figures(1);
    if (small == NULL || got != 0)
        return 80;
    large = dcp_take(DCP_SPAN_MIN, &got, DCP_SPAN_WORK);
    if (large == NULL || got < DCP_SPAN_MIN || dcp_cache_figures(1).in_use != work.in_use + got)
        return 81;
    small[DCP_SPAN_MIN - 2] = large[got - 1] = 1;
    dcp_give(small, 0, DCP_SPAN_WORK);
    dcp_give(large, got, DCP_SPAN_WORK);
    stats(&live, &peak, &kept);
    if (kept < got || peak < got)
        return 82;
    dcp_span_reset();
    stats(&live, &peak, &kept);
    if (peak != live)
        return 83;
    freed = dcp_span_release();
    if (freed != kept)
        return 84;
    stats(&live, &peak, &kept);
    if (kept != 0 || dcp_cache_figures(0).spans + dcp_cache_figures(1).spans != 0)
        return 85;
    return dcp_span_release() == 0 ? 0 : 86;
}

int main(void)
{
    size_t kept = 0;
    int failed = spans(&kept);
    if (!failed)
        failed = cache();
    if (!failed)
        failed = bounded();
    if (!failed)
        failed = split();
    if (!failed)
        failed = wire();
    if (!failed)
        failed = bitmaps();
    if (!failed)
        failed = grown();
    if (!failed)
        failed = released();
    if (failed) {
        printf("failed %d\n", failed);
        return failed;
    }
    printf("ok grow=%d trim=%d split=%d huge=%d sse2=%d bitalg=%d kept=%lu\n",
           DCP_CAN_GROW, DCP_CAN_TRIM, DCP_CAN_SPLIT, DCP_CAN_HUGE, DCP_SSE2, DCP_BITALG,
           (unsigned long)kept);
    return 0;
}
