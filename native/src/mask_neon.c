/* NEON (AArch64 ASIMD) kernels. */
#include "kernels.h"
#if GD_HAVE_NEON
#include <arm_neon.h>

void gd_and_neon(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_u32(d + i, vandq_u32(vld1q_u32(a + i), vld1q_u32(b + i)));
    for (; i < n; i++) d[i] = a[i] & b[i];
}
void gd_or_neon(uint32_t *d, const uint32_t *a, const uint32_t *b, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_u32(d + i, vorrq_u32(vld1q_u32(a + i), vld1q_u32(b + i)));
    for (; i < n; i++) d[i] = a[i] | b[i];
}

void gd_apply_neon(float *l, size_t n, const uint32_t *mask, float fill) {
    static const uint32_t bits_arr[4] = {1, 2, 4, 8};
    const uint32x4_t bits = vld1q_u32(bits_arr);
    const float32x4_t vfill = vdupq_n_f32(fill);
    size_t nw = n / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t m = mask[w];
        if (m == 0xFFFFFFFFu) continue;
        float *p = l + w * 32;
        for (int q = 0; q < 8; q++) {
            uint32x4_t keep = vtstq_u32(vdupq_n_u32(m >> (4 * q)), bits);
            vst1q_f32(p + 4 * q, vbslq_f32(keep, vld1q_f32(p + 4 * q), vfill));
        }
    }
    for (size_t i = nw * 32; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) l[i] = fill;
}

void gd_apply_strided_neon(void *base, size_t n, ptrdiff_t stride, const uint32_t *mask, float fill) {
    char *b = (char *)base;
    size_t nw = n / 32, w = 0;
    for (; w + 4 <= nw; w += 4) {
        uint32x4_t v = vld1q_u32(mask + w);
        if (vminvq_u32(v) == 0xFFFFFFFFu) continue; /* all four words fully allowed */
        for (size_t k = w; k < w + 4; k++)
            if (mask[k] != 0xFFFFFFFFu) gd_apply_strided_word(b, stride, k, mask[k], fill);
    }
    for (; w < nw; w++)
        if (mask[w] != 0xFFFFFFFFu) gd_apply_strided_word(b, stride, w, mask[w], fill);
    gd_apply_strided_tail(b, n, stride, mask, fill);
}
#endif
