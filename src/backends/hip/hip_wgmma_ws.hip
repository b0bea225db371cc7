/* The warp-specialized BF16 wgmma GEMM (sm_90a; other builds keep stubs):
 * a producer warpgroup fills the stages and two consumer warpgroups only
 * wait for a stage, issue its wgmmas and release it. Same tiles, tile order
 * and epilogue as hip_wgmma_gemm.hip's kernel, which picks it per GEMM. */
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_tma.h"
#include "backends/hip/hip_wgmma_tile.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
/* The producer is threads 256..383 and copies both operands; no block-wide
 * barrier sits in the consumers' k loop (ncu on hip_wgmma_gemm.hip's
 * kernel: dispatch stalls and fixed-latency waits were half its time,
 * 2026-12-03). A stage is `empty` once every consumer warp's wgmmas on it
 * have completed (one arrival a warp) and `full` once its copies have
 * landed: ARRIVE, each producer thread's arrival is made as its copies land
 * (cp.async.mbarrier.arrive; the consumers fence them for the async proxy
 * after the wait), as in hip_int4_ws.hip; else each producer warp waits for
 * its copies of a stage, fences them and arrives WS_LAG steps later.
 * ws_arrives says which. */
constexpr int WS_PRODUCERS = 128, WS_THREADS = WG_THREADS + WS_PRODUCERS;
/* setmaxnreg: the consumers' raise waits for what the producer gives back,
 * so 128 x 104 + 256 x 200 must not exceed the launch's 384 x 168 (at 56
 * and 88 ptxas spilled the producers' row pointers). Tried on the H200,
 * 2026-12-04: the row numbers re-read from shared memory each k tile at
 * 120 + 192 (no spills) made the GEMMs 11-29% slower. */
constexpr int WS_PRODUCER_REGS = 104, WS_CONSUMER_REGS = 200;
/* !ARRIVE: a stage is signalled once the copies of the step after it are
 * issued (two steps after: 2-6% slower on the H200, 2026-12-04) */
constexpr int WS_LAG = 1;

template <int BM, int BN> constexpr int ws_smem()
{
    return WG_STAGES * (BM + BN) * WG_BK * 2 + 2 * WG_STAGES * 8 + 1024; /* + align */
}

#if defined(MI4_HAVE_WGMMA)
template <int BM, int BN, bool GATED, bool TMA, bool ARRIVE>
MI4_DEVICE void produce_stages(const gemm_params &p, const CUtensorMap *map_b, uint16_t *smem_a,
                               uint16_t *smem_b, uint64_t *full, uint64_t *empty, int row_tiles,
                               int out_tiles, int64_t my_tiles, int k_tiles)
{
    static_assert(WS_LAG < WG_STAGES, "a stage is released before its next fill is waited for");
    constexpr int WGC = wgmma_shape<BM, BN>::wg_cols;
    const int ptid = (int)threadIdx.x - WG_THREADS, lane = ptid % 32;
    const uint16_t *a_rows[BM / 16], *b_rows[TMA ? 1 : BN / 16];
    int b_first = 0; /* TMA: the tile's first weight row (of all experts' rows) */
    auto signal = [&](int64_t s) { /* !ARRIVE: this warp's copies of step s landed */
        mi4_fence_proxy_async();
        __syncwarp();
        if (lane == 0)
            mi4_mbar_arrive(&full[s & (WG_STAGES - 1)]);
    };
    int64_t step = 0;
    for (int64_t j = 0; j < my_tiles; j++) {
        int tile, out_tile, slot;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int expert = p.tile_expert[tile];
#pragma unroll
        for (int i = 0; i < BM / 16; i++)
            a_rows[i] = a_row<BM, GATED>(p, tile, ptid / 8 + 16 * i, &slot);
        if (TMA)
            b_first = expert * p.b_rows + out_tile * (GATED ? BN / 2 : BN);
        else
#pragma unroll
            for (int i = 0; i < BN / 16; i++)
                b_rows[i] = b_row<BN, WGC, GATED>(p, expert, out_tile, ptid / 8 + 16 * i);
        for (int k = 0; k < k_tiles; k++, step++) {
            const int stage = (int)(step & (WG_STAGES - 1));
            mi4_mbar_wait(&empty[stage], (unsigned)((step / WG_STAGES) & 1) ^ 1u);
            /* a warp copies 4 whole rows a copy: with half sectors of 16
             * rows the kernel was 20-40% slower (2026-12-04) */
            load_swizzled<16>(smem_a + stage * BM * WG_BK, a_rows, ptid, k, p.inner, p.a);
            if (!TMA) {
                load_swizzled<16>(smem_b + stage * BN * WG_BK, b_rows, ptid, k, p.inner, p.b);
            } else if (ptid == 0) {
                /* gemm13: per WGC columns, WGC / 2 gate rows then their up
                 * rows (b_row_number's order); rows past the outputs read
                 * whatever follows (or zeros past the tensor): only
                 * dropped columns see them */
                mi4_mbar_expect_bytes(&full[stage], BN * WG_BK * 2);
                uint16_t *dst = smem_b + stage * BN * WG_BK;
                if (GATED)
#pragma unroll
                    for (int box = 0; box < 2 * BN / WGC; box++)
                        mi4_tma_load_box(dst + box * (WGC / 2) * WG_BK, map_b, k * WG_BK,
                                         b_first + (box % 2) * p.out_cols + (box / 2) * (WGC / 2),
                                         &full[stage]);
                else
                    mi4_tma_load_box(dst, map_b, k * WG_BK, b_first, &full[stage]);
            }
            if (ARRIVE) {
                mi4_mbar_arrive_on_copies(&full[stage]);
            } else {
                mi4_copy_commit();
                if (step >= WS_LAG) {
                    mi4_copy_wait<WS_LAG>();
                    signal(step - WS_LAG);
                }
            }
        }
    }
    mi4_copy_commit(); /* none in flight once the producer returns */
    mi4_copy_wait<0>();
    if (!ARRIVE)
        for (int64_t s = step > WS_LAG ? step - WS_LAG : 0; s < step; s++)
            signal(s);
}
#endif

