/* Mask kernels: scalar reference implementations and stateless run-time dispatch. */
#include "gd_native.h"
#include "kernels.h"

#include <stdlib.h>
#include <string.h>
#if GD_HAVE_X86
#include <cpuid.h>
#endif

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

/* Bit count of a 64-bit word without a popcount instruction (SWAR; the baseline x86-64 and
 * AArch64 targets this file is built for would call libgcc's table routine per word). */
static inline uint64_t popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (x * 0x0101010101010101ull) >> 56;
}

size_t gd_mask_count(const uint32_t *mask, size_t n) {
    size_t c = 0, nw = n / 32, w = 0;
    for (; w + 2 <= nw; w += 2) c += (size_t)popcount64((uint64_t)mask[w] | ((uint64_t)mask[w + 1] << 32));
    for (; w < nw; w++) c += (size_t)popcount64(mask[w]);
    if (n & 31) c += (size_t)popcount64(mask[nw] & ((1u << (n & 31)) - 1u));
    return c;
}

/* Four independent multiply-xor lanes over 64-bit pairs of words (no serial dependency
 * between consecutive words), folded at the end. */
/* gd_mask_hash, and (when count is not NULL) the set bits of the nwords words into *count in
 * the same pass. */
static inline uint64_t hash_count(const uint32_t *mask, size_t nwords, size_t *count) {
    const uint64_t K = 0x9E3779B97F4A7C15ull, M = 0xFF51AFD7ED558CCDull;
    uint64_t h[4] = {K ^ (uint64_t)nwords, K * 3u, K * 5u, K * 7u};
    size_t w = 0, c = 0;
    for (; w + 8 <= nwords; w += 8)
        for (int l = 0; l < 4; l++) {
            uint64_t x = (uint64_t)mask[w + 2 * l] | ((uint64_t)mask[w + 2 * l + 1] << 32);
            h[l] = (h[l] ^ (x * M)) * K;
            if (count) c += (size_t)popcount64(x);
        }
    for (; w < nwords; w++) {
        h[w & 3] = (h[w & 3] ^ ((uint64_t)mask[w] * M + w)) * K;
        if (count) c += (size_t)popcount64(mask[w]);
    }
    if (count) *count = c;
    uint64_t r = h[0] ^ (h[1] * M) ^ (h[2] * K) ^ (h[3] * M * K);
    r ^= r >> 31;
    r *= M;
    return r ^ (r >> 29);
}

uint64_t gd_mask_hash(const uint32_t *mask, size_t nwords) { return hash_count(mask, nwords, NULL); }

void gd_mask_from_ids(uint32_t *mask, size_t nwords, const uint32_t *ids, size_t n_ids) {
    memset(mask, 0, nwords * sizeof(uint32_t));
    for (size_t k = 0; k < n_ids; k++)
        if ((size_t)(ids[k] >> 5) < nwords) mask[ids[k] >> 5] |= 1u << (ids[k] & 31);
}

size_t gd_mask_to_ids(const uint32_t *mask, size_t n, int64_t *ids, size_t cap) {
    size_t k = 0, nw = (n + 31) / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t x = mask[w];
        if (w == nw - 1 && (n & 31)) x &= (1u << (n & 31)) - 1u;
        while (x) {
            if (k == cap) return k;
            ids[k++] = (int64_t)(w * 32 + (size_t)__builtin_ctz(x));
            x &= x - 1;
        }
    }
    return k;
}

/* One pass for the hash and the count; then, when the ids fit, one scan that collects them
 * (zero words skipped 64 bits at a time). */
size_t gd_mask_digest(const uint32_t *mask, size_t n, uint64_t *hash, uint32_t *ids, size_t cap) {
    size_t nwords = (n + 31) / 32, full = n / 32, count = 0, w = 0, total;
    *hash = hash_count(mask, nwords, &total); /* one pass: the hash and the bits of whole words */
    if (n & 31) total -= (size_t)popcount64(mask[full] & ~((1u << (n & 31)) - 1u)); /* past n */
    if (total > cap) return total;
    while (w < nwords) {
        if (w + 2 <= full && (mask[w] | mask[w + 1]) == 0) {
            w += 2;
            continue;
        }
        uint32_t x = mask[w];
        if (w >= full) x &= (1u << (n & 31)) - 1u; /* the last, partial word */
        for (; x; x &= x - 1) ids[count++] = (uint32_t)(w * 32 + (size_t)__builtin_ctz(x));
        w++;
    }
    return count;
}

int gd_mask_equal(const uint32_t *a, const uint32_t *b, size_t nwords) {
    return memcmp(a, b, nwords * sizeof(uint32_t)) == 0;
}

