/* AVX-512F kernels.  Masked stores write -inf only where a token is disallowed, with no
 * load: for the strided llama_token_data view (stride 12 bytes) 16 tokens span exactly
 * three 64-byte vectors, and the logit of token e sits at float 3e+1, so three constant
 * lane patterns cover every 16-token group. */
#include "kernels.h"
#if GD_HAVE_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))

/* Store-mask look-up tables, constant data computed at compile time.  A 16-token group's
 * disallowed bits `off` split into tokens 0-4 (vector 0: floats 1,4,7,10,13, pattern 0x2492),
 * tokens 5-10 (vector 1: lanes 0,3,6,9,12,15, pattern 0x9249) and tokens 11-15 (vector 2:
 * lanes 2,5,8,11,14, pattern 0x4924).  Each table spreads the low bits of its index onto
 * every third lane from `base`: bit j of x goes to lane base + 3j (a constant pdep). */
#define SPREAD3(x, base)                                                                           \
    ((uint16_t)((((x) >> 0 & 1u) << (base)) | (((x) >> 1 & 1u) << ((base) + 3)) |                 \
                (((x) >> 2 & 1u) << ((base) + 6)) | (((x) >> 3 & 1u) << ((base) + 9)) |           \
                (((x) >> 4 & 1u) << ((base) + 12)) | (((x) >> 5 & 1u) << ((base) + 15))))
#define LUT0(x) SPREAD3((unsigned)(x), 1)
#define LUT1(x) SPREAD3((unsigned)(x), 0)
#define LUT2(x) SPREAD3((unsigned)(x), 2)
#define REP4(f, b) f(b), f((b) + 1), f((b) + 2), f((b) + 3)
#define REP16(f, b) REP4(f, b), REP4(f, (b) + 4), REP4(f, (b) + 8), REP4(f, (b) + 12)
#define REP32(f, b) REP16(f, b), REP16(f, (b) + 16)
#define REP64(f, b) REP32(f, b), REP32(f, (b) + 32)

_Static_assert(LUT0(31) == 0x2492 && LUT1(63) == 0x9249 && LUT2(31) == 0x4924, "lane patterns");
_Static_assert((LUT0(31) | LUT1(63) | LUT2(31)) == 0xFFFF && (LUT0(31) & LUT1(63)) == 0 &&
               (LUT1(63) & LUT2(31)) == 0 && (LUT0(31) & LUT2(31)) == 0, "patterns partition the lanes");

static const uint16_t lut0[32] = {REP32(LUT0, 0)};
static const uint16_t lut1[64] = {REP64(LUT1, 0)};
static const uint16_t lut2[32] = {REP32(LUT2, 0)};

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
