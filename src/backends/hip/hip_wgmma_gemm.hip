/* Prefill GEMMs on Hopper (sm_90a): warpgroup MMA (wgmma) from 128-byte
 * swizzled shared tiles. Other builds keep only stubs; the dispatcher then
 * uses the mma.sync tile of the same rows. */
#include "backends/hip/hip_gemm_common.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
/* BM x BN tiles, two warpgroups issuing wgmma from 128B-swizzled shared
 * tiles (BK = 64, 4 stages of cp.async). BM = 128: each warpgroup owns 64
 * rows and all BN columns; BM = 64 (fewer rows per expert, less padding):
 * each owns BN / 2 columns of the 64 rows. */
constexpr int WG_BK = 64, WG_STAGES = 4, WG_THREADS = 256;

template <int BM, int BN> struct wgmma_shape {
    static constexpr int wg_cols = BM == 128 ? BN : BN / 2; /* columns per warpgroup */
    static constexpr int acc = wg_cols / 2;                  /* f32 per thread */
    static constexpr int smem = WG_STAGES * (BM + BN) * WG_BK * 2 + 1024; /* + align */
    static constexpr int a_rows = BM * 8 / WG_THREADS, b_rows = BN * 8 / WG_THREADS;
};

/* Copies k tile `k_tile` of COUNT rows into a 128B-swizzled stage: thread
 * tid copies 16-byte chunk tid % 8 of rows tid / 8 + 32 i, so it keeps
 * those rows' pointers in registers. */
template <int COUNT>
__device__ __forceinline__ void load_swizzled(uint16_t *dst, const uint16_t *const (&rows)[COUNT],
                                              int k_tile, int inner, const uint16_t *fallback)
{
    const int tid = (int)threadIdx.x, c = tid % 8;
    const int k = k_tile * WG_BK + c * 8;
#pragma unroll
    for (int i = 0; i < COUNT; i++) {
        int r = tid / 8 + i * (WG_THREADS / 8);
        bool valid = rows[i] != nullptr && k < inner;
        mi4_copy16(dst + r * 64 + ((c ^ (r & 7)) * 8), valid ? rows[i] + k : fallback, valid);
    }
}

template <int N> MI4_DEVICE void wgmma_step(float (&acc)[N], uint64_t desc_a, uint64_t desc_b)
{
    if constexpr (N == 128)
        mi4_wgmma_m64n256k16(acc, desc_a, desc_b);
    else
        mi4_wgmma_m64n128k16(acc, desc_a, desc_b);
}

/* Persistent: each block walks tiles blockIdx.x, + gridDim.x, ... (panel
 * order, tile_coords) as one flattened sequence of k tiles, so the next
 * tile's loads are in flight while this one's epilogue runs; the grid is one
 * block per SM. Loads run two k tiles ahead and one wgmma group stays in
 * flight, so the stage being refilled was read two groups ago. */
template <int BM, int BN, bool GATED>
__global__ void __launch_bounds__(WG_THREADS, 1) wgmma_gemm(gemm_params p)
{
#if defined(MI4_HAVE_WGMMA)
    typedef wgmma_shape<BM, BN> shape;
    constexpr int WGC = shape::wg_cols, AHEAD = WG_STAGES - 2;
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * BM * WG_BK;

    const int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2)
                                : (p.out_cols + BN - 1) / BN;
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int k_tiles = (p.inner + WG_BK - 1) / WG_BK;
    const int64_t steps = my_tiles * k_tiles;
    const int tid = (int)threadIdx.x;

    const uint16_t *a_ptr[shape::a_rows], *b_ptr[shape::b_rows];
    int64_t loader_tile = -1; /* the my_tiles index whose row pointers are held */
    auto issue = [&](int64_t step) {
        if (step < steps) {
            int64_t j = step / k_tiles;
            if (j != loader_tile) {
                int tile, out_tile, slot;
                tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
                int expert = p.tile_expert[tile];
#pragma unroll
                for (int i = 0; i < shape::a_rows; i++)
                    a_ptr[i] = a_row<BM, GATED>(p, tile, tid / 8 + i * (WG_THREADS / 8), &slot);
#pragma unroll
                for (int i = 0; i < shape::b_rows; i++)
                    b_ptr[i] = b_row<BN, WGC, GATED>(p, expert, out_tile,
                                                     tid / 8 + i * (WG_THREADS / 8));
                loader_tile = j;
            }
            int stage = (int)(step % WG_STAGES), k_tile = (int)(step % k_tiles);
            load_swizzled(smem_a + stage * BM * WG_BK, a_ptr, k_tile, p.inner, p.a);
            load_swizzled(smem_b + stage * BN * WG_BK, b_ptr, k_tile, p.inner, p.b);
        }
        mi4_copy_commit();
    };

    float acc[shape::acc];
#pragma unroll
    for (int i = 0; i < shape::acc; i++)
        acc[i] = 0.0f;
