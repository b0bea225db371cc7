/* What the AVX-512 kernel tables (avx512, avx512bf16, amx) share: a 16-lane
 * register holds rows 0-7 of tile a in its low half and rows 0-7 of tile b
 * in its high half; per group the accumulated dot products are scaled and
 * the zero point is taken off through the input's group sums; at the end
 * each half goes to its job's y. Include only from files compiled for
 * AVX-512 (F/BW/DQ/VL, F16C). */
#ifndef MOEINT4_BACKENDS_CPU_CPU_AVX512_TILE_H
#define MOEINT4_BACKENDS_CPU_CPU_AVX512_TILE_H

#include <immintrin.h>

#include "backends/cpu/cpu_kernels.h"

#define MI4_AVX512_INLINE inline __attribute__((always_inline))
/* Tokens per register block (both tables). */
#define MI4_AVX512_BLOCK_TOKENS 8

/* The register block's inputs: row and group-sum pointers of tokens
 * [t_first, t_first + tokens), and its y (in memory between groups: the
 * registers hold accumulators) cleared. */
static MI4_AVX512_INLINE void mi4_avx512_block_start(const mi4_cpu_tile_job *a, int t_first,
                                                     int tokens, const float **rows,
                                                     const float **sums, float (*y)[16])
{
    for (int t = 0; t < tokens; t++) {
        rows[t] = a->x[t_first + t];
        sums[t] = a->xsum[t_first + t];
        _mm512_store_ps(y[t], _mm512_setzero_ps());
    }
}

/* Clears accumulator sets [0, sets) of tokens [0, tokens). */
static MI4_AVX512_INLINE void mi4_avx512_clear(__m512 (*acc)[MI4_AVX512_BLOCK_TOKENS], int sets,
                                               int tokens)
{
    for (int s = 0; s < sets; s++)
        for (int t = 0; t < tokens; t++)
            acc[s][t] = _mm512_setzero_ps();
}

/* Group g's scales of the two tiles' rows (tile a's in the low half) and
 * (zero - zero_bias) * scale: the factors of the group's end. */
static MI4_AVX512_INLINE void mi4_avx512_group_factors(const mi4_cpu_tile_job *a,
                                                       const mi4_cpu_tile_job *b, int g,
                                                       float zero_bias, __m512 *scale,
                                                       __m512 *zero_scale)
{
    const mi4_cpu_pack_geometry *geo = a->geo;
    const size_t scale_at = geo->scales_offset + (size_t)g * MI4_CPU_TILE_ROWS * 2;
    const size_t zero_at = geo->zeros_offset + (size_t)g * MI4_CPU_TILE_ROWS;
    __m256i scale_bits = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(a->tile + scale_at))),
        _mm_loadu_si128((const __m128i *)(b->tile + scale_at)), 1);
    *scale = a->scales_bf16
                 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(scale_bits), 16))
                 : _mm512_cvtph_ps(scale_bits);
    __m128i zero_bytes = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)(a->tile + zero_at)),
                                            _mm_loadl_epi64((const __m128i *)(b->tile + zero_at)));
    __m512 zero = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(zero_bytes));
    *zero_scale = _mm512_mul_ps(_mm512_sub_ps(zero, _mm512_set1_ps(zero_bias)), *scale);
}

/* y + scale * dot - zero_scale * (the token's sum of group g's inputs) */
static MI4_AVX512_INLINE __m512 mi4_avx512_group_add(__m512 y, __m512 dot, __m512 scale,
                                                     __m512 zero_scale, float group_sum)
{
    __m512 sum = _mm512_fmadd_ps(dot, scale, y);
    return _mm512_fnmadd_ps(zero_scale, _mm512_set1_ps(group_sum), sum);
}

/* y[t] += scale * dot[t] - (zero - zero_bias) * scale * xsum[t][g] for the
 * two tiles' rows of group g, dot[t] the sum of acc[0..sets)[t]. */
static MI4_AVX512_INLINE void
mi4_avx512_group_end(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b, int g, float zero_bias,
                     __m512 (*acc)[MI4_AVX512_BLOCK_TOKENS], int sets, const float *const *sums,
                     int tokens, float (*y)[16])
{
    __m512 scale, zero_scale;
    mi4_avx512_group_factors(a, b, g, zero_bias, &scale, &zero_scale);
    for (int t = 0; t < tokens; t++) {
        __m512 dot = acc[0][t];
        for (int s = 1; s < sets; s++)
            dot = _mm512_add_ps(dot, acc[s][t]);
        _mm512_store_ps(
            y[t], mi4_avx512_group_add(_mm512_load_ps(y[t]), dot, scale, zero_scale, sums[t][g]));
    }
}

/* y rows of tokens [t_first, t_first + tokens) into a->y (low half) and
 * b->y (high half; not when b is a). */
static MI4_AVX512_INLINE void mi4_avx512_store_pair(const mi4_cpu_tile_job *a,
                                                    const mi4_cpu_tile_job *b, int t_first,
                                                    int tokens, float (*y)[16])
{
    for (int t = 0; t < tokens; t++) {
        size_t at = (size_t)(t_first + t) * MI4_CPU_TILE_ROWS;
        _mm256_storeu_ps(a->y + at, _mm256_load_ps(y[t]));
        if (b != a)
            _mm256_storeu_ps(b->y + at, _mm256_load_ps(y[t] + 8));
    }
}

/* block_TB: the register block of TB tokens, from the file's
 * pair_tokens(a, b, t_first, TB, S) with S accumulator sets. */
#define MI4_AVX512_BLOCK(TB, S)                                                                    \
    static void block_##TB(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b, int t)            \
    {                                                                                              \
        pair_tokens(a, b, t, TB, S);                                                               \
    }

/* A register block of one token count. */
typedef void (*mi4_avx512_block_fn)(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b,
                                    int t_first);

/* All of a->tokens in blocks of MI4_AVX512_BLOCK_TOKENS, then the rest;
 * by_count[n] runs n tokens. */
static MI4_AVX512_INLINE void
mi4_avx512_run_blocks(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b,
                      const mi4_avx512_block_fn by_count[MI4_AVX512_BLOCK_TOKENS + 1])
{
    int t = 0;
    for (; t + MI4_AVX512_BLOCK_TOKENS <= a->tokens; t += MI4_AVX512_BLOCK_TOKENS)
        by_count[MI4_AVX512_BLOCK_TOKENS](a, b, t);
    if (t < a->tokens)
        by_count[a->tokens - t](a, b, t);
}

#endif
