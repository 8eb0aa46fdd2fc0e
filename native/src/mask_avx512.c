/* AVX-512F kernels.  Masked stores write -inf only where a token is disallowed, with no
 * load: for the strided llama_token_data view (stride 12 bytes) 16 tokens span exactly
 * three 64-byte vectors, and the logit of token e sits at float 3e+1, so three constant
 * lane patterns cover every 16-token group. */
#include "kernels.h"
#if GD_HAVE_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

/* spread the low bits of x onto the set bits of pattern (a portable pdep) */
static uint16_t spread(uint32_t x, uint16_t pattern) {
    uint16_t out = 0;
    for (int b = 0; b < 16; b++)
        if (pattern & (1u << b)) {
            if (x & 1u) out |= (uint16_t)(1u << b);
            x >>= 1;
        }
    return out;
}

static uint16_t lut0[32], lut1[64], lut2[32];
static int luts_ready = 0;

static void init_luts(void) {
    /* vector 0: tokens 0-4 at floats 1,4,7,10,13; vector 1: tokens 5-10 at 16..31 -> lanes
     * 0,3,6,9,12,15; vector 2: tokens 11-15 at 32..47 -> lanes 2,5,8,11,14 */
    for (uint32_t x = 0; x < 32; x++) { lut0[x] = spread(x, 0x2492); lut2[x] = spread(x, 0x4924); }
    for (uint32_t x = 0; x < 64; x++) lut1[x] = spread(x, 0x9249);
    __atomic_store_n(&luts_ready, 1, __ATOMIC_RELEASE);
}

AVX512 void gd_and_avx512(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512((void *)(d + i), _mm512_and_si512(_mm512_loadu_si512((const void *)(a + i)),
                                                               _mm512_loadu_si512((const void *)(b + i))));
    for (; i < n; i++) d[i] = a[i] & b[i];
}
AVX512 void gd_or_avx512(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_si512((void *)(d + i), _mm512_or_si512(_mm512_loadu_si512((const void *)(a + i)),
                                                              _mm512_loadu_si512((const void *)(b + i))));
    for (; i < n; i++) d[i] = a[i] | b[i];
}

AVX512 void gd_apply_avx512(float *l, size_t n, const uint32_t *mask, float fill) {
    const __m512 vfill = _mm512_set1_ps(fill);
    size_t nw = n / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t off = ~mask[w];
        if (!off) continue;
        _mm512_mask_storeu_ps(l + w * 32, (__mmask16)(off & 0xFFFFu), vfill);
        _mm512_mask_storeu_ps(l + w * 32 + 16, (__mmask16)(off >> 16), vfill);
    }
    for (size_t i = nw * 32; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) l[i] = fill;
}

AVX512 void gd_apply_strided_avx512(void *base, size_t n, ptrdiff_t stride, const uint32_t *mask, float fill) {
    if (stride != 12) { gd_apply_strided_scalar(base, n, stride, mask, fill); return; }
    if (!__atomic_load_n(&luts_ready, __ATOMIC_ACQUIRE)) init_luts();
    const __m512 vfill = _mm512_set1_ps(fill);
    float *f = (float *)base; /* base points at the logit field: token e at f[3e] */
    f -= 1;                   /* so that token e's logit is at f[3e + 1], groups 64-byte aligned in the pattern */
    size_t ngroups = n / 16, nw = ngroups / 2;
    size_t w = 0;
    const __m512i ones = _mm512_set1_epi32(-1);
    for (; w < nw; w++) {
        /* skip runs of fully allowed words 16 at a time */
        if ((w & 15) == 0 && w + 16 <= nw &&
            _mm512_cmpneq_epi32_mask(_mm512_loadu_si512((const void *)(mask + w)), ones) == 0) {
            w += 15;
            continue;
        }
        uint32_t off32 = ~mask[w];
        if (!off32) continue;
        for (size_t h = 0; h < 2; h++) {
            uint32_t off = (off32 >> (16 * h)) & 0xFFFFu;
            if (!off) continue;
            float *p = f + (2 * w + h) * 48;
            /* the id field f[0] of a group is never written: lane 0 is not in pattern 0x2492 */
            if (lut0[off & 31]) _mm512_mask_storeu_ps(p, lut0[off & 31], vfill);
            if (lut1[(off >> 5) & 63]) _mm512_mask_storeu_ps(p + 16, lut1[(off >> 5) & 63], vfill);
            if (lut2[off >> 11]) _mm512_mask_storeu_ps(p + 32, lut2[off >> 11], vfill);
        }
    }
    if (ngroups & 1) { /* a last half word of 16 tokens */
        uint32_t off = ~mask[nw] & 0xFFFFu;
        float *p = f + (ngroups - 1) * 48;
        if (off) {
            if (lut0[off & 31]) _mm512_mask_storeu_ps(p, lut0[off & 31], vfill);
            if (lut1[(off >> 5) & 63]) _mm512_mask_storeu_ps(p + 16, lut1[(off >> 5) & 63], vfill);
            if (lut2[off >> 11]) _mm512_mask_storeu_ps(p + 32, lut2[off >> 11], vfill);
        }
    }
    for (size_t i = ngroups * 16; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) ((float *)base)[3 * i] = fill;
}
#endif
