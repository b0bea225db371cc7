/* Prefill GEMMs on Hopper (sm_90a): warpgroup MMA (wgmma) from 128-byte
 * swizzled shared tiles. Other builds keep only stubs; the dispatcher then
 * uses the mma.sync tile of the same rows. With int4 weights (INT4) the
 * weight tiles arrive as codes and are dequantized into the same BF16
 * shared tiles, with the bits the BF16 mode holds (int4_word_to_bf16), so
 * no BF16 copy of the experts is made. */
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_int4_mma_ops.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
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

/* INT4: the codes of k tile `k_tile` of this thread's rows (row numbers
 * `rows`, -1: none) into `stage`, half a row's 32 bytes a copy. */
template <int BN>
MI4_DEVICE void load_codes(uint8_t *stage, const int64_t (&rows)[BN * 2 / WG_THREADS], int k_tile,
                           const mi4_hip_int4_matrix &q)
{
    const int tid = (int)threadIdx.x, half = tid % 2;
#pragma unroll
    for (int i = 0; i < BN * 2 / WG_THREADS; i++) {
        const int r = tid / 2 + i * (WG_THREADS / 2);
        const bool valid = rows[i] >= 0;
        const uint8_t *src =
            q.codes + (valid ? mi4_int4_row_offset(q.inner_padded, (size_t)rows[i]) +
                                   mi4_int4_input_offset(k_tile * WG_BK + 32 * half)
                             : 0);
        mi4_copy16(stage + r * (WG_BK / 2) + 16 * half, src, valid);
    }
}

/* INT4: a k tile's group parameters of this thread's rows (raw bits),
 * loaded a step before the dequantization that needs them so the global
 * loads' latency hides behind a step of wgmmas. valid: a row and inputs
 * there (group sizes are multiples of 32: one group a thread). */
template <int BN> struct code_params {
    uint16_t scale[BN * 2 / WG_THREADS];
    uint8_t zero[BN * 2 / WG_THREADS];
    bool valid[BN * 2 / WG_THREADS];
};

template <int BN>
MI4_DEVICE void load_params(code_params<BN> &c, const int64_t (&rows)[BN * 2 / WG_THREADS],
                            int k_tile, const mi4_hip_int4_matrix &q)
{
    const int k0 = k_tile * WG_BK + 32 * ((int)threadIdx.x % 2);
#pragma unroll
    for (int i = 0; i < BN * 2 / WG_THREADS; i++) {
        c.valid[i] = rows[i] >= 0 && k0 < q.inner;
        const size_t at = c.valid[i] ? (size_t)rows[i] * q.groups + k0 / q.group_size : 0;
        c.scale[i] = c.valid[i] ? q.scales[at] : (uint16_t)0;
        c.zero[i] = c.valid[i] && q.zeros ? q.zeros[at] : (uint8_t)8;
    }
}

/* INT4: this thread's codes of k tile `k_tile` (in `codes`, landed) as
 * BF16 into the 128B-swizzled weight stage `dst`: row r's chunks 4 half ..
 * 4 half + 3, (q - zero) * scale rounded once (the BF16 mode's bits);
 * zeros for no row and for inputs past q.inner (a multiple of 8). */
template <int BN>
MI4_DEVICE void dequant_codes(uint16_t *dst, const uint8_t *codes, const code_params<BN> &c,
                              int k_tile, const mi4_hip_int4_matrix &q)
{
    const int tid = (int)threadIdx.x, half = tid % 2;
    const int k0 = k_tile * WG_BK + 32 * half;
#pragma unroll
    for (int i = 0; i < BN * 2 / WG_THREADS; i++) {
        const int r = tid / 2 + i * (WG_THREADS / 2);
        const uint4 v = *(const uint4 *)(codes + r * (WG_BK / 2) + 16 * half);
        const float scale = int4_scale_of(q, c.scale[i]);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int chunk = 4 * half + j;
            const uint4 w = c.valid[i] && k0 + 8 * j < q.inner
                                ? int4_word_to_bf16(int4_word_of(v, j), c.zero[i], scale)
                                : make_uint4(0u, 0u, 0u, 0u);
            *(uint4 *)(dst + r * 64 + ((chunk ^ (r & 7)) * 8)) = w;
        }
    }
}

/* The epilogue of the tile of my_tiles index `my_tile`: threads 0..255
 * (two warpgroups) hold its accumulators. gemm13 activates gate and up
 * into p.act; gemm2 scales by the router weight into the slot's row of p.y. */
