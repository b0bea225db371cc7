/* What the matrix-core int4 GEMVs share (hip_int4_mma.hip: routed tiles,
 * hip_int4_decode.hip: the direct decode path): mma.sync m16n8k16 bf16 ->
 * f32, the bf16x2 FMA that turns biased codes into q - zero exactly, and a
 * group scale's bits as f32. NVIDIA sm_80+ only (MI4_MMA_NVIDIA). */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INT4_MMA_OPS_H
#define MOEINT4_BACKENDS_HIP_HIP_INT4_MMA_OPS_H

#include "backends/hip/hip_gemm_common.h"

namespace mi4_gemm {

MI4_DEVICE float int4_scale_of(const mi4_hip_int4_matrix &q, uint16_t bits)
{
    return q.scales_bf16 ? mi4_dev_bf16_to_f32(bits) : mi4_dev_f16_to_f32(bits);
}

#if defined(MI4_MMA_NVIDIA)

MI4_DEVICE uint32_t bf16x2_fma(uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
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
