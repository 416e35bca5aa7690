/* Checks the key hash and comparison of dcpfast._core's KeyIndex (keys.h) on their own,
   byte by byte: for every key length up to 40 and every alignment of the two keys,
   equal bytes compare equal and hash alike, and a change of any one byte, of the
   stream, of the collection or of the length makes them compare unequal and hash apart.
   Each key is copied to an allocation of exactly its length, so that a build with
   AddressSanitizer stops at any byte read outside it. Prints "ok" and the number of
   checks; exits non-zero at the first check that fails. tests/test_state_core.py builds
   and runs it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keys.h"

#define LONGEST 40

static long checks;

static int fail(const char *what, int n, int at, int oa, int ob)
{
    printf("FAILED %s: length %d, byte %d, alignments %d and %d\n", what, n, at, oa, ob);
    return 1;
}

/* A copy of the n bytes at p in an allocation of exactly n bytes (1 for none). */
static uint8_t *exact(const uint8_t *p, int n)
{
    uint8_t *q = (uint8_t *)malloc(n ? (size_t)n : 1);
    if (q == NULL) {
        printf("FAILED: no memory\n");
        exit(2);
    }
    if (n)
        memcpy(q, p, (size_t)n);
    return q;
}

static int one_length(int n)
{
    uint8_t key[LONGEST + 8], room_a[LONGEST + 16], room_b[LONGEST + 16], *a, *b;
    uint64_t h;
    int i, at, oa, ob;
    for (i = 0; i < n; i++)
        key[i] = (uint8_t)(31 * i + 7 * n + 1);
    a = exact(key, n);
    h = dcp_hash_key(a, n, 5u << 16, 8);
    for (oa = 0; oa < 8; oa++) {
        for (ob = 0; ob < 8; ob++) {            /* the same bytes at any two alignments */
            memcpy(room_a + oa, key, (size_t)n);
            memcpy(room_b + ob, key, (size_t)n);
            checks += 2;
            if (!dcp_same_bytes(room_a + oa, room_b + ob, n))
                return fail("equal keys compare unequal", n, -1, oa, ob);
            if (dcp_hash_key(room_b + ob, n, 5u << 16, 8) != h)
                return fail("equal keys hash apart", n, -1, oa, ob);
        }
    }
    for (at = 0; at < n; at++) {                /* one byte changed, in every bit */
        for (i = 0; i < 8; i++) {
            key[at] ^= (uint8_t)(1u << i);
            b = exact(key, n);
            checks += 3;
            if (dcp_same_bytes(a, b, n) || dcp_same_bytes(b, a, n))
                return fail("keys one byte apart compare equal", n, at, 0, 0);
            if (dcp_hash_key(b, n, 5u << 16, 8) == h)
                return fail("keys one byte apart hash alike", n, at, 0, 0);
            free(b);
            key[at] ^= (uint8_t)(1u << i);
        }
    }
    checks += 3;
    if (dcp_hash_key(a, n, 6u << 16, 8) == h || dcp_hash_key(a, n, 5u << 16, 9) == h)
        return fail("another stream or collection hashes alike", n, -1, 0, 0);
    if (n && dcp_hash_key(a, n - 1, 5u << 16, 8) == h)
        return fail("a shorter key hashes alike", n, -1, 0, 0);
    free(a);
    return 0;
}

int main(void)
{
    int n;
    for (n = 0; n <= LONGEST; n++)
        if (one_length(n))
            return 1;
    printf("ok %ld checks\n", checks);
    return 0;
}
