/* The recycled span caches of the compiled cores' large memory, and their platform layer.
   The memory core (cmemory.pyx) is the one module that includes this header, so that the
   caches' state exists once in a process; the other cores reach them through it
   (cmemory.pxd).

   Large memory lives in "spans" that go back to a cache when they are dropped, so that the
   next request writes into pages that are already resident instead of faulting in and
   zeroing fresh ones. There are two caches, each bounded on its own: the scan's output
   memory (its columns, a batch after another), and the state engine's working memory
   (DCP_SPAN_WORK in span_flags.h: numpy's arrays during a state call through
   numpy_spans.h, the key index's tables), so that the one's many small requests never
   cut down the other's large spans. What a cache keeps is bounded three ways: at most
   DCP_KEEP_SPANS spans and DCP_KEEP_BYTES bytes; at most the most bytes in use at once
   during the current window of DCP_KEEP_SECONDS (so the cache never holds more than its
   users held lately); and no span for longer than
   DCP_KEEP_SECONDS. A span mapped afresh first gives back kept ones, so that the spans in
   use and kept together stay within that most in use at once (a small last batch does not
   add its fresh pages to a cache full of larger spans). A reaper thread per cache,
   started when the cache gets its first span and ended when it is empty, gives spans back
   as they expire: idle memory goes back to the system without waiting for the next
   allocation, and no thread outlives the cache's use. Fresh spans of the key index's
   tables are asked for huge pages (DCP_SPAN_HUGE). On POSIX systems a fork leaves the
   child with the caches' spans, unlocked caches and no reaper (the next span given back
   starts one).

   The platform layer:
     dcp_map(size)              anonymous read-write memory, or NULL;
     dcp_unmap(p, size)         gives a span back whole;
     dcp_unmap_tail(p, keep, size)
                                gives back the pages of a span past its first keep bytes
                                and returns the bytes it still holds (size where it cannot);
     dcp_page()                 the size of a page (POSIX);
     DCP_GROW(p, old, new)      extends a span in place or moves it, or returns NULL and
                                leaves it as it was; only where DCP_CAN_GROW (Linux mremap,
                                _GNU_SOURCE comes from Python.h);
     dcp_now()                  a monotonic clock in seconds;
     dcp_lock, dcp_cond, dcp_start
                                a lock, a timed wait and a detached thread (POSIX threads,
                                or Windows' slim locks, condition variables and threads).
   Spans are mapped pages on POSIX systems (mmap) and on Windows (VirtualAlloc: the tail
   is decommitted, the reservation released whole); with -DDCP_NO_MMAP, or where neither
   exists, they come from the allocator. dcp_put copies rows into output memory: large
   copies with streaming stores (SSE2), which write whole lines without first reading them
   and leave the cache to the scan. */
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