template <int BM, int BN, bool GATED, int ACC>
MI4_DEVICE void store_tile(const gemm_params &p, const float (&acc)[ACC], int64_t my_tile,
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
}

/* Persistent: each block walks tiles blockIdx.x, + gridDim.x, ... (panel
 * order, tile_coords) as one flattened sequence of k tiles, so the next
 * tile's loads are in flight while this one's epilogue runs; the grid is one
 * block per SM. Loads run two k tiles ahead and one wgmma group stays in
 * flight, so the stage being refilled was read two groups ago. INT4: the
 * codes run three k tiles ahead (in the group of the token rows two ahead),
 * and each step dequantizes the next k tile's codes into its weight stage
 * while its own and the previous step's wgmmas run (that stage was read
 * three steps ago); q is unused otherwise. */
template <int BM, int BN, bool GATED, bool INT4>
__global__ void __launch_bounds__(WG_THREADS, 1) wgmma_gemm(gemm_params p, mi4_hip_int4_matrix q)
{
#if defined(MI4_HAVE_WGMMA)
    typedef wgmma_shape<BM, BN, INT4> shape;
    constexpr int WGC = shape::wg_cols, AHEAD = WG_STAGES - 2;
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * BM * WG_BK;
    uint8_t *smem_codes = (uint8_t *)(smem_b + WG_STAGES * BN * WG_BK); /* INT4 */

    const int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2)
                                : (p.out_cols + BN - 1) / BN;
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int k_tiles = (p.inner + WG_BK - 1) / WG_BK;
    const int tid = (int)threadIdx.x;

    const uint16_t *a_ptr[shape::a_rows], *b_ptr[INT4 ? 1 : shape::b_rows];
    int64_t loader_tile = -1; /* the my_tiles index whose row pointers are held */
    /* INT4: the weight rows (row numbers) of the tiles whose codes are being
     * loaded and dequantized: three and one k tiles ahead, maybe other tiles */
    int64_t code_rows[shape::code_rows], dequant_rows[shape::code_rows];
    int64_t code_tile = -1, dequant_tile = -1;
    auto rows_of_tile = [&](int64_t j, int64_t (&rows)[shape::code_rows]) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int expert = p.tile_expert[tile];
#pragma unroll
        for (int i = 0; i < shape::code_rows; i++)
            rows[i] = b_row_number<BN, WGC, GATED>(p, expert, out_tile,
                                                   tid / 2 + i * (WG_THREADS / 2));
    };
    /* Steps are named by (my_tiles index j, k tile k): no 64-bit division
     * in the loop (ncu: it was most of the INT4 kernel's instructions). */
    auto after = [&](int64_t j, int k, int d, int64_t *j_out, int *k_out) {
        k += d;
        while (k >= k_tiles) {
            k -= k_tiles;
            j++;
        }
        *j_out = j;
        *k_out = k;
    };
    auto issue = [&](int64_t j, int k_tile, int stage) {
        if (j < my_tiles) {
            if (j != loader_tile) {
                int tile, out_tile, slot;
                tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
                int expert = p.tile_expert[tile];
#pragma unroll
                for (int i = 0; i < shape::a_rows; i++)
                    a_ptr[i] = a_row<BM, GATED>(p, tile, tid / 8 + i * (WG_THREADS / 8), &slot);
                if (!INT4)
#pragma unroll
                    for (int i = 0; i < shape::b_rows; i++)
                        b_ptr[i] = b_row<BN, WGC, GATED>(p, expert, out_tile,
                                                         tid / 8 + i * (WG_THREADS / 8));
                loader_tile = j;
            }
            load_swizzled(smem_a + stage * BM * WG_BK, a_ptr, k_tile, p.inner, p.a);
            if (!INT4)
                load_swizzled(smem_b + stage * BN * WG_BK, b_ptr, k_tile, p.inner, p.b);
        }
    };
    auto issue_codes = [&](int64_t j, int k_tile, int stage) { /* INT4 */
        if (j < my_tiles) {
            if (j != code_tile) {
                rows_of_tile(j, code_rows);
                code_tile = j;
            }
            load_codes<BN>(smem_codes + stage * shape::code_stage, code_rows, k_tile, q);
        }
    };
    code_params<BN> params; /* INT4: of the next step to dequantize */
    auto fetch_params = [&](int64_t j, int k_tile) {
        if (j < my_tiles) {
            if (j != dequant_tile) {
                rows_of_tile(j, dequant_rows);
                dequant_tile = j;
            }
            load_params<BN>(params, dequant_rows, k_tile, q);
        }
    };
    /* INT4: codes of step (j, k_tile) landed, its parameters fetched; then
     * fetches the next step's parameters */
    auto dequant = [&](int64_t j, int k_tile, int stage) {
        if (j < my_tiles) {
            dequant_codes<BN>(smem_b + stage * BN * WG_BK, smem_codes + stage * shape::code_stage,
                              params, k_tile, q);
            int64_t next_j;
            int next_k;
            after(j, k_tile, 1, &next_j, &next_k);
            fetch_params(next_j, next_k);
        }
    };

    float acc[shape::acc];
