/* The recycled span cache of cscan's output memory (scan_memory.pxi).

   Large output memory lives in anonymous mappings ("spans") that go back to this cache when
   their last array is dropped, so that the next scan writes into pages that are already
   resident instead of faulting in and zeroing fresh ones. What the cache keeps is bounded
   three ways: at most DCP_KEEP_SPANS spans and DCP_KEEP_BYTES bytes; at most the most bytes
   in use at once during the current window of DCP_KEEP_SECONDS (so the cache never holds
   more than the batches themselves held lately); and no span for longer than
   DCP_KEEP_SECONDS. A reaper thread, started when the cache gets its first span and ended
   when it is empty, unmaps spans as they expire: idle memory goes back to the system
   without waiting for the next allocation, and no thread outlives the cache's use. A fork
   leaves the child with the cache's spans, an unlocked cache and no reaper (the next
   span given back starts one).

   DCP_GROW extends a mapping in place or moves it (Linux's mremap; _GNU_SOURCE comes from
   Python.h) where DCP_CAN_GROW, else fails. dcp_put copies rows into output memory: large
   copies with streaming stores (SSE2), which write whole lines without first reading them
   and leave the cache to the scan. */
#ifndef DCPFAST_SPANS_H
#define DCPFAST_SPANS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#if defined(__SSE2__) || defined(_M_X64)
#  include <emmintrin.h>
#  define DCP_STREAM 1
#else
#  define DCP_STREAM 0
#endif
#if defined(__linux__)
#  define DCP_CAN_GROW 1
#  define DCP_GROW(p, old, new) mremap((p), (old), (new), MREMAP_MAYMOVE)
#else
#  define DCP_CAN_GROW 0
#  define DCP_GROW(p, old, new) MAP_FAILED
#endif

#define DCP_KEEP_SPANS 128
#define DCP_KEEP_BYTES ((size_t)512 << 20)
#define DCP_KEEP_SECONDS 2.0
#define DCP_OVER 4                        /* a kept span serves a request this much smaller */

static double dcp_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The span size for a request of n bytes: sixteenths of a power of two, whole pages. */
static size_t dcp_span_size(size_t n) {
    size_t step = 4096;
    while (step * 16 <= n)
        step *= 2;
    return (n + step - 1) / step * step;
}

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;                  /* the reaper's timed wait */
    char *at[DCP_KEEP_SPANS];             /* kept spans, oldest first */
    size_t size[DCP_KEEP_SPANS];
    double since[DCP_KEEP_SPANS];
    int n_kept;
    size_t kept_bytes;
    size_t live_bytes, peak_bytes;        /* spans in use; the most since the last reset */
    size_t window_peak;                   /* the most in use at once in the current window */
    double window_since;
    int reaper;                           /* a reaper thread is running */
} dcp_spans;

typedef struct {                          /* spans to unmap once the lock is released */
    int n;
    char *at[DCP_KEEP_SPANS + 1];
    size_t size[DCP_KEEP_SPANS + 1];
} dcp_doomed;

static void dcp_unmap(const dcp_doomed *d) {
    for (int i = 0; i < d->n; i++)
        munmap(d->at[i], d->size[i]);
}

static void dcp_doom(dcp_doomed *d, char *at, size_t size) {
    d->at[d->n] = at;
    d->size[d->n] = size;
    d->n++;
}

static void dcp_unkeep(int i) {
    dcp_spans.kept_bytes -= dcp_spans.size[i];
    dcp_spans.n_kept--;
    int rest = dcp_spans.n_kept - i;
    memmove(&dcp_spans.at[i], &dcp_spans.at[i + 1], rest * sizeof(char *));
    memmove(&dcp_spans.size[i], &dcp_spans.size[i + 1], rest * sizeof(size_t));
    memmove(&dcp_spans.since[i], &dcp_spans.since[i + 1], rest * sizeof(double));
}

/* Under the lock: doom the spans kept longer than DCP_KEEP_SECONDS, and start a new
   window of the in-use peak when the current one is over. */
static void dcp_expire(double now, dcp_doomed *d) {
    while (dcp_spans.n_kept && now - dcp_spans.since[0] > DCP_KEEP_SECONDS) {
        dcp_doom(d, dcp_spans.at[0], dcp_spans.size[0]);
        dcp_unkeep(0);
    }
    if (now - dcp_spans.window_since > DCP_KEEP_SECONDS) {
        dcp_spans.window_since = now;
        dcp_spans.window_peak = dcp_spans.live_bytes;
    }
}

static void dcp_in_use(size_t bytes) {
    dcp_spans.live_bytes += bytes;
    if (dcp_spans.live_bytes > dcp_spans.peak_bytes)
        dcp_spans.peak_bytes = dcp_spans.live_bytes;
    if (dcp_spans.live_bytes > dcp_spans.window_peak)
        dcp_spans.window_peak = dcp_spans.live_bytes;
}

static void *dcp_reap(void *unused) {
    dcp_doomed d;
    (void)unused;
    pthread_mutex_lock(&dcp_spans.lock);
    while (dcp_spans.n_kept) {
        double due = dcp_spans.since[0] + DCP_KEEP_SECONDS + 0.01;
        struct timespec t;
        t.tv_sec = (time_t)due;
        t.tv_nsec = (long)((due - (double)t.tv_sec) * 1e9);
        pthread_cond_timedwait(&dcp_spans.wake, &dcp_spans.lock, &t);
        d.n = 0;
        dcp_expire(dcp_now(), &d);
        if (d.n) {
            pthread_mutex_unlock(&dcp_spans.lock);
            dcp_unmap(&d);
            pthread_mutex_lock(&dcp_spans.lock);
        }
    }
    dcp_spans.reaper = 0;
    pthread_mutex_unlock(&dcp_spans.lock);
    return NULL;
}