/* ---------------------------------------------------------------- dispatch
 * Stateless: the caller holds the chosen table (the Python binding keeps it in its module
 * state) and passes it to every call.  CPU support is read from CPUID on each query, which
 * is cheap and called once per selection, never per kernel call. */
static const gd_kernels K_SCALAR = {GD_IMPL_SCALAR, gd_and_scalar, gd_or_scalar, gd_apply_scalar,
                                    gd_apply_strided_scalar};
#if GD_HAVE_X86
static const gd_kernels K_SSE2 = {GD_IMPL_SSE2, gd_and_sse2, gd_or_sse2, gd_apply_sse2, gd_apply_strided_sse2};
static const gd_kernels K_AVX2 = {GD_IMPL_AVX2, gd_and_avx2, gd_or_avx2, gd_apply_avx2, gd_apply_strided_avx2};
static const gd_kernels K_AVX512 = {GD_IMPL_AVX512, gd_and_avx512, gd_or_avx512, gd_apply_avx512,
                                    gd_apply_strided_avx512};
#endif
#if GD_HAVE_NEON
static const gd_kernels K_NEON = {GD_IMPL_NEON, gd_and_neon, gd_or_neon, gd_apply_neon, gd_apply_strided_neon};
#endif

#if GD_HAVE_X86
/* XCR0: which register states the OS saves on context switch. */
static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* CPU and OS support, straight from CPUID (no libgcc __cpu_model cache). */
static int x86_supported(int impl) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (impl == GD_IMPL_SSE2) return (d >> 26) & 1u;
    int osxsave = (c >> 27) & 1u, avx = (c >> 28) & 1u;
    if (!osxsave || !avx) return 0;
    uint64_t xcr0 = xgetbv0();
    if ((xcr0 & 0x6u) != 0x6u) return 0; /* XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if (impl == GD_IMPL_AVX2) return (b >> 5) & 1u;
    if (impl == GD_IMPL_AVX512) return ((b >> 16) & 1u) && (xcr0 & 0xE6u) == 0xE6u; /* + opmask, ZMM */
    return 0;
}
#endif

int gd_impl_supported(int impl) {
    switch (impl) {
    case GD_IMPL_SCALAR: return 1;
#if GD_HAVE_X86
    case GD_IMPL_SSE2:
    case GD_IMPL_AVX2:
    case GD_IMPL_AVX512: return x86_supported(impl);
#endif
#if GD_HAVE_NEON
    case GD_IMPL_NEON: return 1; /* NEON (ASIMD) is mandatory on AArch64 */
#endif
    default: return 0;
    }
}

const gd_kernels *gd_kernels_for(int impl) {
    if (!gd_impl_supported(impl)) return NULL;
    switch (impl) {
#if GD_HAVE_X86
    case GD_IMPL_SSE2: return &K_SSE2;
    case GD_IMPL_AVX2: return &K_AVX2;
    case GD_IMPL_AVX512: return &K_AVX512;
#endif
#if GD_HAVE_NEON
    case GD_IMPL_NEON: return &K_NEON;
#endif
    case GD_IMPL_SCALAR: return &K_SCALAR;
    default: return NULL;
    }
}

int gd_kernels_impl(const gd_kernels *k) { return k->impl; }

int gd_best_impl(void) {
    const char *force = getenv("GD_NATIVE_IMPL"); /* read only; for tests */
    if (force) {
        int i = gd_impl_from_name(force);
        if (i >= 0 && gd_impl_supported(i)) return i;
    }
    static const int preference[] = {GD_IMPL_NEON, GD_IMPL_AVX512, GD_IMPL_AVX2, GD_IMPL_SSE2};
    for (size_t i = 0; i < sizeof preference / sizeof preference[0]; i++)
        if (gd_impl_supported(preference[i])) return preference[i];
    return GD_IMPL_SCALAR;
}

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

int gd_impl_from_name(const char *name) {
    for (int i = 0; i < GD_IMPL_COUNT; i++)
        if (strcmp(name, gd_impl_name(i)) == 0) return i;
    return -1;
}

void gd_mask_and(const gd_kernels *k, uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n) {
    k->and_(dst, a, b, n);
}
void gd_mask_or(const gd_kernels *k, uint32_t *dst, const uint32_t *a, const uint32_t *b, size_t n) {
    k->or_(dst, a, b, n);
}
void gd_apply_mask_f32(const gd_kernels *k, float *l, size_t n, const uint32_t *m, float fill) {
    k->apply(l, n, m, fill);
}
void gd_apply_mask_strided_f32(const gd_kernels *k, void *base, size_t n, ptrdiff_t stride, const uint32_t *m,
                               float fill) {
    if (stride == (ptrdiff_t)sizeof(float)) k->apply((float *)base, n, m, fill);
    else k->apply_strided(base, n, stride, m, fill);
}
