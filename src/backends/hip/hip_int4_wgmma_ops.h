/* What the int4 wgmma GEMMs share (hip_int4_grouped_gemm.hip: the q tiles
 * of 8-128 token rows; hip_int4_ws.hip: the warp-specialized persistent
 * qw64, qw128 and q256 tiles and qw32's gemm2): the k order of a 128-input
 * chunk, the block's weight rows, codes to A fragments and wgmma m64nNk16
 * with A from registers. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INT4_WGMMA_OPS_H
#define MOEINT4_BACKENDS_HIP_HIP_INT4_WGMMA_OPS_H

#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_int4_mma_ops.h"

namespace mi4_gemm {

constexpr int Q_CHUNK = 128;  /* inputs per stage */
constexpr int Q_ROWS = 128;   /* weight rows per block */
constexpr int Q_CODE_BYTES = Q_ROWS * Q_CHUNK / 2; /* codes per stage */

/* Position k (0..127) of the MMA's k order within a chunk -> the input it
 * holds: step s = 2w + h, lane t's pairs (2t, 2t+1) and (2t+8, 2t+9) are
 * inputs 32t + 8w + (2h, 2h+4) and (2h+1, 2h+5) (hip_int4_mma.hip). */
MI4_HOST_DEVICE int q_input_of(int k)
{
    const int s = k / 16, kk = k % 16, w = s / 2, h = s % 2;
    const int half = kk / 8, within = kk % 8, t = within / 2;
    return 32 * t + 8 * w + 2 * h + half + 4 * (within & 1);
}

/* Weight row (of the expert's `rows`) behind block row r, or -1: gemm13
 * warps hold 8 gate rows then their 8 up rows, for the 8 outputs whose
 * permuted positions are side by side; gemm2 rows are outputs in order. */
template <bool GATED>
MI4_DEVICE int q_weight_row(const gemm_params &p, int out_tile, int r)
{
    if (GATED) {
        const int warp = r / 16, j = r % 16;
        const int at = out_tile * (Q_ROWS / 2) + warp * 8 + (j % 8);
        const int out = at / Q_CHUNK * Q_CHUNK + q_input_of(at % Q_CHUNK);
        return j < 8 ? out : p.out_cols + out;
    }
    const int out = out_tile * Q_ROWS + r;
    return out < p.out_cols ? out : -1;
}

/* Output tiles of Q_ROWS weight rows (gemm13: Q_ROWS / 2 activated outputs). */
__host__ __device__ inline int q_out_tiles(int out_cols, bool gated)
{
    return gated ? out_cols / (Q_ROWS / 2) : (out_cols + Q_ROWS - 1) / Q_ROWS;
}

#if defined(MI4_HAVE_WGMMA)

/* A group scale as two bf16 that sum to it exactly, each in both halves of
 * a bf16x2: hi, the scale rounded to bf16, and lo = scale - hi (exact in
 * f32), whose at most 3 significant bits (f16 scales have 11, bf16 8) make
 * it a bf16 too. For the rounded A fragments (q_dequant). */
struct q_split_scale {
    uint32_t hi, lo;
};

MI4_DEVICE q_split_scale q_split(float scale)
{
    const uint32_t hi = bf16x2_rn(scale, scale);
    const float lo = scale - __uint_as_float(hi << 16);
    return { hi, bf16x2_rn(lo, lo) };
}

/* bf16x2 of (q - zero) for the nibbles at `shift` and shift + 16 of a word
 * of 8 codes (bias: -(128 + zero) twice); with ROUNDED, times the scale,
 * rounded once (the bits of the BF16 mode's weights): (q - zero) * lo is
 * exact in bf16 (4 bits times 3), so (q - zero) * hi + that, one bf16x2 FMA,
 * is (q - zero) * scale rounded once. Two bf16x2 FMAs a pair of weights
 * where two unpacks, two f32 products and a conversion took five
 * instructions (checked for every positive finite f16 and bf16 scale and
 * every q - zero in [-16, 15]: bench/results/hip-2026-12-05-s24.md, and on
 * the H200 by test_hip_dequant's test_rounded_pairs). */
