/* The matrix-core inner step behind one interface: a warp computes a 16x16
 * f32 tile C += A * B^T from bf16 tiles in shared memory, A [16 rows][16 k]
 * and B [16 cols][16 k], both k-contiguous with a row stride `ld` (elements).
 *
 *   NVIDIA sm_80+ : ldmatrix + two mma.sync.m16n8k16 (bf16 -> f32)
 *   AMD gfx90a/gfx94x: one v_mfma_f32_16x16x16bf16_1k
 *   anything else : mi4_fma_tile, plain FMAs (also the run-time "fma" variant)
 *
 * The accumulator layout (which lane holds which (row, col)) is exposed by
 * mi4_acc_row / mi4_acc_col so the epilogues are shared code. */
#ifndef MOEINT4_HIP_MATRIX_CORE_H
#define MOEINT4_HIP_MATRIX_CORE_H

#include "hip_platform.h"

#if defined(MI4_PLATFORM_NVIDIA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MI4_MMA_NVIDIA 1
#elif defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__)
#define MI4_MMA_AMD 1
#endif
#if defined(MI4_MMA_NVIDIA) || defined(MI4_MMA_AMD)
#define MI4_HAVE_MATRIX_CORES 1
#else
#define MI4_HAVE_MATRIX_CORES 0
#endif

#define MI4_ACC_PER_LANE (256 / MI4_WARP)

struct mi4_frag_acc {
    float v[MI4_ACC_PER_LANE];
};

MI4_DEVICE int mi4_lane() { return (int)(threadIdx.x % MI4_WARP); }

#if defined(MI4_PLATFORM_NVIDIA)
/* Elements 2q and 2q+1 of a lane are columns c and c+1 of one row. */
#define MI4_ACC_PAIRS 1
/* mma.m16n8k16 C layout, two n-halves: v[0..3] cols 0-7, v[4..7] cols 8-15. */
MI4_DEVICE int mi4_acc_row(int i) { return (mi4_lane() >> 2) + ((i >> 1) & 1) * 8; }
MI4_DEVICE int mi4_acc_col(int i) { return 2 * (mi4_lane() & 3) + (i & 1) + (i >> 2) * 8; }
#else
#define MI4_ACC_PAIRS 0
/* MFMA 16x16 C layout: lane holds column lane%16, rows 4*(lane/16) + i. */
MI4_DEVICE int mi4_acc_row(int i) { return 4 * (mi4_lane() / 16) + i; }
MI4_DEVICE int mi4_acc_col(int i) { (void)i; return mi4_lane() % 16; }
#endif

/* The plain-FMA tile: each lane computes the elements it owns. */
MI4_DEVICE void mi4_fma_tile(mi4_frag_acc &acc, const uint16_t *a, int lda, const uint16_t *b,
                             int ldb)
{
#pragma unroll
    for (int i = 0; i < MI4_ACC_PER_LANE; i++) {
        const uint16_t *a_row = a + mi4_acc_row(i) * lda;
        const uint16_t *b_row = b + mi4_acc_col(i) * ldb;
        float sum = acc.v[i];
#pragma unroll
        for (int k = 0; k < 16; k++)
            sum = fmaf(mi4_dev_bf16_to_f32(a_row[k]), mi4_dev_bf16_to_f32(b_row[k]), sum);
        acc.v[i] = sum;
    }
}

#if defined(MI4_MMA_NVIDIA)
struct mi4_frag_a {
    uint32_t r[4];
};
struct mi4_frag_b {
    uint32_t r[4]; /* {b0, b1} of cols 0-7, then of cols 8-15 */
};

MI4_DEVICE void mi4_ldmatrix_x4(uint32_t (&r)[4], const uint16_t *row_address)
{
    unsigned address = (unsigned)__cvta_generic_to_shared(row_address);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

MI4_DEVICE void mi4_load_a(mi4_frag_a &f, const uint16_t *a, int ld)
{
    int lane = mi4_lane();
    mi4_ldmatrix_x4(f.r, a + (lane % 16) * ld + (lane / 16) * 8);
}

MI4_DEVICE void mi4_load_b(mi4_frag_b &f, const uint16_t *b, int ld)
{
    int lane = mi4_lane();
    mi4_ldmatrix_x4(f.r, b + ((lane & 7) + ((lane >> 4) << 3)) * ld + ((lane >> 3) & 1) * 8);
}

MI4_DEVICE void mi4_mma(mi4_frag_acc &c, const mi4_frag_a &a, const mi4_frag_b &b)
{
#pragma unroll
    for (int half = 0; half < 2; half++) {
        float *d = c.v + 4 * half;
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]),
                       "r"(b.r[2 * half]), "r"(b.r[2 * half + 1]));
    }
}
#elif defined(MI4_MMA_AMD)
typedef short mi4_bf16x4 __attribute__((ext_vector_type(4)));
typedef float mi4_f32x4 __attribute__((ext_vector_type(4)));
struct mi4_frag_a {
    mi4_bf16x4 r;
};
typedef mi4_frag_a mi4_frag_b;

/* Lane l holds row l%16, k = 4*(l/16) .. +3 (A), or column l%16 (B). */
MI4_DEVICE void mi4_load_a(mi4_frag_a &f, const uint16_t *a, int ld)
{
    int lane = mi4_lane();
    f.r = *(const mi4_bf16x4 *)(a + (lane % 16) * ld + 4 * (lane / 16));
}

MI4_DEVICE void mi4_load_b(mi4_frag_b &f, const uint16_t *b, int ld) { mi4_load_a(f, b, ld); }

MI4_DEVICE void mi4_mma(mi4_frag_acc &c, const mi4_frag_a &a, const mi4_frag_b &b)
{
    mi4_f32x4 acc = {c.v[0], c.v[1], c.v[2], c.v[3]};
    acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a.r, b.r, acc, 0, 0, 0);
    c.v[0] = acc[0];
    c.v[1] = acc[1];
    c.v[2] = acc[2];
    c.v[3] = acc[3];
}
#endif

#endif