#pragma unroll
    for (int i = 0; i < shape::acc; i++)
        acc[i] = 0.0f;
    /* groups: {A 0, codes 0, 1}, {A 1, codes 2}, then {A s + 2, codes s + 3}
     * at step s: group s holds step s's token rows and step s + 1's codes */
    int64_t j1;
    int k1;
    after(0, 0, 1, &j1, &k1);
    issue(0, 0, 0);
    if (INT4) {
        issue_codes(0, 0, 0);
        issue_codes(j1, k1, 1);
    }
    mi4_copy_commit();
    issue(j1, k1, 1);
    if (INT4) {
        int64_t j2;
        int k2;
        after(0, 0, 2, &j2, &k2);
        issue_codes(j2, k2, 2);
    }
    mi4_copy_commit();
    if (INT4) {
        fetch_params(0, 0);
        mi4_copy_wait<1>();
        dequant(0, 0, 0); /* seen by step 0's wgmma after its fence and barrier */
    }
    const int warpgroup = tid / 128;
    const int wg_row = BM == 128 ? warpgroup * 64 : 0, wg_col = BM == 128 ? 0 : warpgroup * WGC;
    /* The k loop nested in the tile loop: the flattened loop of one
     * sequence with the epilogue behind a branch made ptxas serialize every
     * wgmma (C7518: accumulators touched in a path it took for divergent). */
    int64_t step = 0;
    for (int64_t my_tile = 0; my_tile < my_tiles; my_tile++) {
        for (int k_tile = 0; k_tile < k_tiles; k_tile++, step++) {
            mi4_copy_wait<AHEAD - 1>();
            mi4_fence_proxy_async(); /* INT4: the dequantized stores, for wgmma */
            __syncthreads();
            int64_t j_ahead;
            int k_ahead;
            after(my_tile, k_tile, AHEAD, &j_ahead, &k_ahead);
            issue(j_ahead, k_ahead, (int)((step + AHEAD) & (WG_STAGES - 1)));
            if (INT4) {
                after(my_tile, k_tile, AHEAD + 1, &j_ahead, &k_ahead);
                issue_codes(j_ahead, k_ahead, (int)((step + AHEAD + 1) & (WG_STAGES - 1)));
            }
            mi4_copy_commit();
            const int stage = (int)(step & (WG_STAGES - 1));
            uint64_t desc_a = mi4_wgmma_desc(smem_a + stage * BM * WG_BK + wg_row * WG_BK);
            uint64_t desc_b = mi4_wgmma_desc(smem_b + stage * BN * WG_BK + wg_col * WG_BK);
            mi4_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++) /* +32 bytes of k: the address counts 16 B */
                wgmma_step(acc, desc_a + 2 * kk, desc_b + 2 * kk);
            mi4_wgmma_commit();
            if (INT4) { /* while this step's and the last step's wgmmas run */
                int64_t j_next;
                int k_next;
                after(my_tile, k_tile, 1, &j_next, &k_next);
                /* its codes came in the group waited for above */
                dequant(j_next, k_next, (int)((step + 1) & (WG_STAGES - 1)));
            }
            mi4_wgmma_wait_one();
        }

        /* The tile's epilogue (the next tile's loads fly on). */
        mi4_wgmma_wait_all();
        mi4_fence_registers(acc);
        store_tile<BM, BN, GATED>(p, acc, my_tile, row_tiles, out_tiles);
#pragma unroll
        for (int i = 0; i < shape::acc; i++)
            acc[i] = 0.0f;
    }
    mi4_copy_wait<0>();
