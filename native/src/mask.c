/* Mask kernels: scalar reference implementations and run-time dispatch. */
#include "gd_native.h"
#include "kernels.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- scalar reference */
void gd_and_scalar(uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = a[i] & b[i];
}
void gd_or_scalar(uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = a[i] | b[i];
}

void gd_apply_scalar(float *logits, size_t n, const uint32_t *mask, float fill) {
    size_t nw = n / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t m = mask[w];
        if (m == 0xFFFFFFFFu) continue;
        float *p = logits + w * 32;
        if (m == 0) {
            for (int j = 0; j < 32; j++) p[j] = fill;
            continue;
        }
        uint32_t off = ~m;
        while (off) {
            p[__builtin_ctz(off)] = fill;
            off &= off - 1;
        }
    }
    for (size_t i = nw * 32; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) logits[i] = fill;
}

/* Strided: one word of mask covers 32 elements; skip all-allowed words. */
void gd_apply_strided_word(char *base, ptrdiff_t stride, size_t w, uint32_t m, float fill) {
    char *p = base + (ptrdiff_t)(w * 32) * stride;
    if (m == 0) {
        for (int j = 0; j < 32; j++) memcpy(p + j * stride, &fill, sizeof fill);
        return;
    }
    uint32_t off = ~m;
    while (off) {
        memcpy(p + (ptrdiff_t)__builtin_ctz(off) * stride, &fill, sizeof fill);
        off &= off - 1;
    }
}

void gd_apply_strided_tail(char *base, size_t n, ptrdiff_t stride, const uint32_t *mask,
                           float fill) {
    for (size_t i = (n / 32) * 32; i < n; i++)
        if (!((mask[i >> 5] >> (i & 31)) & 1u)) memcpy(base + (ptrdiff_t)i * stride, &fill, sizeof fill);
}

void gd_apply_strided_scalar(void *base, size_t n, ptrdiff_t stride, const uint32_t *mask,
                             float fill) {
    char *b = (char *)base;
    size_t nw = n / 32;
    for (size_t w = 0; w < nw; w++)
        if (mask[w] != 0xFFFFFFFFu) gd_apply_strided_word(b, stride, w, mask[w], fill);
    gd_apply_strided_tail(b, n, stride, mask, fill);
}

size_t gd_mask_count(const uint32_t *mask, size_t n) {
    size_t c = 0, nw = n / 32;
    for (size_t w = 0; w < nw; w++) c += (size_t)__builtin_popcount(mask[w]);
    if (n & 31) c += (size_t)__builtin_popcount(mask[nw] & ((1u << (n & 31)) - 1u));
    return c;
}

/* ---------------------------------------------------------------- dispatch */
typedef struct {
    void (*and_)(uint32_t *, const uint32_t *, const uint32_t *, size_t);
    void (*or_)(uint32_t *, const uint32_t *, const uint32_t *, size_t);
    void (*apply)(float *, size_t, const uint32_t *, float);
    void (*apply_strided)(void *, size_t, ptrdiff_t, const uint32_t *, float);
} gd_vtable;

static const gd_vtable VT_SCALAR = {gd_and_scalar, gd_or_scalar, gd_apply_scalar, gd_apply_strided_scalar};
#if GD_HAVE_X86
static const gd_vtable VT_SSE2 = {gd_and_sse2, gd_or_sse2, gd_apply_sse2, gd_apply_strided_sse2};
static const gd_vtable VT_AVX2 = {gd_and_avx2, gd_or_avx2, gd_apply_avx2, gd_apply_strided_avx2};
static const gd_vtable VT_AVX512 = {gd_and_avx512, gd_or_avx512, gd_apply_avx512, gd_apply_strided_avx512};
#endif
#if GD_HAVE_NEON
static const gd_vtable VT_NEON = {gd_and_neon, gd_or_neon, gd_apply_neon, gd_apply_strided_neon};
#endif

static const gd_vtable *g_vt = NULL;
static int g_impl = -1;

int gd_impl_supported(int impl) {
    switch (impl) {
    case GD_IMPL_SCALAR: return 1;
#if GD_HAVE_X86
    case GD_IMPL_SSE2: __builtin_cpu_init(); return __builtin_cpu_supports("sse2") != 0;
    case GD_IMPL_AVX2: __builtin_cpu_init(); return __builtin_cpu_supports("avx2") != 0;
    case GD_IMPL_AVX512: __builtin_cpu_init(); return __builtin_cpu_supports("avx512f") != 0;
#endif
#if GD_HAVE_NEON
    case GD_IMPL_NEON: return 1; /* NEON (ASIMD) is mandatory on AArch64 */
#endif
    default: return 0;
    }
}

int gd_impl_set(int impl) {
    if (!gd_impl_supported(impl)) return 0;
    switch (impl) {
#if GD_HAVE_X86
    case GD_IMPL_SSE2: g_vt = &VT_SSE2; break;
    case GD_IMPL_AVX2: g_vt = &VT_AVX2; break;
    case GD_IMPL_AVX512: g_vt = &VT_AVX512; break;
#endif
#if GD_HAVE_NEON
    case GD_IMPL_NEON: g_vt = &VT_NEON; break;
#endif
    default: g_vt = &VT_SCALAR; impl = GD_IMPL_SCALAR; break;
    }
    g_impl = impl;
    return 1;
}

static void gd_init(void) {
    if (g_vt) return;
    const char *force = getenv("GD_NATIVE_IMPL"); /* scalar|sse2|avx2|neon, for tests */
    if (force) {
        for (int i = 0; i < GD_IMPL_COUNT; i++)
            if (strcmp(force, gd_impl_name(i)) == 0 && gd_impl_set(i)) return;
    }
    if (gd_impl_set(GD_IMPL_NEON) || gd_impl_set(GD_IMPL_AVX512) || gd_impl_set(GD_IMPL_AVX2) ||
        gd_impl_set(GD_IMPL_SSE2))
        return;
    gd_impl_set(GD_IMPL_SCALAR);
}

int gd_impl_active(void) { gd_init(); return g_impl; }

const char *gd_impl_name(int impl) {
    switch (impl) {
    case GD_IMPL_SCALAR: return "scalar";
    case GD_IMPL_SSE2: return "sse2";
    case GD_IMPL_AVX2: return "avx2";
    case GD_IMPL_NEON: return "neon";
    case GD_IMPL_AVX512: return "avx512";
    default: return "unknown";
    }
}

void gd_mask_and(uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n) { gd_init(); g_vt->and_(dst, a, b, n); }
void gd_mask_or(uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n) { gd_init(); g_vt->or_(dst, a, b, n); }
void gd_apply_mask_f32(float *l, size_t n, const uint32_t *m, float fill) { gd_init(); g_vt->apply(l, n, m, fill); }
void gd_apply_mask_strided_f32(void *base, size_t n, ptrdiff_t stride, const uint32_t *m, float fill) {
    gd_init();
    if (stride == (ptrdiff_t)sizeof(float)) g_vt->apply((float *)base, n, m, fill);
    else g_vt->apply_strided(base, n, stride, m, fill);
}
