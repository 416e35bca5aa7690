/* The duplicate-key check of xattr sections too long to compare pairwise (declared in
   cvalues.pyx): the keys, given as (offset, length) into their value in pair order, are
   sorted by a merge sort (stable, so equal keys stay in pair order), and the first
   duplicate is the least second member of a run of equal keys. O(n log n) comparisons
   whatever the keys are: no input makes it slower, as colliding hashes would a hash set.
   Plain C, so that the check runs without the GIL. */
#ifndef DCPFAST_XATTR_KEYS_H
#define DCPFAST_XATTR_KEYS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int dcp_key_cmp(const uint8_t *v, const uint32_t *at, const uint32_t *len,
                       uint32_t a, uint32_t b) {
    uint32_t n = len[a] < len[b] ? len[a] : len[b];
    int c = memcmp(v + at[a], v + at[b], n);
    if (c)
        return c;
    return len[a] < len[b] ? -1 : len[a] > len[b];
}

/* The index of the first key equal to an earlier one, -1 where all `n` keys differ, -2
   when memory runs out. */
static int64_t dcp_first_duplicate(const uint8_t *v, const uint32_t *at,
                                   const uint32_t *len, size_t n) {
    uint32_t *idx, *tmp, *swap;
    size_t width, lo, mid, hi, i, j, k;
    int64_t first = -1;
    if (n < 2)
        return -1;
    idx = (uint32_t *)malloc(n * sizeof(uint32_t));
    tmp = (uint32_t *)malloc(n * sizeof(uint32_t));
    if (idx == NULL || tmp == NULL) {
        free(idx);
        free(tmp);
        return -2;
    }
    for (i = 0; i < n; i++)
        idx[i] = (uint32_t)i;
    for (width = 1; width < n; width *= 2) {
        for (lo = 0; lo < n; lo += 2 * width) {
            mid = lo + width < n ? lo + width : n;
            hi = lo + 2 * width < n ? lo + 2 * width : n;
            i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = dcp_key_cmp(v, at, len, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
            while (i < mid)
                tmp[k++] = idx[i++];
            while (j < hi)
                tmp[k++] = idx[j++];
        }
        swap = idx, idx = tmp, tmp = swap;
    }
    for (i = 1; i < n; i++)
        if (dcp_key_cmp(v, at, len, idx[i - 1], idx[i]) == 0
                && (i < 2 || dcp_key_cmp(v, at, len, idx[i - 2], idx[i - 1]) != 0)
                && (first < 0 || idx[i] < (uint32_t)first))
            first = idx[i];
    free(idx);
    free(tmp);
    return first;
}

#endif