#if defined(DCP_SPANS_POSIX) || defined(DCP_SPANS_WINDOWS)
#  define DCP_CAN_TRIM 1                 /* dcp_unmap_tail gives pages back */
#else
#  define DCP_CAN_TRIM 0
#endif
#if defined(DCP_SPANS_POSIX)
#  define DCP_CAN_SPLIT 1                /* a span's tail can be a span of its own */
#else
#  define DCP_CAN_SPLIT 0                /* Windows releases a reservation whole */
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
static size_t dcp_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);   /* 16 KiB on Apple silicon, 64 KiB on some
                                               arm64 kernels */
}
static size_t dcp_unmap_tail(void *p, size_t keep, size_t size)
{
    size_t page = dcp_page();
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


#include <stdint.h>
#include <string.h>
#include "span_flags.h"                   /* the flags of a request */
#if defined(__SSE2__) || defined(_M_X64)
#  include <emmintrin.h>
#  define DCP_STREAM 1
#else
#  define DCP_STREAM 0
#endif

#if defined(_WIN32)
typedef SRWLOCK dcp_lock;
typedef CONDITION_VARIABLE dcp_cond;
static void dcp_lock_init(dcp_lock *l) { InitializeSRWLock(l); }
static void dcp_lock_take(dcp_lock *l) { AcquireSRWLockExclusive(l); }
static void dcp_lock_drop(dcp_lock *l) { ReleaseSRWLockExclusive(l); }
static void dcp_cond_init(dcp_cond *c) { InitializeConditionVariable(c); }
/* Wait on c (l held) until woken or until dcp_now() passes due. */
static void dcp_cond_wait(dcp_cond *c, dcp_lock *l, double due)
{
    double left = due - dcp_now();
    SleepConditionVariableSRW(c, l, left > 0 ? (DWORD)(left * 1000) + 1 : 0, 0);
}
static void *(*dcp_thread_body)(void *);    /* the one body dcp_start runs (the reaper) */
static DWORD WINAPI dcp_thread_main(LPVOID arg) { dcp_thread_body(arg); return 0; }
/* Start a detached thread running body(arg); whether it started. */
static int dcp_start(void *(*body)(void *), void *arg)
{
    HANDLE thread;
    dcp_thread_body = body;
    thread = CreateThread(NULL, 64 * 1024, dcp_thread_main, arg, 0, NULL);
    if (thread == NULL)
        return 0;
    CloseHandle(thread);
    return 1;
}
#else
#  include <pthread.h>
typedef pthread_mutex_t dcp_lock;
typedef pthread_cond_t dcp_cond;
static void dcp_lock_init(dcp_lock *l) { pthread_mutex_init(l, NULL); }
static void dcp_lock_take(dcp_lock *l) { pthread_mutex_lock(l); }
static void dcp_lock_drop(dcp_lock *l) { pthread_mutex_unlock(l); }
static void dcp_cond_init(dcp_cond *c)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
#  if !defined(__APPLE__)
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);   /* the clock of dcp_now */
#  endif
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
}
static void dcp_cond_wait(dcp_cond *c, dcp_lock *l, double due)
{
    struct timespec t;
#  if defined(__APPLE__)                                /* relative waits only */
    double left = due - dcp_now();
    if (left < 0)
        left = 0;
    t.tv_sec = (time_t)left;
    t.tv_nsec = (long)((left - (double)t.tv_sec) * 1e9);
    pthread_cond_timedwait_relative_np(c, l, &t);
#  else
    t.tv_sec = (time_t)due;
    t.tv_nsec = (long)((due - (double)t.tv_sec) * 1e9);
    pthread_cond_timedwait(c, l, &t);
#  endif
}
static int dcp_start(void *(*body)(void *), void *arg)
{
    pthread_t thread;
    pthread_attr_t attr;
    int started;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    started = pthread_create(&thread, &attr, body, arg) == 0;
    pthread_attr_destroy(&attr);
    return started;
}
#endif

#define DCP_GROW_MIN ((size_t)32 << 20)   /* spans grown in place (DCP_GROW) from here */

/* Huge pages for a fresh span of DCP_HUGE_MIN bytes or more, where the system gives them on
   request (Linux's MADV_HUGEPAGE, "madvise" or "always" in
   /sys/kernel/mm/transparent_hugepage/enabled): its 2 MiB-aligned part is advised before
   its first touch, and the kernel then takes one fault where it took 512. A hint: the
   system may say no. */
#define DCP_HUGE_MIN ((size_t)4 << 20)
#if defined(DCP_SPANS_POSIX) && defined(__linux__) && defined(MADV_HUGEPAGE)
#  define DCP_CAN_HUGE 1
static void dcp_huge_advise(void *p, size_t n)
{
    const uintptr_t page = (uintptr_t)2 << 20;
    uintptr_t first = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)p + n) & ~(page - 1);
    if (n >= DCP_HUGE_MIN && end > first)
        (void)madvise((void *)first, end - first, MADV_HUGEPAGE);
}
#else
#  define DCP_CAN_HUGE 0
static void dcp_huge_advise(void *p, size_t n)
{
    (void)p;
    (void)n;
}
#endif

#define DCP_KEEP_SPANS 128
#define DCP_KEEP_BYTES ((size_t)512 << 20)
#define DCP_KEEP_SECONDS 2.0
#define DCP_OVER 4                        /* a kept span serves a request this much smaller */

/* The span size for a request of n bytes: sixteenths of a power of two, whole pages. */
static size_t dcp_span_size(size_t n) {
    size_t step = 4096;
    while (step * 16 <= n)
        step *= 2;
    return (n + step - 1) / step * step;
}

typedef struct {                          /* one cache */
    dcp_lock lock;
    dcp_cond wake;                        /* the reaper's timed wait */
    char *at[DCP_KEEP_SPANS];             /* kept spans, oldest first */
    size_t size[DCP_KEEP_SPANS];
    double since[DCP_KEEP_SPANS];
    int n_kept;
    size_t kept_bytes;
    size_t live_bytes, peak_bytes;        /* spans in use; the most since the last reset */
    size_t traced_bytes;                  /* those of them tracemalloc sees (numpy_spans.h) */
    size_t untraced_peak;                 /* the most of the others since the last reset */
    size_t window_peak;                   /* the most in use at once in the current window */
    double window_since;
    int reaper;                           /* a reaper thread is running */
} dcp_cache;