template <bool ROUNDED>
MI4_DEVICE uint32_t q_dequant(uint32_t word, int shift, uint32_t bias, const q_split_scale &scale)
{
    const uint32_t v = int4_pair_minus_zero(word, shift, bias);
    if (!ROUNDED)
        return v;
    return bf16x2_fma(v, scale.hi, bf16x2_fma(v, scale.lo, 0x80008000u /* -0, -0 */));
}

/* The A fragment of k step s = 2w + h (0..7) of a chunk from word w of a
 * lane's 16 bytes of codes of rows g (lo) and g + 8 (hi). */
template <bool ROUNDED>
MI4_DEVICE void q_fragment_of_words(uint32_t (&f)[4], uint32_t lo, uint32_t hi, int h,
                                    uint32_t bias_lo, uint32_t bias_hi,
                                    const q_split_scale &scale_lo, const q_split_scale &scale_hi)
{
    f[0] = q_dequant<ROUNDED>(lo, 8 * h, bias_lo, scale_lo);
    f[1] = q_dequant<ROUNDED>(hi, 8 * h, bias_hi, scale_hi);
    f[2] = q_dequant<ROUNDED>(lo, 8 * h + 4, bias_lo, scale_lo);
    f[3] = q_dequant<ROUNDED>(hi, 8 * h + 4, bias_hi, scale_hi);
}

template <bool ROUNDED>
MI4_DEVICE void q_fragment(uint32_t (&f)[4], const uint4 &lo, const uint4 &hi, int s,
                           uint32_t bias_lo, uint32_t bias_hi, const q_split_scale &scale_lo,
                           const q_split_scale &scale_hi)
{
    q_fragment_of_words<ROUNDED>(f, int4_word_of(lo, s / 2), int4_word_of(hi, s / 2), s % 2,
                                 bias_lo, bias_hi, scale_lo, scale_hi);
}

/* wgmma m64nNk16 (N = 2 * the accumulators a thread holds), A (bf16, the
 * mma.sync m16n8k16 A fragment per warp) from registers, B from a K-major
 * 128B-swizzled descriptor; scale_d = 0 starts a fresh accumulator. The
 * operand lists: hip_matrix_core.h. */
MI4_DEVICE void wgmma_rs(float (&d)[4], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

MI4_DEVICE void wgmma_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                 : MI4_WGMMA_D8(d, 0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

MI4_DEVICE void wgmma_rs(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1, 0;\n}\n"
                 : MI4_WGMMA_D8(d, 0), MI4_WGMMA_D8(d, 8)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

MI4_DEVICE void wgmma_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{" MI4_WGMMA_R0_31 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : MI4_WGMMA_D32(d, 0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

MI4_DEVICE void wgmma_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{" MI4_WGMMA_R0_31 ", " MI4_WGMMA_R32_63 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : MI4_WGMMA_D32(d, 0), MI4_WGMMA_D32(d, 32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

MI4_DEVICE void wgmma_rs(float (&d)[96], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
                 "{" MI4_WGMMA_R0_31 ", " MI4_WGMMA_R32_63 ", " MI4_WGMMA_R64_95 "}, {%96, %97, %98, %99}, %100, p, 1, 1, 0;\n}\n"
                 : MI4_WGMMA_D32(d, 0), MI4_WGMMA_D32(d, 32), MI4_WGMMA_D32(d, 64)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

MI4_DEVICE void wgmma_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t desc_b, int scale_d)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{" MI4_WGMMA_R0_31 ", " MI4_WGMMA_R32_63 ", " MI4_WGMMA_R64_95 ", " MI4_WGMMA_R96_127 "}, {%128, %129, %130, %131}, %132, p, 1, 1, 0;\n}\n"
                 : MI4_WGMMA_D32(d, 0), MI4_WGMMA_D32(d, 32), MI4_WGMMA_D32(d, 64), MI4_WGMMA_D32(d, 96)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

/* Keeps A fragments alive (unchanged) until the MMAs reading them are done. */
template <int S> MI4_DEVICE void q_keep(uint32_t (&r)[S][4])
{
#pragma unroll
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            asm volatile("" : "+r"(r[s][i])::"memory");
}

#endif

} // namespace mi4_gemm

#endif
