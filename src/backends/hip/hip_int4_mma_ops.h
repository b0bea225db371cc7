/* What the matrix-core int4 kernels share (hip_int4_mma.hip: routed tiles,
 * hip_int4_decode.hip: the direct decode path, hip_int4_grouped_gemm.hip:
 * the wgmma tiles): a group scale's bits as f32, the 32-bit words of 16
 * bytes of codes, and codes to bf16x2 (q - zero) exactly: two nibbles ORed
 * into bf16 128.0 (7 mantissa bits hold them), then one bf16x2 FMA adding
 * -(128 + zero); mma.sync m16n8k16 bf16 -> f32. The FMA and the MMA are
 * NVIDIA sm_80+ only (MI4_MMA_NVIDIA). Also 8 codes as the BF16 weights
 * the BF16 mode holds (the expansion and the wgmma tiles that dequantize
 * into shared memory write the same bits). */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INT4_MMA_OPS_H
#define MOEINT4_BACKENDS_HIP_HIP_INT4_MMA_OPS_H

#include "backends/hip/hip_gemm_common.h"

namespace mi4_gemm {

/* A group scale's bits as f32 (two a 1 KB chunk in the decode loops). */
MI4_DEVICE float int4_scale_of(const mi4_hip_int4_matrix &q, uint16_t bits)
{
    return mi4_dev_scale_to_f32(bits, q.scales_bf16);
}

/* Two f32 as bf16x2 (lo in the low half), each rounded to nearest even:
 * one cvt on NVIDIA sm_80+ (the same bits as mi4_dev_f32_to_bf16 for every
 * non-NaN value; these are finite: scales are validated at prepare). */
MI4_DEVICE uint32_t bf16x2_rn(float lo, float hi)
{
#if defined(MI4_MMA_NVIDIA)
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
#else
    return (uint32_t)mi4_dev_f32_to_bf16(lo) | (uint32_t)mi4_dev_f32_to_bf16(hi) << 16;
#endif
}

/* The 8 codes of `codes` (code j at bits 4j) as BF16 (q - zero) * scale,
 * rounded once: the bits the BF16 mode's prepare writes. q - zero comes
 * exactly from f32 2^23 + q (the nibble ORed into the mantissa) minus
 * 2^23 + zero, without an integer-to-float conversion. */
MI4_DEVICE uint4 int4_word_to_bf16(uint32_t codes, int zero, float scale)
{
    const float bias = 8388608.0f + (float)zero; /* 2^23 + zero, exact */
    float value[8];
#pragma unroll
    for (int j = 0; j < 8; j++)
        value[j] = __fmul_rn(
            __fsub_rn(mi4_dev_bits_to_f32(((codes >> (4 * j)) & 15u) | 0x4b000000u), bias),
            scale);
    return make_uint4(bf16x2_rn(value[0], value[1]), bf16x2_rn(value[2], value[3]),
                      bf16x2_rn(value[4], value[5]), bf16x2_rn(value[6], value[7]));
}

/* Inputs [k0, k0 + BK) of ROWS rows of q (row numbers `rows`, -1: none)
 * as BF16 (int4_word_to_bf16) at dst + r * ld, 8 inputs a thread a step;
 * zeros for no row and past q.inner (a multiple of 8). Plain loads and
 * stores: the caller's barrier publishes them. */
template <int ROWS, int BK, int THREADS>
MI4_DEVICE void dequant_rows(uint16_t *dst, int ld, const int64_t *rows, int k0,
                             const mi4_hip_int4_matrix &q)
{
    constexpr int CHUNKS_PER_ROW = BK / 8;
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int i = 0; i < (ROWS * CHUNKS_PER_ROW + THREADS - 1) / THREADS; i++) {
        const int chunk = tid + i * THREADS;
        if (chunk < ROWS * CHUNKS_PER_ROW) {
            const int r = chunk / CHUNKS_PER_ROW, k = k0 + (chunk % CHUNKS_PER_ROW) * 8;
            const int64_t row = rows[r];
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (row >= 0 && k < q.inner) {
                const uint32_t codes =
                    *(const uint32_t *)(q.codes + mi4_int4_row_offset(q.inner_padded, (size_t)row) +
                                        mi4_int4_input_offset(k));
                const size_t at = (size_t)row * q.groups + k / q.group_size;
                v = int4_word_to_bf16(codes, q.zeros ? (int)q.zeros[at] : 8,
                                      int4_scale_of(q, q.scales[at]));
            }
            *(uint4 *)(dst + r * ld + (chunk % CHUNKS_PER_ROW) * 8) = v;
        }
    }
}

/* Word w (0..3) of 16 bytes of codes: 8 codes, code j at bits 4j. */
MI4_DEVICE uint32_t int4_word_of(const uint4 &v, int w)
{
    return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

/* bf16x2 of -(128 + zero) in both halves, exact for zero 0..127: bf16
 * 128 is 0x4300 and its 7 mantissa bits hold zero, the sign 0x8000 (one
 * integer multiply-add, not a float conversion a chunk). */
MI4_DEVICE uint32_t int4_bias_pair(int zero)
{
    return (0xc300u + (uint32_t)zero) * 0x00010001u;
}

/* bf16x2 (128 + code at bit `shift`, 128 + code at bit shift + 16): one
 * LOP3 (a & mask) | 128.0 on NVIDIA; from C, ptxas emitted two, one per
 * immediate (SASS of int4_decode_gemm13, 2026-12-02). */
MI4_DEVICE uint32_t int4_biased_pair(uint32_t word, int shift)
{
#if defined(MI4_MMA_NVIDIA)
    uint32_t pair;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" /* 0xea: (a & b) | c */
        : "=r"(pair)
        : "r"(word >> shift), "n"(0x000f000f), "n"(0x43004300));
    return pair;
#else
    return ((word >> shift) & 0x000f000fu) | 0x43004300u;
#endif
}

#if defined(MI4_MMA_NVIDIA)

MI4_DEVICE uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* bf16x2 (q - zero) of the codes at bit `shift` and shift + 16 of `word`
 * (bias: int4_bias_pair(zero)), exact. */
MI4_DEVICE uint32_t int4_pair_minus_zero(uint32_t word, int shift, uint32_t bias)
{
    return bf16x2_fma(int4_biased_pair(word, shift), 0x3f803f80u /* 1.0, 1.0 */, bias);
}

/* c += a (16 x 16, row-major fragment) * b (16 x 8, column fragment). */
MI4_DEVICE void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                          uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

#endif

} // namespace mi4_gemm

#endif