/* Two caches, bounded each on its own: the scan's output memory (cache 0), and the state
   engine's working memory (DCP_SPAN_WORK: numpy's arrays during a state call, the key
   index's tables), so that neither cuts down the other's large spans (a state's arrays
   taking pieces of the span a whole dump's scan gives back, which that scan then maps
   afresh). */
#define DCP_CACHES 2
static dcp_cache dcp_caches[DCP_CACHES];

static dcp_cache *dcp_cache_of(int flags) {
    return &dcp_caches[(flags & DCP_SPAN_WORK) ? 1 : 0];
}

typedef struct {                          /* spans to unmap once the lock is released */
    int n;
    char *at[DCP_KEEP_SPANS + 1];
    size_t size[DCP_KEEP_SPANS + 1];
} dcp_doomed;

static void dcp_unmap_doomed(const dcp_doomed *d) {
    for (int i = 0; i < d->n; i++)
        dcp_unmap(d->at[i], d->size[i]);
}

static void dcp_doom(dcp_doomed *d, char *at, size_t size) {
    d->at[d->n] = at;
    d->size[d->n] = size;
    d->n++;
}

static void dcp_unkeep(dcp_cache *c, int i) {
    c->kept_bytes -= c->size[i];
    c->n_kept--;
    int rest = c->n_kept - i;
    memmove(&c->at[i], &c->at[i + 1], rest * sizeof(char *));
    memmove(&c->size[i], &c->size[i + 1], rest * sizeof(size_t));
    memmove(&c->since[i], &c->since[i + 1], rest * sizeof(double));
}

/* Under the lock: doom the spans kept longer than DCP_KEEP_SECONDS, and start a new
   window of the in-use peak when the current one is over. */
static void dcp_expire(dcp_cache *c, double now, dcp_doomed *d) {
    while (c->n_kept && now - c->since[0] > DCP_KEEP_SECONDS) {
        dcp_doom(d, c->at[0], c->size[0]);
        dcp_unkeep(c, 0);
    }
    if (now - c->window_since > DCP_KEEP_SECONDS) {
        c->window_since = now;
        c->window_peak = c->live_bytes;
    }
}

static void dcp_in_use(dcp_cache *c, size_t bytes, int traced) {
    c->live_bytes += bytes;
    if (traced)
        c->traced_bytes += bytes;
    if (c->live_bytes > c->peak_bytes)
        c->peak_bytes = c->live_bytes;
    if (c->live_bytes - c->traced_bytes > c->untraced_peak)
        c->untraced_peak = c->live_bytes - c->traced_bytes;
    if (c->live_bytes > c->window_peak)
        c->window_peak = c->live_bytes;
}

static void *dcp_reap(void *arg) {
    dcp_cache *c = (dcp_cache *)arg;
    dcp_doomed d;
    dcp_lock_take(&c->lock);
    while (c->n_kept) {
        double due = c->since[0] + DCP_KEEP_SECONDS + 0.01;
        dcp_cond_wait(&c->wake, &c->lock, due);
        d.n = 0;
        dcp_expire(c, dcp_now(), &d);
        if (d.n) {
            dcp_lock_drop(&c->lock);
            dcp_unmap_doomed(&d);
            dcp_lock_take(&c->lock);
        }
    }
    c->reaper = 0;
    dcp_lock_drop(&c->lock);
    return NULL;
}

static void dcp_init_sync(void) {
    for (int i = 0; i < DCP_CACHES; i++) {
        dcp_lock_init(&dcp_caches[i].lock);
        dcp_cond_init(&dcp_caches[i].wake);
        dcp_caches[i].reaper = 0;
    }
}

#if !defined(_WIN32)
static void dcp_fork_prepare(void) {
    for (int i = 0; i < DCP_CACHES; i++)
        dcp_lock_take(&dcp_caches[i].lock);
}
static void dcp_fork_parent(void) {
    for (int i = DCP_CACHES - 1; i >= 0; i--)
        dcp_lock_drop(&dcp_caches[i].lock);
}
#endif

