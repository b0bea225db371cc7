/* What the two Hopper (sm_90a) wgmma GEMMs share (hip_wgmma_gemm.hip: 8
 * warps that all copy and issue, also over int4 codes; hip_wgmma_ws.hip:
 * a producer warpgroup and two consumer warpgroups): the tile shapes, the
 * swizzled copies, the wgmma step and the epilogue. NVIDIA builds with
 * MOEINT4_HIP_WGMMA only. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_WGMMA_TILE_H
#define MOEINT4_BACKENDS_HIP_HIP_WGMMA_TILE_H

#include "backends/hip/hip_gemm_common.h"

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
namespace mi4_gemm {

/* BM x BN tiles, two warpgroups issuing wgmma from 128B-swizzled shared
 * tiles (BK = 64, 4 stages of cp.async). BM = 128: each warpgroup owns 64
 * rows and all BN columns; BM = 64 (fewer rows per expert, less padding):
 * each owns BN / 2 columns of the 64 rows. */
constexpr int WG_BK = 64, WG_STAGES = 4, WG_THREADS = 256;
static_assert((WG_STAGES & (WG_STAGES - 1)) == 0, "stage = step & (WG_STAGES - 1)");

template <int BM, int BN, bool INT4 = false> struct wgmma_shape {
    static constexpr int wg_cols = BM == 128 ? BN : BN / 2; /* columns per warpgroup */
    static constexpr int acc = wg_cols / 2;                  /* f32 per thread */
    /* INT4: a ring of codes (BN rows x 32 bytes a k tile) next to the tiles */
    static constexpr int code_stage = INT4 ? BN * WG_BK / 2 : 0; /* bytes */
    static constexpr int smem =
        WG_STAGES * ((BM + BN) * WG_BK * 2 + code_stage) + 1024; /* + align */
    static constexpr int a_rows = BM * 8 / WG_THREADS, b_rows = BN * 8 / WG_THREADS;
    /* INT4: a thread copies and dequantizes half a row's k tile (32 codes)
     * of rows tid / 2 + 128 i */
    static constexpr int code_rows = BN * 2 / WG_THREADS;
};

/* Copies k tile `k_tile` of COUNT rows into a 128B-swizzled stage: copier
 * t (of 8 x STEP) copies 16-byte chunk t % 8 of rows t / 8 + STEP i, so a
 * warp copies 4 whole 128-byte rows a copy and each copier keeps its rows'
 * pointers in registers (NULL rows: zeros). */
template <int STEP, int COUNT>
MI4_DEVICE void load_swizzled(uint16_t *dst, const uint16_t *const (&rows)[COUNT], int t,
                              int k_tile, int inner, const uint16_t *fallback)
{
    const int c = t % 8, k = k_tile * WG_BK + c * 8;
#pragma unroll
    for (int i = 0; i < COUNT; i++) {
        const int r = t / 8 + i * STEP;
        const bool valid = rows[i] != nullptr && k < inner;
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

/* The epilogue of the tile of my_tiles index `my_tile`: threads 0..255
 * (two warpgroups) hold its accumulators. gemm13 activates gate and up
 * into p.act; gemm2 scales by the router weight into the slot's row of p.y. */
template <int BM, int BN, bool GATED, int ACTIVATION, int ACC>
MI4_DEVICE void store_tile_as(const gemm_params &p, const float (&acc)[ACC], int64_t my_tile,
                              int row_tiles, int out_tiles)
{
    constexpr int WGC = wgmma_shape<BM, BN>::wg_cols;
    const int tid = (int)threadIdx.x, warpgroup = tid / 128, lane = tid % 32;
    const int wg_col = BM == 128 ? 0 : warpgroup * WGC;
    const int row0 = (BM == 128 ? warpgroup * 64 : 0) + ((tid % 128) / 32) * 16 + lane / 4;
    const int col0 = 2 * (lane % 4);
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
                    activate(ACTIVATION, gate[0], up[0], p.limit, p.alpha, p.beta));
                uint32_t v1 = mi4_dev_f32_to_bf16(
                    activate(ACTIVATION, gate[1], up[1], p.limit, p.alpha, p.beta));
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
}

/* One instance an activation, chosen once a tile (with_activation). */
template <int BM, int BN, bool GATED, int ACC>
MI4_DEVICE void store_tile(const gemm_params &p, const float (&acc)[ACC], int64_t my_tile,
                           int row_tiles, int out_tiles)
{
    if (!GATED)
        store_tile_as<BM, BN, false, MOEINT4_ACTIVATION_SILU>(p, acc, my_tile, row_tiles, out_tiles);
    else
        with_activation(p.activation, [&](auto act) {
            store_tile_as<BM, BN, true, decltype(act)::kind>(p, acc, my_tile, row_tiles, out_tiles);
        });
}

/* Output tiles across p.out_cols: BN columns, or BN / 2 activated ones
 * (gemm13: gate and up rows share a tile). */
__host__ __device__ inline int wgmma_out_tiles(int out_cols, int bn, bool gated)
{
    return gated ? (out_cols + bn / 2 - 1) / (bn / 2) : (out_cols + bn - 1) / bn;
}

/* The persistent grid: one block an SM, no more than the tiles there can
 * be (0: nothing to launch). */
inline unsigned wgmma_grid(const mi4_hip_gemm_args *a, int out_tiles)
{
    const size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    const size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    return (unsigned)(blocks < sms ? blocks : sms);
}

} // namespace mi4_gemm
#endif

#endif
