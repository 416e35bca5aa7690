/* Checks the blocks of dcpfast._core's KeyIndex tables (pages.h) on their own: for sizes
   on both sides of DCP_HUGE_MIN, a zeroed block is all zero, a block is writable to its
   last byte, and a block grown or shrunk keeps the bytes it was told are in use, in a
   chain of sizes that crosses DCP_HUGE_MIN both ways and grows past DCP_HUGE_MAPPED; a
   zeroed block whose size overflows is refused. Built with AddressSanitizer, any byte
   read or written outside a block stops it. Prints "ok" and the number of checks; exits
   non-zero at the first check that fails. tests/test_state_core.py builds and runs it. */
#define _GNU_SOURCE 1                           /* as Python.h defines it */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pages.h"

static long checks;

static int fail(const char *what, size_t n)
{
    printf("FAILED %s: %zu bytes\n", what, n);
    return 1;
}

static unsigned char pattern(size_t i, unsigned seed)
{
    return (unsigned char)((i * 2654435761u + seed) >> 7);
}

int main(void)
{
    const size_t sizes[] = {1, 4095, DCP_HUGE_MIN - 1, DCP_HUGE_MIN, DCP_HUGE_MIN + 1,
                            3 * DCP_HUGE_MIN + 4097};
    const size_t chain[] = {64, DCP_HUGE_MIN - 8, DCP_HUGE_MIN + 8, 5 * DCP_HUGE_MIN,
                            DCP_HUGE_MIN + 8, 1000, 2 * DCP_HUGE_MIN,
                            DCP_HUGE_MAPPED + 4096, 2 * DCP_HUGE_MAPPED + 8, DCP_HUGE_MIN};
    size_t k, i, used = 0;
    unsigned char *p = NULL, *q;
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        p = (unsigned char *)dcp_huge_calloc(n / 8, 8);
        if (p == NULL)
            return fail("no memory", n);
        for (i = 0; i < n / 8 * 8; i++)
            if (p[i])
                return fail("a zeroed block with a byte set", n);
        free(p);
        p = (unsigned char *)dcp_huge_malloc(n);
        if (p == NULL)
            return fail("no memory", n);
        memset(p, 0xA5, n);
        if (p[n - 1] != 0xA5)
            return fail("the last byte", n);
        free(p);
        checks += 2;
    }
    if (dcp_huge_calloc(SIZE_MAX / 8 + 2, 8) != NULL)
        return fail("a zeroed block whose size overflows", 0);
    checks++;
    p = NULL;
    for (k = 0; k < sizeof chain / sizeof chain[0]; k++) {
        size_t n = chain[k], keep = used < n ? used : n;
        q = (unsigned char *)dcp_huge_realloc(p, used, n);
        if (q == NULL)
            return fail("no memory", n);
        for (i = 0; i < keep; i++)
            if (q[i] != pattern(i, (unsigned)k))
                return fail("a block moved without the bytes in use", n);
        for (i = 0; i < n; i++)          /* the whole block, for the next size's check */
            q[i] = pattern(i, (unsigned)k + 1);
        p = q;
        used = n;
        checks++;
    }
    free(p);
    printf("ok %ld checks\n", checks);
    return 0;
}