/* Set up the caches (once, at import). */
static void dcp_spans_init(void) {
    dcp_init_sync();
    for (int i = 0; i < DCP_CACHES; i++)
        dcp_caches[i].window_since = dcp_now();
#if !defined(_WIN32)
    pthread_atfork(dcp_fork_prepare, dcp_fork_parent, dcp_init_sync);
#endif
}

/* Keep the span at..at+size (a cut-off tail, kept since ``since``) in its place by age,
   where the cache has room for it within ``bound``; else unmap it. */
static void dcp_keep_tail(dcp_cache *c, char *at, size_t size, double since,
                          size_t bound) {
    int i;
    dcp_lock_take(&c->lock);
    if (c->n_kept == DCP_KEEP_SPANS
            || c->live_bytes + c->kept_bytes + size > bound) {
        dcp_lock_drop(&c->lock);
        dcp_unmap(at, size);
        return;
    }
    for (i = c->n_kept; i > 0 && c->since[i - 1] > since; i--) {
        c->at[i] = c->at[i - 1];
        c->size[i] = c->size[i - 1];
        c->since[i] = c->since[i - 1];
    }
    c->at[i] = at;
    c->size[i] = size;
    c->since[i] = since;
    c->n_kept++;
    c->kept_bytes += size;
    if (!c->reaper)
        c->reaper = dcp_start(dcp_reap, c);
    dcp_lock_drop(&c->lock);
}

/* The first ``size`` bytes of a kept span of ``large`` bytes taken for a request: the
   pages past them given back, or, where spans split, as many of them as ``bound`` leaves
   room for kept as a span of their own (resident pages for the next request), the rest
   given back. The bytes it holds now (``large`` where it cannot give pages back). */
static size_t dcp_cut(dcp_cache *c, char *at, size_t size, size_t large, double since,
                      size_t bound) {
#if DCP_CAN_SPLIT
    size_t page = dcp_page(), head = (size + page - 1) / page * page, spare, tail, live;
    dcp_lock_take(&c->lock);
    live = c->live_bytes + c->kept_bytes;
    dcp_lock_drop(&c->lock);
    if (head >= large)
        return large;
    spare = live < bound ? (bound - live) / page * page : 0;
    tail = large - head < spare ? large - head : spare;
    if (tail >= ((size_t)1 << 20)) {       /* a tail worth keeping: at least 1 MiB */
        if (head + tail < large)
            munmap(at + head + tail, large - head - tail);
        dcp_keep_tail(c, at + head, tail, since, bound);
        return head;
    }
#else
    (void)since; (void)bound;
#endif
    return dcp_unmap_tail(at, size, large);
}

/* A span of at least n bytes (its size in *got), from the cache when one will do, in this
   order: the smallest that holds it with at most a quarter to spare; the smallest that
   holds it at most DCP_OVER times over (whole: its pages stay resident, ready for a larger
   request once it is given back); where a fresh span would first give kept ones back
   to stay within the cache's bounds, the smallest larger one still, cut down to the
   request (``dcp_cut``: its head is resident, where a fresh span faults in every page);
   the largest smaller one, grown (where mappings can grow). NULL when out of memory.
   ``flags``: DCP_SPAN_TRACED, tracemalloc sees the span's use (numpy's arrays);
   DCP_SPAN_HUGE, fresh pages of a large span are asked for as huge pages (a table
   touched at random). */
