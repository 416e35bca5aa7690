/* The memory-bandwidth probe of the dcpfast benchmark suite (benchmarks/suite/bandwidth.py).

   bandwidth BYTES REPEAT N...: for each thread count N, the GB/s of N threads each
   - read:  summing its contiguous 1/N of a resident buffer of BYTES as 64-bit words;
   - copy:  memcpy of its 1/N of that buffer into its 1/N of a resident destination
            (GB/s of the bytes read, the source's size: each byte is also written once);
   - fresh: memset of its 1/N of a region mmap'ed anew for each run (page faults timed,
            mmap and munmap not), as a scan's new output columns are.
   Each figure is the best of REPEAT runs after a warm-up, a run timed from the barrier
   that releases its threads to the end of the last of them; the runs take turns (every
   thread count and measure once a round), so a load change hits them alike. Prints one
   JSON object; "checksum" is the sum read, printed so that the reads cannot be elided. */

#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { READ, COPY, FRESH, MEASURES };
static const char *NAMES[MEASURES] = {"read", "copy", "fresh"};

static size_t size;                    /* bytes of each buffer, a multiple of 4096 */
static uint64_t *src, *dst, *fresh;    /* fresh: mapped by main before each FRESH run */
static int measure, active;            /* what the next run does, on how many threads */
static pthread_barrier_t start, done;  /* all workers and main */
static double began[256], ended[256];
static uint64_t sums[256];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Eight independent sums: no chain of dependent adds, and a loop that GCC and clang turn
   into four vector adds a round at -O2. n is a multiple of 8. */
static uint64_t sum(const uint64_t *p, size_t n)
{
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0;
    for (size_t i = 0; i < n; i += 8) {
        a += p[i], b += p[i + 1], c += p[i + 2], d += p[i + 3];
        e += p[i + 4], f += p[i + 5], g += p[i + 6], h += p[i + 7];
    }
    return a + b + c + d + e + f + g + h;
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&start);
        if (measure < 0)
            return NULL;
        if (me < active) {
            /* thread me's words: [lo, hi); every share a multiple of 64 bytes */
            size_t words = size / 8, share = words / active & ~(size_t)7;
            size_t lo = me * share, hi = me == active - 1 ? words : lo + share;
            began[me] = now();
            if (measure == READ)
                sums[me] = sum(src + lo, hi - lo);
            else if (measure == COPY)
                memcpy(dst + lo, src + lo, (hi - lo) * 8);
            else
                memset(fresh + lo, me + 1, (hi - lo) * 8);
            ended[me] = now();
        }
        pthread_barrier_wait(&done);
    }
}

/* One run of what on k threads: its seconds, from the first thread released to the last
   done. */
static double run(int what, int k)
{
    if (what == FRESH) {
        fresh = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (fresh == MAP_FAILED)
            exit(4);
    }
    measure = what;
    active = k;
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&done);
    double first = began[0], last = ended[0];
    for (int i = 1; i < k; i++) {
        first = began[i] < first ? began[i] : first;
        last = ended[i] > last ? ended[i] : last;
    }
    if (what == FRESH)
        munmap(fresh, size);
    return last - first;
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return 2;
    size = (strtoull(argv[1], NULL, 10) + 4095) & ~(size_t)4095;
    int repeat = atoi(argv[2]), counts = argc - 3, most = 1, k[64];
    if (repeat < 1)
        return 2;
    for (int c = 0; c < counts && c < 64; c++) {
        k[c] = atoi(argv[3 + c]);
        if (k[c] < 1 || k[c] > 256)
            return 2;
        most = k[c] > most ? k[c] : most;
    }
    counts = counts < 64 ? counts : 64;
    /* written (and so resident) beforehand, by one thread, as the corpus a scan reads */
    src = aligned_alloc(4096, size);
    dst = aligned_alloc(4096, size);
    if (!src || !dst)
        return 3;
    for (size_t i = 0; i < size / 8; i++)
        src[i] = i * 0x9E3779B97F4A7C15ull;
    memset(dst, 1, size);
    pthread_barrier_init(&start, NULL, most + 1);
    pthread_barrier_init(&done, NULL, most + 1);
    pthread_t threads[256];
    for (int i = 0; i < most; i++)
        if (pthread_create(&threads[i], NULL, worker, (void *)(intptr_t)i))
            return 3;
    double best[64][MEASURES];
    for (int c = 0; c < counts; c++)
        for (int m = 0; m < MEASURES; m++)
            best[c][m] = 1e300;
    for (int r = 0; r <= repeat; r++)          /* round 0: the warm-up, not kept */
        for (int c = 0; c < counts; c++)
            for (int m = 0; m < MEASURES; m++) {
                double t = run(m, k[c]);
                if (r > 0 && t < best[c][m])
                    best[c][m] = t;
            }
    measure = -1;
    pthread_barrier_wait(&start);
    for (int i = 0; i < most; i++)
        pthread_join(threads[i], NULL);
    uint64_t checksum = 0;
    for (int i = 0; i < k[counts - 1]; i++)
        checksum += sums[i];
    printf("{\"bytes\": %zu, \"repeat\": %d, \"checksum\": %llu, \"threads\": {", size,
           repeat, (unsigned long long)checksum);
    for (int c = 0; c < counts; c++) {
        printf("%s\"%d\": {", c ? ", " : "", k[c]);
        for (int m = 0; m < MEASURES; m++)
            printf("%s\"%s\": %.3f", m ? ", " : "", NAMES[m], size / best[c][m] / 1e9);
        printf("}");
    }
    printf("}}\n");
    return 0;
}
