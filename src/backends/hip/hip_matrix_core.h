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
#ifndef MOEINT4_BACKENDS_HIP_HIP_MATRIX_CORE_H
#define MOEINT4_BACKENDS_HIP_HIP_MATRIX_CORE_H

#include "backends/hip/hip_platform.h"

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

#if defined(MI4_PLATFORM_NVIDIA) && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Hopper (sm_90a) warpgroup MMA: 4 warps compute a 64 x N f32 tile from bf16
 * A [64][16] and B [N][16], both read from shared memory through descriptors
 * (K-major, 128-byte swizzle: the layout hip_wgmma_gemm.hip's load_swizzled writes). The
 * accumulator of n8 block j is d[4j .. 4j+3] laid out as mma.sync's (rows
 * warp*16 + lane/4 (+8), columns 8j + 2*(lane%4) (+1)). */
#define MI4_HAVE_WGMMA 1

/* Descriptor of a K-major, 128B-swizzled operand whose 8-row groups are
 * 1024 bytes apart; `tile` is 1024-byte aligned, k offsets advance the
 * start address by 32 bytes per 16 elements. */
MI4_DEVICE uint64_t mi4_wgmma_desc(const void *tile)
{
    uint64_t address = (uint64_t)__cvta_generic_to_shared(tile);
    return ((address >> 4) & 0x3fffu) | (1ull << 16) | ((uint64_t)(1024 >> 4) << 32) |
           (1ull << 62);
}

MI4_DEVICE void mi4_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
MI4_DEVICE void mi4_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
MI4_DEVICE void mi4_wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
MI4_DEVICE void mi4_wgmma_wait_one() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
/* Shared memory written by ordinary (cp.async) stores, read next by wgmma. */
MI4_DEVICE void mi4_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* Warp specialization: shared-memory barriers that count arrivals (one
 * 64-bit word each; a wait names the parity of the phase it waits for, and
 * parity 1 passes before the first phase completes) and moving registers
 * between warpgroups (setmaxnreg). */
MI4_DEVICE void mi4_mbar_init(uint64_t *bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(bar)),
                 "r"(count)
                 : "memory");
}
/* Makes initialized barriers visible to the other threads (then a
 * __syncthreads). */
MI4_DEVICE void mi4_mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
MI4_DEVICE void mi4_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(bar))
                 : "memory");
}
/* One arrival on bar, made once this thread's cp.async copies issued so
 * far have landed (the thread goes on at once); counted in the barrier's
 * expected arrivals (.noinc). */
MI4_DEVICE void mi4_mbar_arrive_on_copies(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(bar))
                 : "memory");
}
MI4_DEVICE void mi4_mbar_wait(uint64_t *bar, unsigned parity)
{
    asm volatile("{\n.reg .pred done;\nretry:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra retry;\n}\n" ::"r"((unsigned)__cvta_generic_to_shared(bar)),
                 "r"(parity)
                 : "memory");
}
template <int REGS> MI4_DEVICE void mi4_regs_raise() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS)); }
template <int REGS> MI4_DEVICE void mi4_regs_lower() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS)); }
/* Keeps the compiler from moving accumulator reads across the async MMA. */
template <int N> MI4_DEVICE void mi4_fence_registers(float (&d)[N])
{
#pragma unroll
    for (int i = 0; i < N; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* The operand lists of wgmma m64nNk16 (hip_int4_wgmma_ops.h too): the
 * accumulator registers %0 .. %(N/2 - 1) in 32s, and d[b] .. d[b + 7] as
 * read-write constraints. */
#define MI4_WGMMA_R0_31 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MI4_WGMMA_R32_63 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MI4_WGMMA_R64_95 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define MI4_WGMMA_R96_127 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define MI4_WGMMA_D8(d, b) \
    "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3]), "+f"(d[b + 4]), "+f"(d[b + 5]), \
        "+f"(d[b + 6]), "+f"(d[b + 7])
#define MI4_WGMMA_D32(d, b) \
    MI4_WGMMA_D8(d, b), MI4_WGMMA_D8(d, b + 8), MI4_WGMMA_D8(d, b + 16), MI4_WGMMA_D8(d, b + 24)

MI4_DEVICE void mi4_wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{" MI4_WGMMA_R0_31 ", " MI4_WGMMA_R32_63 "}, %64, %65, accumulate, 1, 1, 0, 0;\n}\n"
                 : MI4_WGMMA_D32(d, 0), MI4_WGMMA_D32(d, 32)
                 : "l"(desc_a), "l"(desc_b), "r"(1));
}

MI4_DEVICE void mi4_wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{" MI4_WGMMA_R0_31 ", " MI4_WGMMA_R32_63 ", " MI4_WGMMA_R64_95 ", " MI4_WGMMA_R96_127 "}, %128, %129, accumulate, 1, 1, 0, 0;\n}\n"
                 : MI4_WGMMA_D32(d, 0), MI4_WGMMA_D32(d, 32), MI4_WGMMA_D32(d, 64), MI4_WGMMA_D32(d, 96)
                 : "l"(desc_a), "l"(desc_b), "r"(1));
}
#endif

#endif
