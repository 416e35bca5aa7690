/* The kernels of cscan's validity_bitmaps (scan_bitmaps.pxi): 64 rows of frame kinds to a
   64-bit word of each group's bitmap, with SSE2 where the compiler targets it and with
   AVX-512 BITALG where the compiler can emit it and the processor has it. */
#ifndef DCPFAST_BITMAPS_H
#define DCPFAST_BITMAPS_H

#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#  define DCP_SSE2 1
#  include <emmintrin.h>
#else
#  define DCP_SSE2 0
#endif
#if defined(__x86_64__) && !defined(_MSC_VER) && \
    ((defined(__clang__) && __clang_major__ >= 8) || \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 8))
#  define DCP_BITALG 1
#  include <immintrin.h>
#else
#  define DCP_BITALG 0
#endif

/* The 64 kinds from at, or the last used < 64 of them padded with pad. */
static const uint8_t *dcp_word(const uint8_t *at, size_t used, uint8_t pad, uint8_t *last)
{
    if (used == 64)
        return at;
    memset(last, pad, 64);
    memcpy(last, at, used);
    return last;
}

/* Bit (i % 64) of word i / 64, little-endian byte order on any machine, bits past the
   rows cleared. */
static void dcp_put_word(uint8_t *to, uint64_t bits, size_t used)
{
    int r;
    if (used < 64)
        bits &= ((uint64_t)1 << used) - 1;
    for (r = 0; r < 8; r++)
        to[r] = (uint8_t)(bits >> (8 * r));
}

/* The bitmaps of groups of kinds, 64 rows a word (rows of stride bytes, a multiple of
   8): row rows[g] of out gets the OR of the rows of the kinds present[members[x]] for x
   in first[g] .. first[g + 1]. A 64-bit mask per present kind, with SSE2 from sixteen
   compares at once. */
static void dcp_group_bits(const uint8_t *kinds, size_t n, int n_present,
                           const uint8_t *present, const uint8_t *slot, int n_groups,
                           const int *rows, const int *first, const uint8_t *members,
                           uint8_t *out, size_t stride)
{
    uint64_t mask[256];
    uint8_t last[64];
    size_t i, used;
    int g, j, x, r;
#if DCP_SSE2
    __m128i want[256];
    for (j = 0; j < n_present; j++)
        want[j] = _mm_set1_epi8((char)present[j]);
#else
    uint64_t odd[256];
#endif
    for (i = 0; i < n; i += 64) {
        used = n - i < 64 ? n - i : 64;
        const uint8_t *at = dcp_word(kinds + i, used, present[0], last);
        for (j = 0; j < n_present; j++)
            mask[j] = 0;
#if DCP_SSE2
        for (r = 0; r < 4; r++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(at + 16 * r));
            for (j = 0; j < n_present; j++)
                mask[j] |= (uint64_t)(uint32_t)_mm_movemask_epi8(
                    _mm_cmpeq_epi8(v, want[j])) << (16 * r);
        }
#else
        for (j = 0; j < n_present; j++)
            odd[j] = 0;
        for (r = 0; r < 64; r += 2) {     /* two sets: a run of one kind is two chains */
            mask[slot[at[r]]] |= (uint64_t)1 << r;
            odd[slot[at[r + 1]]] |= (uint64_t)2 << r;
        }
        for (j = 0; j < n_present; j++)
            mask[j] |= odd[j];
#endif
        for (g = 0; g < n_groups; g++) {
            uint64_t bits = 0;
            for (x = first[g]; x < first[g + 1]; x++)
                bits |= mask[members[x]];
            dcp_put_word(out + (size_t)rows[g] * stride + i / 8, bits, used);
        }
    }
}

/* The same where the processor has AVX-512 BITALG (asked at run time) and every kind is
   below 64: each group's 64 rows in one instruction, which picks the bit of each row's
   kind out of the group's set of kinds (bit k of sets[g]: kind k is in group g). */
#if DCP_BITALG
__attribute__((target("avx512f,avx512bw,avx512bitalg")))
static void dcp_group_bits_bitalg(const uint8_t *kinds, size_t n, int n_groups,
                                  const int *rows, const uint64_t *sets,
                                  uint8_t *out, size_t stride)
{
    uint8_t last[64];
    size_t i, used;
    int g;
    for (i = 0; i < n; i += 64) {
        used = n - i < 64 ? n - i : 64;
        __m512i v = _mm512_loadu_si512((const void *)dcp_word(kinds + i, used, 0, last));
        for (g = 0; g < n_groups; g++)
            dcp_put_word(out + (size_t)rows[g] * stride + i / 8,
                         (uint64_t)_mm512_bitshuffle_epi64_mask(
                             _mm512_set1_epi64((long long)sets[g]), v), used);
    }
}
static int dcp_has_bitalg(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bitalg") && __builtin_cpu_supports("avx512bw");
}
#else
static void dcp_group_bits_bitalg(const uint8_t *kinds, size_t n, int n_groups,
                                  const int *rows, const uint64_t *sets,
                                  uint8_t *out, size_t stride)
{
}
static int dcp_has_bitalg(void)
{
    return 0;
}
#endif

#endif
