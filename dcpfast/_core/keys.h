/* The hash and the comparison of document keys, for cstate's KeyIndex (state_keys.pxi):
   a key is read a word (8 bytes) at a time, its last word the 8 bytes that end it (it may
   overlap the word before), and a key shorter than 8 bytes is one word holding each of its
   bytes. Neither reads a byte outside the key. tests/c/keys_probe.c checks both on their
   own, byte by byte. */
#ifndef DCPFAST_KEYS_H
#define DCPFAST_KEYS_H

#include <stdint.h>
#include <string.h>

/* MurmurHash3's 64-bit finaliser: every bit of h moves every bit of the result. */
static inline uint64_t dcp_fmix(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

/* The n (< 8) bytes at p as a word: two loads of 4 that overlap (4 to 7 bytes), or the
   first, middle and last byte (1 to 3). Two keys of one length give the same word only
   where their bytes are the same. */
static inline uint64_t dcp_short_word(const uint8_t *p, int64_t n)
{
    uint32_t lo, hi;
    if (n >= 4) {
        memcpy(&lo, p, 4);
        memcpy(&hi, p + n - 4, 4);
        return ((uint64_t)hi << 32) | lo;
    }
    if (n > 0)
        return p[0] | ((uint64_t)p[n >> 1] << 8) | ((uint64_t)p[n - 1] << 16);
    return 0;
}

/* The hash of a document: its stream (unit), collection, key length and key words. */
static inline uint64_t dcp_hash_key(const uint8_t *p, int64_t n, uint32_t unit, uint32_t cid)
{
    uint64_t h = (((uint64_t)unit << 32) | cid) * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t)n;
    uint64_t w;
    if (n < 8)
        return dcp_fmix((h ^ dcp_short_word(p, n)) * UINT64_C(0x4cf5ad432745937f));
    while (n > 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * UINT64_C(0x87c37b91114253d5);
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    memcpy(&w, p + n - 8, 8);
    return dcp_fmix((h ^ w) * UINT64_C(0x4cf5ad432745937f));
}

/* Whether the n bytes at a and b are equal, word by word. */
static inline int dcp_same_bytes(const uint8_t *a, const uint8_t *b, int64_t n)
{
    uint64_t x, y;
    if (n < 8)
        return dcp_short_word(a, n) == dcp_short_word(b, n);
    while (n > 8) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    memcpy(&x, a + n - 8, 8);
    memcpy(&y, b + n - 8, 8);
    return x == y;
}

#endif
