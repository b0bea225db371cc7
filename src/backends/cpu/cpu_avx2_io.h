/* 8-value loads by dtype and a horizontal sum, shared by the kernel files
 * compiled for AVX2 + F16C or wider. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_AVX2_IO_H
#define MOEINT4_BACKENDS_CPU_CPU_AVX2_IO_H

#include <immintrin.h>
#include <stdint.h>

#include "moeint4.h"

/* Values k .. k + 7 of src (of dtype) as f32, exactly. */
static inline __attribute__((always_inline)) __m256 mi4_avx2_load8(moeint4_dtype dtype,
                                                                   const void *src, int k)
{
    switch (dtype) {
    case MOEINT4_DTYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + k)));
    case MOEINT4_DTYPE_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)src + k))),
            16));
    default: return _mm256_loadu_ps((const float *)src + k);
    }
}

static inline __attribute__((always_inline)) float mi4_avx2_sum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#endif
