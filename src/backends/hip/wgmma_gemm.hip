/* Prefill GEMMs on Hopper (sm_90a): warpgroup MMA (wgmma) from 128-byte
 * swizzled shared tiles. Other builds keep only stubs; the dispatcher then
 * uses the mma.sync tile of the same rows. */
#include <stdlib.h>
#include <string.h>

#include "gemm_common.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
/* Prefill on Hopper: 128 x BN tiles, two warpgroups of 64 rows issuing
 * wgmma from 128B-swizzled shared tiles (BK = 64, 4 stages of cp.async).
 * Built only where MOEINT4_HIP_WGMMA says the sm_90a code exists. */
constexpr int WG_BM = 128, WG_BK = 64, WG_STAGES = 4, WG_THREADS = 256;

template <int BN> constexpr int wgmma_smem_bytes()
{
    return WG_STAGES * (WG_BM + BN) * WG_BK * 2 + 1024; /* + alignment slack */
}

/* Thread tid copies 16-byte chunk tid % 8 of rows tid / 8 + 32 i of every
 * tile, so it keeps those rows' pointers in registers, refreshed when the
 * loads move on to the next tile; A_ROWS + B_ROWS of them. */
template <int BN> struct wgmma_loader {
    static constexpr int A_ROWS = WG_BM * 8 / WG_THREADS, B_ROWS = BN * 8 / WG_THREADS;
    const uint16_t *a[A_ROWS];
    const uint16_t *b[B_ROWS];
};

/* Copies k tile `k_tile` of the rows in `ld` into a 128B-swizzled stage. */
template <int ROWS, int COUNT>
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

/* Persistent: each block walks tiles blockIdx.x, + gridDim.x, ... (panel
 * order, tile_coords) as one flattened sequence of k tiles, so the loads of
 * the next tile are in flight while this one's epilogue runs; the grid is
 * one block per SM. Two warpgroups of 64 rows issue wgmma from 128B-swizzled
 * shared tiles (BK = 64, 4 stages of cp.async). */