#else
    (void)p;
    (void)q;
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}

/* Warp-specialized (BF16 weights): a producer warpgroup (threads 256..383)
 * copies both operands into the stages and the two consumer warpgroups
 * only wait for a stage, issue its wgmmas and release it, so no block-wide
 * barrier sits in the k loop (ncu on the kernel above: dispatch stalls and
 * fixed-latency waits were half its time, 2026-12-03). A stage is `full`
 * once each producer warp's copies of it have landed and been fenced for
 * the async proxy (WS_LAG steps after it issued them) and `empty` once every
 * consumer warp's wgmmas on it have completed: one arrival a warp. */
constexpr int WS_PRODUCERS = 128, WS_THREADS = WG_THREADS + WS_PRODUCERS;
/* setmaxnreg: the consumers' raise waits for what the producer gives back,
 * so 128 x 104 + 256 x 200 must not exceed the launch's 384 x 168 (at 56
 * and 88 ptxas spilled the producers' row pointers). Tried on the H200,
 * 2026-12-04: the row numbers re-read from shared memory each k tile at
 * 120 + 192 (no spills) made the GEMMs 11-29% slower. */
constexpr int WS_PRODUCER_REGS = 104, WS_CONSUMER_REGS = 200;
/* a stage is signalled once the copies of the step after it are issued
 * (two steps after: 2-6% slower on the H200, 2026-12-04) */
constexpr int WS_LAG = 1;

template <int BM, int BN> constexpr int ws_smem()
{
    return WG_STAGES * (BM + BN) * WG_BK * 2 + 2 * WG_STAGES * 8 + 1024; /* + align */
}

/* A producer thread's part of one k tile of COUNT x 16 rows: chunk ptid % 8
 * of rows ptid / 8 + 16 i (a warp copies 4 whole 128-byte rows a copy;
 * NULL rows: zeros). */
template <int COUNT>
MI4_DEVICE void copy_rows(uint16_t *dst, const uint16_t *const (&rows)[COUNT], int k_tile,
                          int inner, const uint16_t *fallback)
{
    const int ptid = (int)threadIdx.x - WG_THREADS, c = ptid % 8;
    const int k = k_tile * WG_BK + c * 8;
#pragma unroll
    for (int i = 0; i < COUNT; i++) {
        const int r = ptid / 8 + 16 * i;
        const bool valid = rows[i] != nullptr && k < inner;
        mi4_copy16(dst + r * 64 + ((c ^ (r & 7)) * 8), valid ? rows[i] + k : fallback, valid);
    }
}

#if defined(MI4_HAVE_WGMMA)
template <int BM, int BN, bool GATED>
MI4_DEVICE void produce_stages(const gemm_params &p, uint16_t *smem_a, uint16_t *smem_b,
                               uint64_t *full, uint64_t *empty, int row_tiles, int out_tiles,
                               int64_t my_tiles, int k_tiles)
{
    static_assert(WS_LAG < WG_STAGES, "a stage is released before its next fill is waited for");
    constexpr int WGC = wgmma_shape<BM, BN>::wg_cols;
    const int ptid = (int)threadIdx.x - WG_THREADS, lane = ptid % 32;
    const uint16_t *a_rows[BM / 16], *b_rows[BN / 16];
    auto signal = [&](int64_t s) { /* this warp's copies of step s landed */
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
#pragma unroll
        for (int i = 0; i < BN / 16; i++)
            b_rows[i] = b_row<BN, WGC, GATED>(p, expert, out_tile, ptid / 8 + 16 * i);
        for (int k = 0; k < k_tiles; k++, step++) {
            const int stage = (int)(step & (WG_STAGES - 1));
            mi4_mbar_wait(&empty[stage], (unsigned)((step / WG_STAGES) & 1) ^ 1u);
            copy_rows(smem_a + stage * BM * WG_BK, a_rows, k, p.inner, p.a);
            copy_rows(smem_b + stage * BN * WG_BK, b_rows, k, p.inner, p.b);
            mi4_copy_commit();
            if (step >= WS_LAG) {
                mi4_copy_wait<WS_LAG>();
                signal(step - WS_LAG);
            }
        }
    }
    mi4_copy_wait<0>();
    for (int64_t s = step > WS_LAG ? step - WS_LAG : 0; s < step; s++)
        signal(s);
}
#endif

/* Persistent, one block an SM, tiles in the order of wgmma_gemm; the
 * consumers' epilogue of one tile runs while the producer fills the next
 * tile's stages. */