/* Persistent, one block an SM, tiles in the order of wgmma_gemm; the
 * consumers' epilogue of one tile runs while the producer fills the next
 * tile's stages. */
template <int BM, int BN, bool GATED, bool TMA, bool ARRIVE>
__global__ void __launch_bounds__(WS_THREADS, 1)
    wgmma_gemm_ws(gemm_params p, const __grid_constant__ CUtensorMap map_b)
{
#if defined(MI4_HAVE_WGMMA)
    typedef wgmma_shape<BM, BN> shape;
    constexpr int WGC = shape::wg_cols;
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * BM * WG_BK;
    uint64_t *full = (uint64_t *)(smem_b + WG_STAGES * BN * WG_BK), *empty = full + WG_STAGES;

    const int out_tiles = wgmma_out_tiles(p.out_cols, BN, GATED);
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int k_tiles = (p.inner + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            mi4_mbar_init(&full[s],
                          (ARRIVE ? WS_PRODUCERS : WS_PRODUCERS / 32) + (TMA ? 1 : 0));
            mi4_mbar_init(&empty[s], WG_THREADS / 32);
        }
        mi4_mbar_init_fence();
    }
    __syncthreads();
    if ((int)threadIdx.x >= WG_THREADS) {
        mi4_regs_lower<WS_PRODUCER_REGS>();
        produce_stages<BM, BN, GATED, TMA, ARRIVE>(p, &map_b, smem_a, smem_b, full, empty,
                                                   row_tiles, out_tiles, my_tiles, k_tiles);
        return;
    }
    mi4_regs_raise<WS_CONSUMER_REGS>();
    const int warpgroup = (int)threadIdx.x / 128, lane = (int)threadIdx.x % 32;
    const int wg_row = BM == 128 ? warpgroup * 64 : 0, wg_col = BM == 128 ? 0 : warpgroup * WGC;
    float acc[shape::acc];
#pragma unroll
    for (int i = 0; i < shape::acc; i++)
        acc[i] = 0.0f;
    int64_t step = 0;
    for (int64_t my_tile = 0; my_tile < my_tiles; my_tile++) {
        for (int k_tile = 0; k_tile < k_tiles; k_tile++, step++) {
            const int stage = (int)(step & (WG_STAGES - 1));
            mi4_mbar_wait(&full[stage], (unsigned)((step / WG_STAGES) & 1));
            if (ARRIVE)
                mi4_fence_proxy_async(); /* the producer's copies, before wgmma reads them */
            uint64_t desc_a = mi4_wgmma_desc(smem_a + stage * BM * WG_BK + wg_row * WG_BK);
            uint64_t desc_b = mi4_wgmma_desc(smem_b + stage * BN * WG_BK + wg_col * WG_BK);
            mi4_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++)
                wgmma_step(acc, desc_a + 2 * kk, desc_b + 2 * kk);
            mi4_wgmma_commit();
            mi4_wgmma_wait_one();
            if (k_tile > 0 && lane == 0) /* the last step's wgmmas have read its stage */
                mi4_mbar_arrive(&empty[(step - 1) & (WG_STAGES - 1)]);
        }
        mi4_wgmma_wait_all();
        if (lane == 0)
            mi4_mbar_arrive(&empty[(step - 1) & (WG_STAGES - 1)]);
        mi4_fence_registers(acc);
        store_tile<BM, BN, GATED>(p, acc, my_tile, row_tiles, out_tiles);
#pragma unroll
        for (int i = 0; i < shape::acc; i++)
            acc[i] = 0.0f;
    }
#else
    (void)p;
    (void)map_b;
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}