static char *dcp_span_take(size_t n, size_t *got, int flags) {
    dcp_cache *c = dcp_cache_of(flags);
    int traced = flags & DCP_SPAN_TRACED, fresh = 0;
    size_t size = dcp_span_size(n), large = 0, bound;
    double since = 0;
    void *at = NULL;
    int fit = -1, over = -1, huge = -1, under = -1;
    dcp_doomed d;
    d.n = 0;
    dcp_lock_take(&c->lock);
    dcp_expire(c, dcp_now(), &d);
    /* spans in use and kept stay within the most in use at once lately (or in use now) */
    bound = c->live_bytes + size;
    if (bound < c->window_peak)
        bound = c->window_peak;
    for (int i = 0; i < c->n_kept; i++) {
        size_t k = c->size[i];
        if (size <= k && k <= size + size / 4) {
            if (fit < 0 || k < c->size[fit])
                fit = i;
        } else if (size < k && k / DCP_OVER <= size) {
            if (over < 0 || k < c->size[over])
                over = i;
        } else if (size < k) {
            if (DCP_CAN_TRIM && (huge < 0 || k < c->size[huge]))
                huge = i;
        } else if (DCP_CAN_GROW && k < size && (under < 0 || k > c->size[under])) {
            under = i;
        }
    }
    if (fit >= 0) {
        at = c->at[fit];
        size = c->size[fit];
        dcp_unkeep(c, fit);
    } else if (over >= 0) {
        at = c->at[over];
        size = c->size[over];
        dcp_unkeep(c, over);
    } else if (huge >= 0 && c->live_bytes + c->kept_bytes + size > bound) {
        /* cut down once the lock is let go */
        at = c->at[huge];
        large = c->size[huge];
        since = c->since[huge];
        dcp_unkeep(c, huge);
    } else if (under >= 0) {              /* its pages stay; only the new tail is fresh */
        char *old = c->at[under];
        size_t old_size = c->size[under];
        dcp_unkeep(c, under);
        at = DCP_GROW(old, old_size, size);
        if (at == NULL)
            dcp_doom(&d, old, old_size);
    }
    if (at == NULL) {
        /* fresh pages: first give back kept spans, the oldest first, to stay in bounds */
        while (c->n_kept
               && c->live_bytes + c->kept_bytes + size > bound) {
            dcp_doom(&d, c->at[0], c->size[0]);
            dcp_unkeep(c, 0);
        }
        at = dcp_map(size);
        fresh = 1;
    }
    if (at != NULL)
        dcp_in_use(c, size, traced);
    dcp_lock_drop(&c->lock);
    dcp_unmap_doomed(&d);
    if (at == NULL)
        return NULL;
    if (fresh && (flags & DCP_SPAN_HUGE))
        dcp_huge_advise(at, size);
    if (large) {                          /* it may hold more: whole pages, or all of it */
        size_t kept = dcp_cut(c, (char *)at, size, large, since, bound);
        if (kept > size) {
            dcp_lock_take(&c->lock);
            dcp_in_use(c, kept - size, traced);
            dcp_lock_drop(&c->lock);
            size = kept;
        }
    }
    *got = size;
    return (char *)at;
}

/* Give back a span taken with dcp_span_take (of its current size, with the flags it was
   taken with): kept for reuse within the cache's bounds, evicting the oldest, or
   unmapped. */
static void dcp_span_give(char *at, size_t size, int flags) {
    dcp_cache *c = dcp_cache_of(flags);
    int traced = flags & DCP_SPAN_TRACED;
    dcp_doomed d;
    size_t limit;
    double now = dcp_now();
    d.n = 0;
    dcp_lock_take(&c->lock);
    dcp_expire(c, now, &d);
    c->live_bytes -= size;
    if (traced)
        c->traced_bytes -= size;
    limit = c->window_peak < DCP_KEEP_BYTES ? c->window_peak : DCP_KEEP_BYTES;
    if (size > limit) {
        dcp_doom(&d, at, size);
    } else {
        while (c->n_kept && (c->n_kept == DCP_KEEP_SPANS
                                    || c->kept_bytes + size > limit)) {
            dcp_doom(&d, c->at[0], c->size[0]);
            dcp_unkeep(c, 0);
        }
        c->at[c->n_kept] = at;
        c->size[c->n_kept] = size;
        c->since[c->n_kept] = now;
        c->n_kept++;
        c->kept_bytes += size;
        if (!c->reaper) {
            /* without a reaper, spans still expire when memory is next taken or given */
            c->reaper = dcp_start(dcp_reap, c);
        }
    }
    dcp_lock_drop(&c->lock);
    dcp_unmap_doomed(&d);
}

/* A span in use (at, of size bytes, taken with ``flags``) made to hold n bytes, its first
   ``keep`` kept: from DCP_GROW_MIN bytes up, where mappings can grow, moved by the system
   (its pages change place, none is copied); else a span taken anew, the bytes copied and
   the old span given back. NULL, the span as it was, when out of memory. */
static char *dcp_span_grow(char *at, size_t size, size_t keep, size_t n, size_t *got,
                           int flags) {
    dcp_cache *c = dcp_cache_of(flags);
    char *moved;
    size_t want = dcp_span_size(n);
    if (DCP_CAN_GROW && size >= DCP_GROW_MIN && want > size) {
        moved = (char *)DCP_GROW(at, size, want);
        if (moved != NULL) {
            if (flags & DCP_SPAN_HUGE)
                dcp_huge_advise(moved, want);
            dcp_lock_take(&c->lock);
            dcp_in_use(c, want - size, flags & DCP_SPAN_TRACED);
            dcp_lock_drop(&c->lock);
            *got = want;
            return moved;
        }
    }
    moved = dcp_span_take(n, got, flags);
    if (moved == NULL)
        return NULL;
    memcpy(moved, at, keep < size ? keep : size);
    dcp_span_give(at, size, flags);
    return moved;
}