static void dcp_fork_prepare(void) { pthread_mutex_lock(&dcp_spans.lock); }
static void dcp_fork_parent(void) { pthread_mutex_unlock(&dcp_spans.lock); }

static void dcp_init_sync(void) {
    pthread_condattr_t attr;
    pthread_mutex_init(&dcp_spans.lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dcp_spans.wake, &attr);
    pthread_condattr_destroy(&attr);
    dcp_spans.reaper = 0;
}

/* Set up the cache (once, at import). */
static void dcp_spans_init(void) {
    dcp_init_sync();
    dcp_spans.window_since = dcp_now();
    pthread_atfork(dcp_fork_prepare, dcp_fork_parent, dcp_init_sync);
}

/* A span of at least n bytes (its size in *got), from the cache when one will do, in this
   order: the smallest that holds it with at most a quarter to spare; the smallest that
   holds it at most DCP_OVER times over (whole: its pages stay resident, ready for a larger
   request once it is given back); the largest smaller one, grown (where mappings can
   grow). NULL when out of memory. */
static char *dcp_span_take(size_t n, size_t *got) {
    size_t size = dcp_span_size(n);
    void *at = MAP_FAILED;
    int fit = -1, over = -1, under = -1;
    dcp_doomed d;
    d.n = 0;
    pthread_mutex_lock(&dcp_spans.lock);
    dcp_expire(dcp_now(), &d);
    for (int i = 0; i < dcp_spans.n_kept; i++) {
        size_t k = dcp_spans.size[i];
        if (size <= k && k <= size + size / 4) {
            if (fit < 0 || k < dcp_spans.size[fit])
                fit = i;
        } else if (size < k && k / DCP_OVER <= size) {
            if (over < 0 || k < dcp_spans.size[over])
                over = i;
        } else if (DCP_CAN_GROW && k < size && (under < 0 || k > dcp_spans.size[under])) {
            under = i;
        }
    }
    if (fit >= 0) {
        at = dcp_spans.at[fit];
        size = dcp_spans.size[fit];
        dcp_unkeep(fit);
    } else if (over >= 0) {
        at = dcp_spans.at[over];
        size = dcp_spans.size[over];
        dcp_unkeep(over);
    } else if (under >= 0) {              /* its pages stay; only the new tail is fresh */
        char *old = dcp_spans.at[under];
        size_t old_size = dcp_spans.size[under];
        dcp_unkeep(under);
        at = DCP_GROW(old, old_size, size);
        if (at == MAP_FAILED)
            dcp_doom(&d, old, old_size);
    }
    if (at == MAP_FAILED)
        at = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at != MAP_FAILED)
        dcp_in_use(size);
    pthread_mutex_unlock(&dcp_spans.lock);
    dcp_unmap(&d);
    if (at == MAP_FAILED)
        return NULL;
    *got = size;
    return (char *)at;
}

/* Give back a span taken with dcp_span_take (of its current size): kept for reuse within
   the cache's bounds, evicting the oldest, or unmapped. */
static void dcp_span_give(char *at, size_t size) {
    dcp_doomed d;
    size_t limit;
    double now = dcp_now();
    d.n = 0;
    pthread_mutex_lock(&dcp_spans.lock);
    dcp_expire(now, &d);
    dcp_spans.live_bytes -= size;
    limit = dcp_spans.window_peak < DCP_KEEP_BYTES ? dcp_spans.window_peak : DCP_KEEP_BYTES;
    if (size > limit) {
        dcp_doom(&d, at, size);
    } else {
        while (dcp_spans.n_kept && (dcp_spans.n_kept == DCP_KEEP_SPANS
                                    || dcp_spans.kept_bytes + size > limit)) {
            dcp_doom(&d, dcp_spans.at[0], dcp_spans.size[0]);
            dcp_unkeep(0);
        }
        dcp_spans.at[dcp_spans.n_kept] = at;
        dcp_spans.size[dcp_spans.n_kept] = size;
        dcp_spans.since[dcp_spans.n_kept] = now;
        dcp_spans.n_kept++;
        dcp_spans.kept_bytes += size;
        if (!dcp_spans.reaper) {
            pthread_t thread;
            pthread_attr_t attr;
            pthread_attr_init(&attr);
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&attr, 64 * 1024);
            /* without a reaper, spans still expire when memory is next taken or given */
            dcp_spans.reaper = pthread_create(&thread, &attr, dcp_reap, NULL) == 0;
            pthread_attr_destroy(&attr);
        }
    }
    pthread_mutex_unlock(&dcp_spans.lock);
    dcp_unmap(&d);
}

/* A span in use gave back ``bytes`` of its tail (unmapped by the caller). */
static void dcp_span_shrunk(size_t bytes) {
    pthread_mutex_lock(&dcp_spans.lock);
    dcp_spans.live_bytes -= bytes;
    pthread_mutex_unlock(&dcp_spans.lock);
}

/* The bytes of spans in use, the most in use at once since the last reset, the bytes
   kept for reuse; with reset, the peak starts again from what is in use. */
static void dcp_span_stats(size_t *live, size_t *peak, size_t *kept, int reset) {
    pthread_mutex_lock(&dcp_spans.lock);
    *live = dcp_spans.live_bytes;
    *peak = dcp_spans.peak_bytes;
    *kept = dcp_spans.kept_bytes;
    if (reset)
        dcp_spans.peak_bytes = dcp_spans.live_bytes;
    pthread_mutex_unlock(&dcp_spans.lock);
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