#pragma unroll
    for (int s = 0; s < AHEAD; s++)
        issue(s);
    const int warpgroup = tid / 128, lane = tid % 32;
    const int wg_row = BM == 128 ? warpgroup * 64 : 0, wg_col = BM == 128 ? 0 : warpgroup * WGC;
    const int row0 = wg_row + ((tid % 128) / 32) * 16 + lane / 4;
    const int col0 = 2 * (lane % 4);
    /* The k loop nested in the tile loop: the flattened loop of one
     * sequence with the epilogue behind a branch made ptxas serialize every
     * wgmma (C7518: accumulators touched in a path it took for divergent). */
    int64_t step = 0;
    for (int64_t my_tile = 0; my_tile < my_tiles; my_tile++) {
        for (int k_tile = 0; k_tile < k_tiles; k_tile++, step++) {
            mi4_copy_wait<AHEAD - 1>();
            mi4_fence_proxy_async();
            __syncthreads();
            issue(step + AHEAD);
            int stage = (int)(step % WG_STAGES);
            uint64_t desc_a = mi4_wgmma_desc(smem_a + stage * BM * WG_BK + wg_row * WG_BK);
            uint64_t desc_b = mi4_wgmma_desc(smem_b + stage * BN * WG_BK + wg_col * WG_BK);
            mi4_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++) /* +32 bytes of k: the address counts 16 B */
                wgmma_step(acc, desc_a + 2 * kk, desc_b + 2 * kk);
            mi4_wgmma_commit();
            mi4_wgmma_wait_one();
        }

        /* The tile's epilogue (the next tile's loads fly on). */
        mi4_wgmma_wait_all();
        mi4_fence_registers(acc);
        int tile, out_tile;
        tile_coords(blockIdx.x + my_tile * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        int slots[2];
#pragma unroll
        for (int half = 0; half < 2; half++)
            slots[half] = p.sorted_slot[(size_t)tile * BM + row0 + half * 8];
        if (GATED) {
            /* this warpgroup's columns: WGC / 2 gate rows, then their up rows */
#pragma unroll
            for (int j = 0; j < WGC / 16; j++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    int r = row0 + half * 8;
                    int n = out_tile * (BN / 2) + wg_col / 2 + 8 * j + col0;
                    if (slots[half] < 0 || n >= p.out_cols)
                        continue;
                    const float *gate = acc + 4 * j + 2 * half;
                    const float *up = acc + 4 * (j + WGC / 16) + 2 * half;
                    uint32_t v0 = mi4_dev_f32_to_bf16(
                        activate(p.activation, gate[0], up[0], p.limit, p.alpha, p.beta));
                    uint32_t v1 = mi4_dev_f32_to_bf16(
                        activate(p.activation, gate[1], up[1], p.limit, p.alpha, p.beta));
                    *(uint32_t *)(p.act + ((size_t)tile * BM + r) * (size_t)p.out_cols + n) =
                        v0 | (v1 << 16);
                }
        } else {
#pragma unroll
            for (int half = 0; half < 2; half++) {
                int slot = slots[half];
                if (slot < 0)
                    continue;
                float w = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
                float *y = p.y + (size_t)slot * (size_t)p.out_cols;
#pragma unroll
                for (int j = 0; j < WGC / 8; j++) {
                    int c = out_tile * BN + wg_col + 8 * j + col0;
                    const float *v = acc + 4 * j + 2 * half;
                    if (c < p.out_cols)
                        *(float2 *)(y + c) = make_float2(v[0] * w, v[1] * w);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < shape::acc; i++)
            acc[i] = 0.0f;
    }
    mi4_copy_wait<0>();
#else
    (void)p;
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}
#endif

template <int BM, int BN, bool GATED>
hipError_t launch_wgmma(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    constexpr int smem = wgmma_shape<BM, BN>::smem;
    if (init)
        return hipFuncSetAttribute((const void *)wgmma_gemm<BM, BN, GATED>,
                                   hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_params p = make_params(a, GATED);
    int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2) : (p.out_cols + BN - 1) / BN;
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    if (blocks == 0)
        return hipSuccess;
    blocks = blocks < sms ? blocks : sms; /* persistent: one block per SM */
    return mi4_launch(wgmma_gemm<BM, BN, GATED>, dim3((unsigned)blocks), dim3(WG_THREADS), smem,
                      a->stream, p);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never called: mi4_hip_wgmma_built() is 0 */
#endif
}

} // namespace

int mi4_hip_wgmma_built(void)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    return 1;
#else
    return 0;
#endif
}

hipError_t mi4_hip_launch_wgmma(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                bool init)
{
    if (bm == 64)
        return gated ? launch_wgmma<64, 256, true>(a, init) : launch_wgmma<64, 256, false>(a, init);
    if (bn == 128)
        return gated ? launch_wgmma<128, 128, true>(a, init)
                     : launch_wgmma<128, 128, false>(a, init);
    return gated ? launch_wgmma<128, 256, true>(a, init) : launch_wgmma<128, 256, false>(a, init);
}
