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

/* The interning hash, over groups of eight words (32 bytes; the last group padded with zero
 * words): the four 64-bit chunks of every group that is not all zero are mixed with the group's
 * index into four independent multiply-xor lanes; all-zero groups are skipped, their place is in
 * the indices of the others.  A sparse mask costs one scan for zeros plus its few nonzero groups.
 * gd_mask_hash and gd_mask_digest compute the same function of the words. */
#define HASH_K 0x9E3779B97F4A7C15ull
#define HASH_M 0xFF51AFD7ED558CCDull

static inline uint64_t load64(const uint32_t *p) {
    uint64_t x;
    memcpy(&x, p, sizeof x);
    return x; /* (little-endian: word 2j is the low half; both targets are little-endian) */
}

/* group g's chunks (x[0..3]); nonzero when any is */
static inline uint64_t group_at(const uint32_t *mask, size_t g, size_t nwords, uint64_t *x) {
    size_t w = 8 * g;
    if (w + 8 <= nwords) {
        for (int l = 0; l < 4; l++) x[l] = load64(mask + w + 2 * l);
    } else {
        uint32_t pad[8] = {0};
        memcpy(pad, mask + w, (nwords - w) * sizeof(uint32_t));
        for (int l = 0; l < 4; l++) x[l] = load64(pad + 2 * l);
    }
    return x[0] | x[1] | x[2] | x[3];
}

static inline void hash_group(uint64_t *h, size_t g, const uint64_t *x) {
    for (int l = 0; l < 4; l++) h[l] = (h[l] ^ (x[l] * HASH_M) ^ (uint64_t)g) * HASH_K;
}

static inline void hash_init(uint64_t *h, size_t nwords) {
    h[0] = HASH_K ^ (uint64_t)nwords;
    h[1] = HASH_K * 3u;
    h[2] = HASH_K * 5u;
    h[3] = HASH_K * 7u;
}

static inline uint64_t hash_fold(const uint64_t *h) {
    uint64_t r = h[0] ^ (h[1] * HASH_M) ^ (h[2] * HASH_K) ^ (h[3] * HASH_M * HASH_K);
    r ^= r >> 31;
    r *= HASH_M;
    return r ^ (r >> 29);
}

/* the first group from g on that is not all zero (whole groups only: below nwords / 8) */
static inline size_t next_group(const uint32_t *mask, size_t g, size_t full) {
    for (; g < full; g++) {
        const uint32_t *p = mask + 8 * g;
        if (load64(p) | load64(p + 2) | load64(p + 4) | load64(p + 6)) break;
    }
    return g;
}

uint64_t gd_mask_hash(const uint32_t *mask, size_t nwords) {
    uint64_t h[4], x[4];
    size_t full = nwords / 8;
    hash_init(h, nwords);
    for (size_t g = next_group(mask, 0, full); 8 * g < nwords; g = next_group(mask, g + 1, full))
        if (group_at(mask, g, nwords, x)) hash_group(h, g, x);
    return hash_fold(h);
}

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

size_t gd_mask_mark_next(const uint32_t *mask, size_t n, const int32_t *next_state, uint8_t *mark,
                         size_t n_states) {
    size_t k = 0, nw = (n + 31) / 32;
    for (size_t w = 0; w < nw; w++) {
        uint32_t x = mask[w];
        if (w == nw - 1 && (n & 31)) x &= (1u << (n & 31)) - 1u;
        while (x) {
            int32_t s = next_state[w * 32 + (size_t)__builtin_ctz(x)];
            if (s >= 0 && (size_t)s < n_states) mark[s] = 1;
            k++;
            x &= x - 1;
        }
    }
    return k;
}

/* One pass: the hash (gd_mask_hash), the count, and the ids while the count fits in cap.  Only
 * groups that are not all zero do any work, so a sparse mask costs one scan for zeros; once the
 * count is past cap, the rest is hashed and counted without collecting. */
#define GROUP_LOAD(p, x0, x1, x2, x3) \
    do { x0 = load64(p); x1 = load64((p) + 2); x2 = load64((p) + 4); x3 = load64((p) + 6); } while (0)
#define GROUP_HASH(h, g, x0, x1, x2, x3)                       \
    do {                                                       \
        h[0] = (h[0] ^ ((x0) * HASH_M) ^ (uint64_t)(g)) * HASH_K; \
        h[1] = (h[1] ^ ((x1) * HASH_M) ^ (uint64_t)(g)) * HASH_K; \
        h[2] = (h[2] ^ ((x2) * HASH_M) ^ (uint64_t)(g)) * HASH_K; \
        h[3] = (h[3] ^ ((x3) * HASH_M) ^ (uint64_t)(g)) * HASH_K; \
    } while (0)

static inline size_t collect(uint64_t x, size_t bit0, uint32_t *ids, size_t c) {
    for (; x; x &= x - 1) ids[c++] = (uint32_t)(bit0 + (size_t)__builtin_ctzll(x));
    return c;
}

size_t gd_mask_digest(const uint32_t *mask, size_t n, uint64_t *hash, uint32_t *ids, size_t cap) {
    size_t nwords = (n + 31) / 32, below = n / 256, count = 0, g = 0; /* below: groups wholly below n */
    uint64_t h[4], x0, x1, x2, x3;
    hash_init(h, nwords);
    for (g = next_group(mask, 0, below); g < below; g = next_group(mask, g + 1, below)) {
        GROUP_LOAD(mask + 8 * g, x0, x1, x2, x3);
        GROUP_HASH(h, g, x0, x1, x2, x3);
        size_t c = count;
        count += (size_t)(popcount64(x0) + popcount64(x1) + popcount64(x2) + popcount64(x3));
        if (count > cap) {
            g++;
            break;
        }
        size_t b = 256 * g;
        c = collect(x0, b, ids, c);
        c = collect(x1, b + 64, ids, c);
        c = collect(x2, b + 128, ids, c);
        collect(x3, b + 192, ids, c);
    }
    for (; g < below; g++) { /* past cap: hash and count only */
        GROUP_LOAD(mask + 8 * g, x0, x1, x2, x3);
        if (!(x0 | x1 | x2 | x3)) continue;
        GROUP_HASH(h, g, x0, x1, x2, x3);
        count += (size_t)(popcount64(x0) + popcount64(x1) + popcount64(x2) + popcount64(x3));
    }
    if (8 * below < nwords) { /* the last group: padded with zero words; the bits from n on do not count */
        uint64_t x[4];
        if (group_at(mask, below, nwords, x)) {
            GROUP_HASH(h, below, x[0], x[1], x[2], x[3]);
            size_t c = count;
            for (int l = 0; l < 4; l++) {
                size_t lo = 256 * below + 64 * (size_t)l;
                x[l] &= n >= lo + 64 ? ~0ull : n > lo ? (1ull << (n - lo)) - 1u : 0;
                count += (size_t)popcount64(x[l]);
            }
            if (count <= cap)
                for (int l = 0; l < 4; l++) c = collect(x[l], 256 * below + 64 * (size_t)l, ids, c);
        }
    }
    *hash = hash_fold(h);
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