template <int BN, bool GATED, int AHEAD>
__global__ void __launch_bounds__(WG_THREADS, 1) wgmma_gemm(gemm_params p)
{
#if defined(MI4_HAVE_WGMMA)
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * WG_BM * WG_BK;

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

    wgmma_loader<BN> ld;
    int64_t loader_tile = -1; /* my_tiles index whose rows `ld` holds */
    auto issue = [&](int64_t step) {
        if (step < steps) {
            int64_t j = step / k_tiles;
            if (j != loader_tile) {
                int tile, out_tile;
                tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
                int expert = p.tile_expert[tile], slot;
#pragma unroll
                for (int i = 0; i < ld.A_ROWS; i++)
                    ld.a[i] = a_row<WG_BM, GATED>(p, tile, tid / 8 + i * (WG_THREADS / 8), &slot);
#pragma unroll
                for (int i = 0; i < ld.B_ROWS; i++)
                    ld.b[i] = b_row<BN, BN, GATED>(p, expert, out_tile,
                                                   tid / 8 + i * (WG_THREADS / 8));
                loader_tile = j;
            }
            int stage = (int)(step % WG_STAGES), k_tile = (int)(step % k_tiles);
            load_swizzled<WG_BM>(smem_a + stage * WG_BM * WG_BK, ld.a, k_tile, p.inner, p.a);
            load_swizzled<BN>(smem_b + stage * BN * WG_BK, ld.b, k_tile, p.inner, p.b);
        }
        mi4_copy_commit();
    };

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    /* One wgmma group stays in flight. AHEAD = 2: loads for step + 2 are
     * issued after the step's opening barrier, into the stage read two
     * groups ago. AHEAD = 3: issued after the step's wgmma wait and a second
     * barrier (both warpgroups are then done with group step - 1), into the
     * stage that group read: one more k tile of latency hidden. */
    static_assert(AHEAD == 2 || AHEAD == 3, "AHEAD is 2 or 3");
#pragma unroll
    for (int s = 0; s < AHEAD; s++)
        issue(s);
    const int warpgroup = tid / 128;
    const int lane = tid % 32;
    const int row0 = warpgroup * 64 + ((tid % 128) / 32) * 16 + lane / 4;
    const int col0 = 2 * (lane % 4);
    for (int64_t step = 0; step < steps; step++) {
        mi4_copy_wait<AHEAD - 1>();
        mi4_fence_proxy_async();
        __syncthreads();
        if (AHEAD == 2)
            issue(step + AHEAD);
        int stage = (int)(step % WG_STAGES);
        uint64_t desc_a = mi4_wgmma_desc(smem_a + stage * WG_BM * WG_BK + warpgroup * 64 * WG_BK);
        uint64_t desc_b = mi4_wgmma_desc(smem_b + stage * BN * WG_BK);
        mi4_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < WG_BK / 16; kk++) {
            /* +32 bytes of k per step: the start address counts 16-byte units */
            if (BN == 128)
                mi4_wgmma_m64n128k16(*(float(*)[64])acc, desc_a + 2 * kk, desc_b + 2 * kk);
            else
                mi4_wgmma_m64n256k16(*(float(*)[128])acc, desc_a + 2 * kk, desc_b + 2 * kk);
        }
        mi4_wgmma_commit();
        mi4_wgmma_wait_one();
        if (AHEAD == 3) {
            __syncthreads();
            issue(step + AHEAD);
        }
        if ((int)(step % k_tiles) != k_tiles - 1)
            continue;

        /* The tile's last k step: epilogue (the next tile's loads fly on). */
        mi4_wgmma_wait_all();
        mi4_fence_registers(acc);
        int tile, out_tile;
        tile_coords(blockIdx.x + (step / k_tiles) * gridDim.x, row_tiles, out_tiles, &tile,
                    &out_tile);
        int slots[2];
#pragma unroll
        for (int half = 0; half < 2; half++)
            slots[half] = p.sorted_slot[(size_t)tile * WG_BM + row0 + half * 8];
        if (GATED) {
#pragma unroll
            for (int j = 0; j < BN / 16; j++)
#pragma unroll
                for (int half = 0; half < 2; half++) {
                    int r = row0 + half * 8;
                    int n = out_tile * (BN / 2) + 8 * j + col0;
                    if (slots[half] < 0 || n >= p.out_cols)
                        continue;
                    const float *gate = acc + 4 * j + 2 * half;
                    const float *up = acc + 4 * (j + BN / 16) + 2 * half;
                    uint32_t v0 = mi4_dev_f32_to_bf16(
                        activate(p.activation, gate[0], up[0], p.limit, p.alpha, p.beta));
                    uint32_t v1 = mi4_dev_f32_to_bf16(
                        activate(p.activation, gate[1], up[1], p.limit, p.alpha, p.beta));
                    *(uint32_t *)(p.act + ((size_t)tile * WG_BM + r) * (size_t)p.out_cols + n) =
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
                for (int j = 0; j < BN / 8; j++) {
                    int c = out_tile * BN + 8 * j + col0;
                    const float *v = acc + 4 * j + 2 * half;
                    if (c < p.out_cols)
                        *(float2 *)(y + c) = make_float2(v[0] * w, v[1] * w);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            acc[i] = 0.0f;
    }
    mi4_copy_wait<0>();
#else
    (void)p;
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}
#endif

template <int BN, bool GATED> hipError_t launch_wgmma(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    constexpr int smem = wgmma_smem_bytes<BN>();
    if (init) {
        hipError_t e = hipFuncSetAttribute((const void *)wgmma_gemm<BN, GATED, 2>,
                                           hipFuncAttributeMaxDynamicSharedMemorySize, smem);
        return e != hipSuccess ? e
                               : hipFuncSetAttribute((const void *)wgmma_gemm<BN, GATED, 3>,
                                                     hipFuncAttributeMaxDynamicSharedMemorySize,
                                                     smem);
    }
    gemm_params p = make_params(a, GATED);
    int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2) : (p.out_cols + BN - 1) / BN;
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    if (blocks == 0)
        return hipSuccess;
    blocks = blocks < sms ? blocks : sms; /* persistent: one block per SM */
    /* MOEINT4_HIP_WGMMA_AHEAD=2|3: k tiles of loads in flight (tuning) */
    const char *ahead = getenv("MOEINT4_HIP_WGMMA_AHEAD");
    if (ahead != nullptr && strcmp(ahead, "3") == 0)
        wgmma_gemm<BN, GATED, 3><<<dim3((unsigned)blocks), dim3(WG_THREADS), smem, a->stream>>>(p);
    else
        wgmma_gemm<BN, GATED, 2><<<dim3((unsigned)blocks), dim3(WG_THREADS), smem, a->stream>>>(p);
    return hipGetLastError();
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

hipError_t mi4_hip_launch_wgmma(int bn, bool gated, const mi4_hip_gemm_args *a, bool init)
{
    if (bn == 128)
        return gated ? launch_wgmma<128, true>(a, init) : launch_wgmma<128, false>(a, init);
    return gated ? launch_wgmma<256, true>(a, init) : launch_wgmma<256, false>(a, init);
}
