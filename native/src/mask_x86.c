/* SSE2 and AVX2 kernels, compiled with per-function target attributes so that the
 * library itself needs no -mavx2 and runs on any x86-64 (dispatch picks at run time). */
#include "kernels.h"
#if GD_HAVE_X86
#include <immintrin.h>

#define SSE2 __attribute__((target("sse2")))
#define AVX2 __attribute__((target("avx2")))

SSE2 void gd_and_sse2(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm_storeu_si128((__m128i *)(d + i), _mm_and_si128(_mm_loadu_si128((const __m128i *)(a + i)),
                                                           _mm_loadu_si128((const __m128i *)(b + i))));
    for (; i < n; i++) d[i] = a[i] & b[i];
}
SSE2 void gd_or_sse2(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        _mm_storeu_si128((__m128i *)(d + i), _mm_or_si128(_mm_loadu_si128((const __m128i *)(a + i)),
                                                          _mm_loadu_si128((const __m128i *)(b + i))));
    for (; i < n; i++) d[i] = a[i] | b[i];
}

/* 4 floats per step: lane j is allowed iff bit j of `nib` is set. */
SSE2 void gd_apply_sse2(float *l, size_t n, const uint32_t *mask, float fill) {
    const __m128i bits = _mm_set_epi32(8, 4, 2, 1);
    const __m128 vfill = _mm_set1_ps(fill);
    size_t nw = n / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t m = mask[w];
        if (m == 0xFFFFFFFFu) continue;
        float *p = l + w * 32;
        for (int q = 0; q < 8; q++) {
            __m128i sel = _mm_and_si128(_mm_set1_epi32((int)(m >> (4 * q))), bits);
            __m128 keep = _mm_castsi128_ps(_mm_cmpeq_epi32(sel, bits));
            __m128 v = _mm_loadu_ps(p + 4 * q);
            _mm_storeu_ps(p + 4 * q, _mm_or_ps(_mm_and_ps(keep, v), _mm_andnot_ps(keep, vfill)));
        }
    }
    for (size_t i = nw * 32; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) l[i] = fill;
}

/* Strided: SIMD scan finds words that are not all-ones (4 at a time); scalar stores. */
SSE2 void gd_apply_strided_sse2(void *base, size_t n, ptrdiff_t stride, const uint32_t *mask, float fill) {
    char *b = (char *)base;
    size_t nw = n / 32, w = 0;
    const __m128i ones = _mm_set1_epi32(-1);
    for (; w + 4 <= nw; w += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(mask + w));
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(v, ones)) == 0xFFFF) continue;
        for (size_t k = w; k < w + 4; k++)
            if (mask[k] != 0xFFFFFFFFu) gd_apply_strided_word(b, stride, k, mask[k], fill);
    }
    for (; w < nw; w++)
        if (mask[w] != 0xFFFFFFFFu) gd_apply_strided_word(b, stride, w, mask[w], fill);
    gd_apply_strided_tail(b, n, stride, mask, fill);
}

AVX2 void gd_and_avx2(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(a + i)),
                                                                 _mm256_loadu_si256((const __m256i *)(b + i))));
    for (; i < n; i++) d[i] = a[i] & b[i];
}
AVX2 void gd_or_avx2(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_or_si256(_mm256_loadu_si256((const __m256i *)(a + i)),
                                                                _mm256_loadu_si256((const __m256i *)(b + i))));
    for (; i < n; i++) d[i] = a[i] | b[i];
}

/* 8 floats per step: lane j keeps its value iff bit j of the byte is set. */
AVX2 void gd_apply_avx2(float *l, size_t n, const uint32_t *mask, float fill) {
    const __m256i bits = _mm256_set_epi32(128, 64, 32, 16, 8, 4, 2, 1);
    const __m256 vfill = _mm256_set1_ps(fill);
    size_t nw = n / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t m = mask[w];
        if (m == 0xFFFFFFFFu) continue;
        float *p = l + w * 32;
        if (m == 0) {
            for (int q = 0; q < 4; q++) _mm256_storeu_ps(p + 8 * q, vfill);
            continue;
        }
        for (int q = 0; q < 4; q++) {
            __m256i sel = _mm256_and_si256(_mm256_set1_epi32((int)(m >> (8 * q))), bits);
            __m256 keep = _mm256_castsi256_ps(_mm256_cmpeq_epi32(sel, bits));
            _mm256_storeu_ps(p + 8 * q, _mm256_blendv_ps(vfill, _mm256_loadu_ps(p + 8 * q), keep));
        }
    }
    for (size_t i = nw * 32; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) l[i] = fill;
}

AVX2 void gd_apply_strided_avx2(void *base, size_t n, ptrdiff_t stride, const uint32_t *mask, float fill) {
    char *b = (char *)base;
    size_t nw = n / 32, w = 0;
    const __m256i ones = _mm256_set1_epi32(-1);
    for (; w + 8 <= nw; w += 8) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(mask + w));
        uint32_t eq = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(v, ones)));
        uint32_t todo = ~eq & 0xFFu;
        while (todo) {
            size_t k = w + (size_t)__builtin_ctz(todo);
            gd_apply_strided_word(b, stride, k, mask[k], fill);
            todo &= todo - 1;
        }
    }
    for (; w < nw; w++)
        if (mask[w] != 0xFFFFFFFFu) gd_apply_strided_word(b, stride, w, mask[w], fill);
    gd_apply_strided_tail(b, n, stride, mask, fill);
}
#endif
