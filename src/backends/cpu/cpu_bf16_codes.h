/* int4 codes -> bf16 (128 + code) without a table, as the bf16 table
 * (cpu_kernels_avx512bf16.c says how) and the AMX table read them: a 16-lane
 * register of code words, lane r = one row's 8 codes of a block, becomes
 * four registers of bf16 column pairs, (c0, c4), (c3, c7), (c2, c6) and
 * (c5, c1) in each lane. Include only from files compiled for AVX-512
 * (F/BW/DQ/VL) with or without VBMI2. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_BF16_CODES_H
#define MOEINT4_BACKENDS_CPU_CPU_BF16_CODES_H

#include <immintrin.h>

#define MI4_BF16_INLINE inline __attribute__((always_inline))

/* bf16 of 128 + (half & 0xF) in each 16-bit half */
static MI4_BF16_INLINE __m512i mi4_bf16_low_codes(__m512i word)
{
    return _mm512_ternarylogic_epi32(word, _mm512_set1_epi32(0x000F000F),
                                     _mm512_set1_epi32(0x43004300), 0xEA); /* (a & b) | c */
}

/* bf16 of 128 + (half >> 12) in each 16-bit half: 0x0430 << 4 = 0x4300;
 * without VBMI2 a shift and an OR (one more instruction per 128 weights) */
static MI4_BF16_INLINE __m512i mi4_bf16_top_codes(__m512i word)
{
#if defined(__AVX512VBMI2__)
    return _mm512_shrdi_epi16(word, _mm512_set1_epi16(0x0430), 12);
#else
    return _mm512_or_si512(_mm512_srli_epi16(word, 12), _mm512_set1_epi16(0x4300));
#endif
}

/* codes[c] = column pair c of the block in every lane; the word and its
 * 8-bit rotation hold all eight columns in the places the two helpers read */
static MI4_BF16_INLINE void mi4_bf16_block_codes(__m512i word, __m512i codes[4])
{
    /* each register's last use is the (destructive) vpternlogd: no copies */
    __m512i rotated = _mm512_ror_epi32(word, 8);
    codes[1] = mi4_bf16_top_codes(word);
    codes[0] = mi4_bf16_low_codes(word);
    codes[3] = mi4_bf16_top_codes(rotated);
    codes[2] = mi4_bf16_low_codes(rotated);
}

/* One 32-byte block of code words of tile a (lanes 0-7) and of tile b
 * (lanes 8-15), both 32-byte aligned. */
static MI4_BF16_INLINE __m512i mi4_bf16_load_block_pair(const uint8_t *block_a,
                                                        const uint8_t *block_b)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)block_a)),
                              _mm256_load_si256((const __m256i *)block_b), 1);
}

#endif