/* A span in use gave back ``bytes`` of its tail (unmapped by the caller): the scan's. */
static void dcp_span_shrunk(size_t bytes) {
    dcp_cache *c = &dcp_caches[0];
    dcp_lock_take(&c->lock);
    c->live_bytes -= bytes;
    dcp_lock_drop(&c->lock);
}

/* The one rule of what memory is a span: a request of n bytes from DCP_SPAN_MIN up is a
   span of the cache ``flags`` names (its size in *got), a smaller one the C library's
   (*got 0). NULL when out of memory. */
static char *dcp_take(size_t n, size_t *got, int flags) {
    *got = 0;
    if (n < DCP_SPAN_MIN)
        return (char *)malloc(n ? n : 1);
    return dcp_span_take(n, got, flags);
}

/* Give back what dcp_take gave (``at`` may be NULL), ``got`` as it said. */
static void dcp_give(void *at, size_t got, int flags) {
    if (got)
        dcp_span_give((char *)at, got, flags);
    else
        free(at);
}

typedef struct {                          /* what a cache holds, in bytes (spans: a count) */
    size_t in_use, peak;                  /* spans in use; the most since the last reset */
    size_t kept, spans;                   /* kept for reuse */
    size_t untraced, untraced_peak;       /* in use and the peak, leaving out the spans
                                             tracemalloc sees (numpy_spans.h) */
} dcp_figures;

/* What cache ``i`` (0: the scan's output memory, 1: the state engine's working memory)
   holds now. */
static dcp_figures dcp_cache_figures(int i) {
    dcp_cache *c = &dcp_caches[i];
    dcp_figures f;
    dcp_lock_take(&c->lock);
    f.in_use = c->live_bytes;
    f.peak = c->peak_bytes;
    f.kept = c->kept_bytes;
    f.spans = (size_t)c->n_kept;
    f.untraced = c->live_bytes - c->traced_bytes;
    f.untraced_peak = c->untraced_peak;
    dcp_lock_drop(&c->lock);
    return f;
}

/* The peaks of every cache start again from what is in use. */
static void dcp_span_reset(void) {
    for (int i = 0; i < DCP_CACHES; i++) {
        dcp_cache *c = &dcp_caches[i];
        dcp_lock_take(&c->lock);
        c->peak_bytes = c->live_bytes;
        c->untraced_peak = c->live_bytes - c->traced_bytes;
        dcp_lock_drop(&c->lock);
    }
}

/* Give back now every span the caches keep for reuse; the bytes given back. A reaper
   finds its cache empty when it next wakes, and ends. */
static size_t dcp_span_release(void) {
    size_t freed = 0;
    for (int i = 0; i < DCP_CACHES; i++) {
        dcp_cache *c = &dcp_caches[i];
        dcp_doomed d;
        d.n = 0;
        dcp_lock_take(&c->lock);
        for (int k = 0; k < c->n_kept; k++)
            dcp_doom(&d, c->at[k], c->size[k]);
        freed += c->kept_bytes;
        c->n_kept = 0;
        c->kept_bytes = 0;
        dcp_lock_drop(&c->lock);
        dcp_unmap_doomed(&d);
    }
    return freed;
}

/* Copy n bytes to dst (output memory, not read again soon): with streaming stores from
   DCP_STREAM_MIN bytes up, else memcpy. */
#define DCP_STREAM_MIN (256 * 1024)
static void dcp_put(char *dst, const char *src, size_t n) {
#if DCP_STREAM
    if (n >= DCP_STREAM_MIN) {
        size_t head = (16 - ((uintptr_t)dst & 15)) & 15, i;
        memcpy(dst, src, head);
        dst += head, src += head, n -= head;
        for (i = 0; i + 64 <= n; i += 64) {
            __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
            __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
            __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
            _mm_stream_si128((__m128i *)(dst + i), a);
            _mm_stream_si128((__m128i *)(dst + i + 16), b);
            _mm_stream_si128((__m128i *)(dst + i + 32), c);
            _mm_stream_si128((__m128i *)(dst + i + 48), d);
        }
        memcpy(dst + i, src + i, n - i);
        _mm_sfence();                     /* the stores are seen before whatever follows */
        return;
    }
#endif
    memcpy(dst, src, n);
}

#endif