template <int BM, int BN, bool GATED>
__global__ void __launch_bounds__(WS_THREADS, 1) wgmma_gemm_ws(gemm_params p)
{
#if defined(MI4_HAVE_WGMMA)
    typedef wgmma_shape<BM, BN> shape;
    constexpr int WGC = shape::wg_cols;
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * BM * WG_BK;
    uint64_t *full = (uint64_t *)(smem_b + WG_STAGES * BN * WG_BK), *empty = full + WG_STAGES;

    const int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2)
                                : (p.out_cols + BN - 1) / BN;
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int k_tiles = (p.inner + WG_BK - 1) / WG_BK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < WG_STAGES; s++) {
            mi4_mbar_init(&full[s], WS_PRODUCERS / 32);
            mi4_mbar_init(&empty[s], WG_THREADS / 32);
        }
        mi4_mbar_init_fence();
    }
    __syncthreads();
    if ((int)threadIdx.x >= WG_THREADS) {
        mi4_regs_lower<WS_PRODUCER_REGS>();
        produce_stages<BM, BN, GATED>(p, smem_a, smem_b, full, empty, row_tiles, out_tiles,
                                      my_tiles, k_tiles);
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
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}
#endif

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
/* Which BF16 GEMMs take the warp-specialized kernel: gemm2 (the default;
 * on the H200 it was 7-12% faster there, and 15% slower for gemm13,
 * 2026-12-04), both (MOEINT4_HIP_WGMMA_PIPE=ws) or neither ("sync": the
 * kernel whose warps all copy and meet at a barrier each k tile). */
bool warp_specialized(bool gated)
{
    const char *knob = getenv("MOEINT4_HIP_WGMMA_PIPE");
    if (knob != nullptr && strcmp(knob, "sync") == 0)
        return false;
    return !gated || (knob != nullptr && strcmp(knob, "ws") == 0);
}
#endif

template <int BM, int BN, bool GATED, bool INT4>
hipError_t launch_wgmma(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    constexpr int smem = wgmma_shape<BM, BN, INT4>::smem;
    if (init) {
        hipError_t e = hipFuncSetAttribute((const void *)wgmma_gemm<BM, BN, GATED, INT4>,
                                           hipFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e == hipSuccess && !INT4)
            e = hipFuncSetAttribute((const void *)wgmma_gemm_ws<BM, BN, GATED>,
                                    hipFuncAttributeMaxDynamicSharedMemorySize, ws_smem<BM, BN>());
        return e;
    }
    gemm_params p = make_params(a, GATED);
    const mi4_hip_int4_matrix q = INT4 ? (GATED ? a->weights->q13 : a->weights->q2)
                                       : mi4_hip_int4_matrix{};
    int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2) : (p.out_cols + BN - 1) / BN;
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    if (blocks == 0)
        return hipSuccess;
    blocks = blocks < sms ? blocks : sms; /* persistent: one block per SM */
    if (!INT4 && warp_specialized(GATED))
        return mi4_launch(wgmma_gemm_ws<BM, BN, GATED>, dim3((unsigned)blocks), dim3(WS_THREADS),
                          ws_smem<BM, BN>(), a->stream, p);
    return mi4_launch(wgmma_gemm<BM, BN, GATED, INT4>, dim3((unsigned)blocks), dim3(WG_THREADS),
                      smem, a->stream, p, q);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never called: mi4_hip_wgmma_built() is 0 */
#endif
}

template <bool INT4>
hipError_t launch_wgmma_of(int bm, int bn, bool gated, const mi4_hip_gemm_args *a, bool init)
{
    if (bm == 64)
        return gated ? launch_wgmma<64, 256, true, INT4>(a, init)
                     : launch_wgmma<64, 256, false, INT4>(a, init);
    if (bn == 128)
        return gated ? launch_wgmma<128, 128, true, INT4>(a, init)
                     : launch_wgmma<128, 128, false, INT4>(a, init);
    return gated ? launch_wgmma<128, 256, true, INT4>(a, init)
                 : launch_wgmma<128, 256, false, INT4>(a, init);
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
    return launch_wgmma_of<false>(bm, bn, gated, a, init);
}

hipError_t mi4_hip_launch_wgmma_dequant(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                        bool init)
{
    return launch_wgmma_of<true>(bm, bn, gated, a, init);
}
