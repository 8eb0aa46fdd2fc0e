/* Internal: per-ISA kernel entry points and the kernel table (see mask.c for the dispatch). */
#ifndef GD_KERNELS_H
#define GD_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#include "gd_native.h"

/* One implementation's entry points.  Only static const instances exist (mask.c). */
struct gd_kernels {
    int impl;
    void (*and_)(uint32_t *, const uint32_t *, const uint32_t *, size_t);
    void (*or_)(uint32_t *, const uint32_t *, const uint32_t *, size_t);
    void (*apply)(float *, size_t, const uint32_t *, float);
    void (*apply_strided)(void *, size_t, ptrdiff_t, const uint32_t *, float);
};

#if defined(__x86_64__) || defined(__i386__)
#define GD_HAVE_X86 1
#else
#define GD_HAVE_X86 0
#endif
#if defined(__aarch64__)
#define GD_HAVE_NEON 1
#else
#define GD_HAVE_NEON 0
#endif

void gd_and_scalar(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_or_scalar(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_apply_scalar(float *, size_t, const uint32_t *, float);
void gd_apply_strided_scalar(void *, size_t, ptrdiff_t, const uint32_t *, float);
/* helpers shared by the SIMD strided paths */
void gd_apply_strided_word(char *base, ptrdiff_t stride, size_t w, uint32_t m, float fill);
void gd_apply_strided_tail(char *base, size_t n, ptrdiff_t stride, const uint32_t *mask, float fill);

#if GD_HAVE_X86
void gd_and_sse2(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_or_sse2(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_apply_sse2(float *, size_t, const uint32_t *, float);
void gd_apply_strided_sse2(void *, size_t, ptrdiff_t, const uint32_t *, float);
void gd_and_avx2(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_or_avx2(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_apply_avx2(float *, size_t, const uint32_t *, float);
void gd_apply_strided_avx2(void *, size_t, ptrdiff_t, const uint32_t *, float);
void gd_and_avx512(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_or_avx512(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_apply_avx512(float *, size_t, const uint32_t *, float);
void gd_apply_strided_avx512(void *, size_t, ptrdiff_t, const uint32_t *, float);
#endif
#if GD_HAVE_NEON
void gd_and_neon(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_or_neon(uint32_t *, const uint32_t *, const uint32_t *, size_t);
void gd_apply_neon(float *, size_t, const uint32_t *, float);
void gd_apply_strided_neon(void *, size_t, ptrdiff_t, const uint32_t *, float);
#endif
#endif