/* Which BF16 GEMMs take this kernel (MOEINT4_HIP_WGMMA_PIPE, read at each
 * launch). Default: both when the weight rows go by TMA, else gemm2 only.
 * On the H200 (2026-12-04, M = 4096) the TMA kernel was 8-14% faster than
 * the old kernel on both GEMMs; with cp.async weight rows it was 7-12%
 * faster on gemm2 and 16-18% slower on gemm13, whose producer then spills.
 * "ws": both GEMMs whatever the weight loads; "gemm2": gemm2 only; "sync":
 * neither (the kernel whose warps all copy and meet at a barrier). */
bool ws_serves(bool gated, bool tma)
{
    const char *knob = getenv("MOEINT4_HIP_WGMMA_PIPE");
    if (knob != nullptr && strcmp(knob, "sync") == 0)
        return false;
    if (knob != nullptr && strcmp(knob, "ws") == 0)
        return true;
    if (knob != nullptr && strcmp(knob, "gemm2") == 0)
        return !gated;
    return !gated || tma;
}

/* Whether a GEMM's producer arrives as its copies land (ARRIVE): gemm13
 * with TMA weight rows over at most 2048 inputs. On an H100 (BF16 mode,
 * bench/results/hip-2026-12-06-s35.md, call 5) that was Qwen3's gemm13
 * (2048 inputs) 4.5% faster at M = 1024 and 12% at 4096, and Mixtral's
 * (4096 inputs) 6-7% slower; gemm2 moved by -6% to +2%. */
constexpr int WS_ARRIVE_MAX_INNER = 2048;
bool ws_arrives(const gemm_params &p, bool gated, bool tma)
{
    return gated && tma && p.inner <= WS_ARRIVE_MAX_INNER;
}

/* The weight rows as a TMA descriptor (boxes of 64 inputs by the rows the
 * producer asks for at once); false where TMA cannot take them. */
template <int BM, int BN, bool GATED>
bool weight_map(const gemm_params &p, int experts, CUtensorMap *map)
{
    constexpr int WGC = wgmma_shape<BM, BN>::wg_cols;
    return mi4_tma_map_bf16(map, p.b, (uint64_t)p.inner, (uint64_t)experts * (uint64_t)p.b_rows,
                            WG_BK, GATED ? WGC / 2 : BN);
}
#endif

template <int BM, int BN, bool GATED>
hipError_t launch_ws(const mi4_hip_gemm_args *a, bool init, bool *launched)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    if (init) {
        /* the arriving instance (ws_arrives) exists for gemm13 only */
        const void *kernels[3] = { (const void *)wgmma_gemm_ws<BM, BN, GATED, false, false>,
                                   (const void *)wgmma_gemm_ws<BM, BN, GATED, true, false>,
                                   (const void *)wgmma_gemm_ws<BM, BN, GATED, true, GATED> };
        hipError_t e = hipSuccess;
        for (int i = 0; i < (GATED ? 3 : 2) && e == hipSuccess; i++)
            e = hipFuncSetAttribute(kernels[i], hipFuncAttributeMaxDynamicSharedMemorySize,
                                    ws_smem<BM, BN>());
        return e;
    }
    const gemm_params p = make_params(a, GATED);
    const unsigned blocks = wgmma_grid(a, wgmma_out_tiles(p.out_cols, BN, GATED));
    if (blocks == 0)
        return hipSuccess;
    if (!ws_serves(GATED, true))
        return hipSuccess; /* not even with TMA: skip the descriptor */
    CUtensorMap map;
    memset(&map, 0, sizeof map);
    const bool tma =
        mi4_tma_wanted() && weight_map<BM, BN, GATED>(p, a->weights->num_local_experts, &map);
    if (!ws_serves(GATED, tma))
        return hipSuccess;
    *launched = true;
    if (ws_arrives(p, GATED, tma)) /* gemm13 only: no gemm2 instance of it */
        return mi4_launch(wgmma_gemm_ws<BM, BN, GATED, true, GATED>, dim3(blocks),
                          dim3(WS_THREADS), ws_smem<BM, BN>(), a->stream, p, map);
    if (tma)
        return mi4_launch(wgmma_gemm_ws<BM, BN, GATED, true, false>, dim3(blocks),
                          dim3(WS_THREADS), ws_smem<BM, BN>(), a->stream, p, map);
    return mi4_launch(wgmma_gemm_ws<BM, BN, GATED, false, false>, dim3(blocks), dim3(WS_THREADS),
                      ws_smem<BM, BN>(), a->stream, p, map);
#else
    (void)a;
    (void)init;
    (void)launched;
    return hipSuccess; /* never called: mi4_hip_wgmma_built() is 0 */
#endif
}

} // namespace

hipError_t mi4_hip_launch_wgmma_ws(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                   bool init, bool *launched)
{
    *launched = false;
    if (bm == 64)
        return gated ? launch_ws<64, 256, true>(a, init, launched)
                     : launch_ws<64, 256, false>(a, init, launched);
    if (bn == 128)
        return gated ? launch_ws<128, 128, true>(a, init, launched)
                     : launch_ws<128, 128, false>(a, init, launched);
    return gated ? launch_ws<128, 256, true>(a, init, launched)
                 : launch_ws<128, 256, false>(a, init, launched);
}
