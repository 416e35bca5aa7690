/* The machine-limit probe of the dcpfast benchmark suite (benchmarks/suite/probe.py).

   probe FILE REPEAT: reads FILE, follows the DCP body lengths through it storing opcode,
   bytes 6-7 (vbucket or status) and body length per frame, REPEAT times, and prints as
   JSON the frames, the best walk's seconds and the sums of what it stored. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Follow the body lengths through n bytes, storing opcode, vbucket and body length. */
static size_t walk(const uint8_t *p, size_t n, uint8_t *op, uint16_t *vb, uint32_t *body)
{
    size_t pos = 0, i = 0;
    while (n - pos >= 24) {
        const uint8_t *h = p + pos;
        uint32_t len = (uint32_t)h[8] << 24 | (uint32_t)h[9] << 16 | (uint32_t)h[10] << 8 | h[11];
        if (len > n - pos - 24)
            break;
        op[i] = h[1];
        vb[i] = (uint16_t)(h[6] << 8 | h[7]);
        body[i] = len;
        i++;
        pos += 24 + (size_t)len;
    }
    return i;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    int repeat = atoi(argv[2]);
    if (!f || fseek(f, 0, SEEK_END))
        return 2;
    long n = ftell(f);
    rewind(f);
    uint8_t *p = malloc(n + 1);
    size_t cap = n / 24 + 1;
    uint8_t *op = malloc(cap);
    uint16_t *vb = malloc(2 * cap);
    uint32_t *body = malloc(4 * cap);
    if (!p || !op || !vb || !body || fread(p, 1, n, f) != (size_t)n)
        return 2;
    size_t frames = walk(p, n, op, vb, body), i;
    double best = 1e300;
    for (int r = 0; r < repeat; r++) {
        double start = now();
        size_t k = walk(p, n, op, vb, body);
        double elapsed = now() - start;
        if (k != frames)
            return 3;
        if (elapsed < best)
            best = elapsed;
    }
    unsigned long long ops = 0, vbs = 0, bodies = 0;
    for (i = 0; i < frames; i++) {
        ops += op[i];
        vbs += vb[i];
        bodies += body[i];
    }
    printf("{\"frames\": %zu, \"best\": %.9f, \"opcode_sum\": %llu, \"bytes67_sum\": %llu, "
           "\"body_len_sum\": %llu}\n", frames, best, ops, vbs, bodies);
    return 0;
}
