/* The grouped BF16 GEMMs of the expert MLP over routed row tiles.
 *
 * Each block computes a BM x BN output tile of one expert. Rows come from the
 * routing (sorted slots, padded to BM per expert); operands are staged
 * through shared memory in a STAGES-deep pipeline of 16-byte copies; the
 * inner step is matrix_core.h's 16x16x16 tile (matrix cores or plain FMA).
 *
 *   gemm13: A = x rows (gathered by slot), B = w13[e] rows. Each warp's
 *           WN columns are WN/2 gate rows followed by the WN/2 matching up
 *           rows, so a lane holds gate and up of the same output in
 *           fragments j and j + WN/32: the activation is applied in the
 *           epilogue and only act [rows][N] (bf16) is written.
 *   gemm2:  A = act rows, B = w2[e]; the epilogue scales by the router
 *           weight and writes f32 rows per slot for the combine. */
#include <limits.h>
#include <math.h>

#include "hip_internal.h"
#include "matrix_core.h"

namespace {

struct gemm_params {
    const uint16_t *a;
    int a_by_slot;          /* gemm13: 1 = a row per slot, 0 = per token (slot / topk) */
    const uint16_t *b;      /* [E_l][b_rows][inner] */
    int b_rows;
    int inner;              /* reduction length (K for gemm13, N for gemm2) */
    int out_cols;           /* N for gemm13 (activated outputs), K for gemm2 */
    int topk;
    const int *sorted_slot;
    const int *tile_expert;
    const int *status;      /* [2] = number of row tiles */
    uint16_t *act;
    float *y;
    const float *topk_weights;
    int weight_on_output;
    int activation;
    float limit, alpha, beta;
    /* decode GEMV fusions */
    const int32_t *topk_ids;
    const int32_t *expert_map;
    int num_slots, num_experts;
    int *route_status, *route_sorted, *route_tile_expert;
    int *done_counter;
    mi4_combine_params combine;
};

__device__ float activate(int kind, float gate, float up, float limit, float alpha, float beta)
{
    if (kind == MOEINT4_ACTIVATION_GELU)
        return 0.5f * gate * (1.0f + erff(gate * 0.70710678118654752f)) * up;
    if (kind == MOEINT4_ACTIVATION_SWIGLU_CLAMP) {
        float g = fminf(gate, limit);
        float u = fminf(fmaxf(up, -limit), limit);
        return (u + beta) * g / (1.0f + expf(-alpha * g));
    }
    return gate / (1.0f + expf(-gate)) * up;
}

/* One k16 step of a warp's FM x FN fragments. */
template <int FM, int FN, int LD>
__device__ __forceinline__ void fma_step(mi4_frag_acc (&acc)[FM][FN], const uint16_t *sa,
                                         const uint16_t *sb)
{
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            mi4_fma_tile(acc[i][j], sa + i * 16 * LD, LD, sb + j * 16 * LD, LD);
}

template <int FM, int FN, int LD>
__device__ __forceinline__ void mma_step(mi4_frag_acc (&acc)[FM][FN], const uint16_t *sa,
                                         const uint16_t *sb)
{
#if MI4_HAVE_MATRIX_CORES
    mi4_frag_a fa[FM];
    mi4_frag_b fb[FN];
#pragma unroll
    for (int i = 0; i < FM; i++)
        mi4_load_a(fa[i], sa + i * 16 * LD, LD);
#pragma unroll
    for (int j = 0; j < FN; j++)
        mi4_load_b(fb[j], sb + j * 16 * LD, LD);
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            mi4_mma(acc[i][j], fa[i], fb[j]);
#else
    fma_step<FM, FN, LD>(acc, sa, sb);
#endif
}

/* Row pointers of one output tile: A rows from the routed slots (NULL for
 * padding), B rows from the expert's weights. gemm13 columns come in groups
 * of WN: WN/2 gate rows, then the WN/2 up rows of the same outputs. */
template <int BM, int BN, int WN, int THREADS, bool GATED>
__device__ __forceinline__ void setup_rows(const gemm_params &p, int tile, int out_tile,
                                           int expert, const uint16_t **a_rows,
                                           const uint16_t **b_rows, int *row_slot)
{
    const int tid = (int)threadIdx.x;
    for (int r = tid; r < BM; r += THREADS) {
        int slot = p.sorted_slot[(size_t)tile * BM + r];
        row_slot[r] = slot;
        const uint16_t *row = nullptr;
        if (slot >= 0) {
            size_t index = GATED ? (size_t)(p.a_by_slot ? slot : slot / p.topk)
                                 : (size_t)tile * BM + r;
            row = p.a + index * (size_t)p.inner;
        }
        a_rows[r] = row;
    }
    for (int c = tid; c < BN; c += THREADS) {
        int out_col, b_row;
        if (GATED) {
            int warp_col = c / WN, within = c % WN;
            out_col = out_tile * (BN / 2) + warp_col * (WN / 2) + within % (WN / 2);
            b_row = within < WN / 2 ? out_col : p.out_cols + out_col;
        } else {
            out_col = out_tile * BN + c;
            b_row = out_col;
        }
        b_rows[c] = out_col < p.out_cols
                        ? p.b + ((size_t)expert * p.b_rows + (size_t)b_row) * (size_t)p.inner
                        : nullptr;
    }
}

/* Copies k [k0, k0 + BK) of ROWS rows into shared memory, 16 bytes per copy,
 * zero-filling padding rows and k past `inner`. Plain layout: row stride ld
 * elements. SWIZZLE_128B (BK = 64, ld ignored): 128-byte rows whose 16-byte
 * chunk c of row r sits at chunk c ^ (r % 8), the layout wgmma reads. */
template <int ROWS, int BK, int THREADS, bool SWIZZLE_128B>
__device__ __forceinline__ void load_rows(uint16_t *dst, int ld, const uint16_t *const *rows,
                                          int k0, int inner, const uint16_t *fallback)
{
    constexpr int CHUNKS_PER_ROW = BK / 8;
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int i = 0; i < (ROWS * CHUNKS_PER_ROW + THREADS - 1) / THREADS; i++) {
        int chunk = tid + i * THREADS;
        if (chunk < ROWS * CHUNKS_PER_ROW) {
            int r = chunk / CHUNKS_PER_ROW, c = chunk % CHUNKS_PER_ROW, k = k0 + c * 8;
            const uint16_t *src = rows[r];
            bool valid = src != nullptr && k < inner;
            uint16_t *to = SWIZZLE_128B ? dst + r * 64 + ((c ^ (r & 7)) * 8) : dst + r * ld + c * 8;
            mi4_copy16(to, valid ? src + k : fallback, valid);
        }
    }
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES> struct tile_shape {
    static constexpr int warps = (BM / WM) * (BN / WN);
    static constexpr int threads = warps * MI4_WARP;
    static constexpr int ld = BK + 8; /* padding keeps fragment loads off one bank */
    static constexpr int smem_bytes = STAGES * (BM + BN) * ld * 2;
};

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool MMA, bool GATED>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * MI4_WARP)
    grouped_gemm(gemm_params p)
{
    typedef tile_shape<BM, BN, BK, WM, WN, STAGES> shape;
    constexpr int LD = shape::ld;
    constexpr int THREADS = shape::threads;
    constexpr int FM = WM / 16, FN = WN / 16;
    extern __shared__ uint4 smem_raw[];
    uint16_t *smem_a = (uint16_t *)smem_raw;
    uint16_t *smem_b = smem_a + STAGES * BM * LD;
    __shared__ const uint16_t *a_rows[BM];
    __shared__ const uint16_t *b_rows[BN];
    __shared__ int row_slot[BM];

    const int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2)
                                : (p.out_cols + BN - 1) / BN;
    const int tile = (int)(blockIdx.x / out_tiles);
    const int out_tile = (int)(blockIdx.x % out_tiles);
    if (tile >= p.status[2])
        return;
    const int expert = p.tile_expert[tile];
    const int tid = (int)threadIdx.x;

    setup_rows<BM, BN, WN, THREADS, GATED>(p, tile, out_tile, expert, a_rows, b_rows, row_slot);
    __syncthreads();

    const int k_tiles = (p.inner + BK - 1) / BK;
    auto load_stage = [&](int stage, int k_tile) {
        load_rows<BM, BK, THREADS, false>(smem_a + stage * BM * LD, LD, a_rows, k_tile * BK,
                                          p.inner, p.a);
        load_rows<BN, BK, THREADS, false>(smem_b + stage * BN * LD, LD, b_rows, k_tile * BK,
                                          p.inner, p.b);
    };

    mi4_frag_acc acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
#pragma unroll
            for (int e = 0; e < MI4_ACC_PER_LANE; e++)
                acc[i][j].v[e] = 0.0f;

    const int warp = tid / MI4_WARP;
    const int warp_row = (warp / (BN / WN)) * WM;
    const int warp_col = (warp % (BN / WN)) * WN;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < k_tiles)
            load_stage(s, s);
        mi4_copy_commit();
    }
    for (int kt = 0; kt < k_tiles; kt++) {
        mi4_copy_wait<STAGES - 2>();
        __syncthreads();
        int next = kt + STAGES - 1;
        if (next < k_tiles)
            load_stage(next % STAGES, next);
        mi4_copy_commit();

        const uint16_t *sa = smem_a + (kt % STAGES) * BM * LD + warp_row * LD;
        const uint16_t *sb = smem_b + (kt % STAGES) * BN * LD + warp_col * LD;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            if (MMA && MI4_HAVE_MATRIX_CORES)
                mma_step<FM, FN, LD>(acc, sa + kk, sb + kk);
            else
                fma_step<FM, FN, LD>(acc, sa + kk, sb + kk);
        }
    }
    mi4_copy_wait<0>();

    /* NVIDIA lanes hold column pairs: one 4- or 8-byte store per pair. */
    constexpr int STEP = MI4_ACC_PAIRS ? 2 : 1;
    if (GATED) {
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
            for (int j = 0; j < FN / 2; j++)
#pragma unroll
                for (int e = 0; e < MI4_ACC_PER_LANE; e += STEP) {
                    int r = warp_row + i * 16 + mi4_acc_row(e);
                    int n = out_tile * (BN / 2) + (warp_col / 2) + j * 16 + mi4_acc_col(e);
                    if (row_slot[r] < 0 || n >= p.out_cols)
                        continue;
                    uint16_t *dst = p.act + ((size_t)tile * BM + r) * (size_t)p.out_cols + n;
                    uint32_t v0 = mi4_dev_f32_to_bf16(activate(p.activation, acc[i][j].v[e],
                                                               acc[i][j + FN / 2].v[e], p.limit,
                                                               p.alpha, p.beta));
                    if (STEP == 2) {
                        /* out_cols is a multiple of 8, so n + 1 is in range too */
                        uint32_t v1 = mi4_dev_f32_to_bf16(
                            activate(p.activation, acc[i][j].v[e + STEP - 1],
                                     acc[i][j + FN / 2].v[e + STEP - 1], p.limit, p.alpha, p.beta));
                        *(uint32_t *)dst = v0 | (v1 << 16);
                    } else {
                        *dst = (uint16_t)v0;
                    }
                }
    } else {
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
            for (int j = 0; j < FN; j++)
#pragma unroll
                for (int e = 0; e < MI4_ACC_PER_LANE; e += STEP) {
                    int r = warp_row + i * 16 + mi4_acc_row(e);
                    int c = out_tile * BN + warp_col + j * 16 + mi4_acc_col(e);
                    int slot = row_slot[r];
                    if (slot < 0 || c >= p.out_cols)
                        continue;
                    float w = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
                    float *dst = p.y + (size_t)slot * (size_t)p.out_cols + c;
                    if (STEP == 2)
                        *(float2 *)dst = make_float2(acc[i][j].v[e] * w,
                                                     acc[i][j].v[e + STEP - 1] * w);
                    else
                        *dst = acc[i][j].v[e] * w;
                }
    }
}

/* Decode: few rows per expert, so the weights are streamed straight from
 * global memory into registers (16 bytes per lane and row, UNROLL chunks in
 * flight) and multiplied on the FMA units; no shared-memory staging, no
 * matrix cores. A warp owns ROWS weight rows (gemm13: the gate and up rows
 * of ROWS/2 outputs) and up to TOKENS token rows of one routed tile, sums
 * over the lanes in a fixed butterfly order, and runs the same epilogues. */
constexpr int GEMV_TOKENS = 8; /* = the routing tile of MI4_TILE_GEMV */
constexpr int GEMV_ROWS = 4;
constexpr int GEMV_WARPS = 8;
constexpr int GEMV_UNROLL = 2;

MI4_DEVICE void bf16x8_to_f32(const uint4 &v, float (&f)[8])
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = mi4_dev_bits_to_f32(w[i] << 16);
        f[2 * i + 1] = mi4_dev_bits_to_f32(w[i] & 0xffff0000u);
    }
}

/* The streaming loop and epilogue of one warp over `tokens` rows of a tile. */
template <bool GATED>
__device__ __forceinline__ void gemv_rows(const gemm_params &p, int tile, int group, int expert,
                                          const int *row_slot, const uint16_t *const *a_rows,
                                          int tokens)
{
    constexpr int OUTS = GATED ? GEMV_ROWS / 2 : GEMV_ROWS; /* outputs per warp */
    constexpr int CHUNK = MI4_WARP * 8;                     /* k per lane-wide load */
    const int tid = (int)threadIdx.x;
    const int warp = tid / MI4_WARP, lane = tid % MI4_WARP;
    const int out0 = (group * GEMV_WARPS + warp) * OUTS;

    const uint16_t *w_rows[GEMV_ROWS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++) {
        int out = out0 + (GATED ? r % OUTS : r);
        int b_row = GATED && r >= OUTS ? p.out_cols + out : out;
        w_rows[r] = out < p.out_cols
                        ? p.b + ((size_t)expert * p.b_rows + (size_t)b_row) * (size_t)p.inner
                        : nullptr;
    }
    float acc[GEMV_ROWS][GEMV_TOKENS];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
        for (int t = 0; t < GEMV_TOKENS; t++)
            acc[r][t] = 0.0f;

    for (int k0 = lane * 8; k0 < p.inner; k0 += CHUNK * GEMV_UNROLL) {
        uint4 wv[GEMV_UNROLL][GEMV_ROWS];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++)
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++) {
                int k = k0 + u * CHUNK;
                wv[u][r] = w_rows[r] && k < p.inner ? *(const uint4 *)(w_rows[r] + k)
                                                    : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int k = k0 + u * CHUNK;
            float wf[GEMV_ROWS][8];
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++)
                bf16x8_to_f32(wv[u][r], wf[r]);
#pragma unroll
            for (int t = 0; t < GEMV_TOKENS; t++) {
                if (t >= tokens || k >= p.inner)
                    continue;
                float xf[8];
                bf16x8_to_f32(*(const uint4 *)(a_rows[t] + k), xf);
#pragma unroll
                for (int r = 0; r < GEMV_ROWS; r++)
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[r][t] = fmaf(wf[r][i], xf[i], acc[r][t]);
            }
        }
    }

#pragma unroll
    for (int t = 0; t < GEMV_TOKENS; t++) {
        if (t >= tokens)
            continue;
        float sums[GEMV_ROWS];
#pragma unroll
        for (int r = 0; r < GEMV_ROWS; r++)
            sums[r] = mi4_warp_sum(acc[r][t]);
        if (lane != 0)
            continue;
        int slot = row_slot[t];
        if (GATED) {
#pragma unroll
            for (int j = 0; j < OUTS; j++)
                if (out0 + j < p.out_cols)
                    p.act[((size_t)tile * GEMV_TOKENS + t) * (size_t)p.out_cols + out0 + j] =
                        mi4_dev_f32_to_bf16(activate(p.activation, sums[j], sums[OUTS + j],
                                                     p.limit, p.alpha, p.beta));
        } else {
            float w = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
#pragma unroll
            for (int r = 0; r < GEMV_ROWS; r++)
                if (out0 + r < p.out_cols)
                    p.y[(size_t)slot * (size_t)p.out_cols + out0 + r] = sums[r] * w;
        }
    }
}

/* gemm13 of a small batch routes itself: every block reads the (at most
 * MI4_FUSED_ROUTE_SLOTS) ids, orders the slots by local expert (slot order
 * inside an expert, GEMV_TOKENS rows per tile) and finds its tile's rows;
 * block 0 also publishes the routing (status, tiles, sorted slots) for gemm2
 * and the combine. Returns the number of tiles (0 after a bad id). */
__device__ int gemv_fused_route(const gemm_params &p, int tile, int *row_slot, int *expert)
{
    __shared__ int local_of[MI4_FUSED_ROUTE_SLOTS], count_of[MI4_FUSED_ROUTE_SLOTS];
    __shared__ int first_of[MI4_FUSED_ROUTE_SLOTS];
    __shared__ int first_bad, tiles, tile_expert;
    const int tid = (int)threadIdx.x, slots = p.num_slots;
    if (tid == 0) {
        first_bad = INT_MAX;
        tiles = 0;
        tile_expert = -1;
    }
    if (tid < GEMV_TOKENS)
        row_slot[tid] = -1;
    __syncthreads();
    int local = -1;
    if (tid < slots) {
        int id = p.topk_ids[tid];
        if (id < 0 || id >= p.num_experts)
            atomicMin(&first_bad, tid);
        else
            local = p.expert_map[id];
        local_of[tid] = local;
    }
    __syncthreads();
    if (first_bad != INT_MAX) {
        if (blockIdx.x == 0 && tid == 0) {
            p.route_status[0] = 1;
            p.route_status[1] = first_bad;
            p.route_status[2] = 0;
        }
        return 0;
    }
    int before = 0, count = 0;
    if (local >= 0)
        for (int s = 0; s < slots; s++)
            if (local_of[s] == local) {
                count++;
                before += s < tid;
            }
    if (tid < slots) {
        count_of[tid] = count;
        first_of[tid] = local >= 0 && before == 0;
    }
    __syncthreads();
    int my_tile = 0;
    if (local >= 0) {
        for (int s = 0; s < slots; s++)
            if (first_of[s] && local_of[s] < local)
                my_tile += (count_of[s] + GEMV_TOKENS - 1) / GEMV_TOKENS;
        if (before == 0)
            atomicAdd(&tiles, (count + GEMV_TOKENS - 1) / GEMV_TOKENS);
        if (my_tile + before / GEMV_TOKENS == tile) {
            row_slot[before % GEMV_TOKENS] = tid;
            tile_expert = local;
        }
    }
    __syncthreads();
    if (blockIdx.x == 0) {
        for (int i = tid; i < tiles * GEMV_TOKENS; i += (int)blockDim.x)
            p.route_sorted[i] = -1;
        __syncthreads();
        if (local >= 0) {
            p.route_sorted[(my_tile + before / GEMV_TOKENS) * GEMV_TOKENS + before % GEMV_TOKENS] =
                tid;
            if (before == 0)
                for (int t = 0; t < (count + GEMV_TOKENS - 1) / GEMV_TOKENS; t++)
                    p.route_tile_expert[my_tile + t] = local;
        }
        if (tid == 0) {
            p.route_status[0] = 0;
            p.route_status[1] = -1;
            p.route_status[2] = tiles;
        }
    }
    *expert = tile_expert;
    return tiles;
}

/* Decode: FUSED routes inside gemm13 (gemv_fused_route) and, in gemm2, lets
 * the last block to finish run the combine (a ticket counter, integer
 * atomics only; the sums themselves keep their fixed order). */
template <bool GATED, bool FUSED>
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, 2) decode_gemv(gemm_params p)
{
    constexpr int OUTS = GATED ? GEMV_ROWS / 2 : GEMV_ROWS;
    const int groups = (p.out_cols + GEMV_WARPS * OUTS - 1) / (GEMV_WARPS * OUTS);
    const int tile = (int)(blockIdx.x / groups);
    const int group = (int)(blockIdx.x % groups);
    const int tid = (int)threadIdx.x;
    __shared__ int row_slot[GEMV_TOKENS];
    __shared__ const uint16_t *a_rows[GEMV_TOKENS];
    __shared__ int valid_rows;
    int expert = -1;
    bool active;
    if (GATED && FUSED) {
        active = tile < gemv_fused_route(p, tile, row_slot, &expert);
    } else {
        active = tile < p.status[2];
        if (active) {
            expert = p.tile_expert[tile];
            if (tid < GEMV_TOKENS)
                row_slot[tid] = p.sorted_slot[(size_t)tile * GEMV_TOKENS + tid];
        }
    }
    if (active) {
        if (tid == 0)
            valid_rows = 0;
        __syncthreads();
        if (tid < GEMV_TOKENS) {
            int slot = row_slot[tid];
            size_t index = GATED ? (size_t)(p.a_by_slot ? slot : slot / p.topk)
                                 : (size_t)tile * GEMV_TOKENS + tid;
            a_rows[tid] = slot >= 0 ? p.a + index * (size_t)p.inner : nullptr;
            if (slot >= 0)
                atomicAdd(&valid_rows, 1); /* valid rows come first in a tile */
        }
        __syncthreads();
        gemv_rows<GATED>(p, tile, group, expert, row_slot, a_rows, valid_rows);
    }
    if (!GATED && FUSED) {
        __shared__ int ticket;
        __threadfence();
        __syncthreads();
        if (tid == 0)
            ticket = atomicAdd(p.done_counter, 1);
        __syncthreads();
        if (ticket == (int)gridDim.x - 1) {
            __threadfence();
            if (mi4_combine_status(p.combine, tid == 0))
                mi4_combine_quads(p.combine, tid, (int64_t)blockDim.x);
            if (tid == 0)
                *p.done_counter = 0; /* ready for the next forward on this workspace */
        }
    }
}

#if defined(MI4_PLATFORM_NVIDIA)
/* Prefill on Hopper: 128 x BN tiles, two warpgroups of 64 rows issuing
 * wgmma from 128B-swizzled shared tiles (BK = 64, 4 stages of cp.async).
 * Built only where MOEINT4_HIP_WGMMA says the sm_90a code exists. */
constexpr int WG_BM = 128, WG_BK = 64, WG_STAGES = 4, WG_THREADS = 256;

template <int BN> constexpr int wgmma_smem_bytes()
{
    return WG_STAGES * (WG_BM + BN) * WG_BK * 2 + 1024; /* + alignment slack */
}

template <int BN, bool GATED>
__global__ void __launch_bounds__(WG_THREADS, 1) wgmma_gemm(gemm_params p)
{
#if defined(MI4_HAVE_WGMMA)
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * WG_BM * WG_BK;
    __shared__ const uint16_t *a_rows[WG_BM];
    __shared__ const uint16_t *b_rows[BN];
    __shared__ int row_slot[WG_BM];

    const int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2)
                                : (p.out_cols + BN - 1) / BN;
    const int tile = (int)(blockIdx.x / out_tiles);
    const int out_tile = (int)(blockIdx.x % out_tiles);
    if (tile >= p.status[2])
        return;
    const int expert = p.tile_expert[tile];
    const int tid = (int)threadIdx.x;
    setup_rows<WG_BM, BN, BN, WG_THREADS, GATED>(p, tile, out_tile, expert, a_rows, b_rows,
                                                 row_slot);
    __syncthreads();

    const int k_tiles = (p.inner + WG_BK - 1) / WG_BK;
    auto load_stage = [&](int stage, int k_tile) {
        load_rows<WG_BM, WG_BK, WG_THREADS, true>(smem_a + stage * WG_BM * WG_BK, 0, a_rows,
                                                  k_tile * WG_BK, p.inner, p.a);
        load_rows<BN, WG_BK, WG_THREADS, true>(smem_b + stage * BN * WG_BK, 0, b_rows,
                                               k_tile * WG_BK, p.inner, p.b);
    };
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        acc[i] = 0.0f;
    /* Loads run WG_STAGES - 2 tiles ahead and one wgmma group stays in
     * flight, so the stage being refilled was read two groups ago. */
    constexpr int AHEAD = WG_STAGES - 2;
#pragma unroll
    for (int s = 0; s < AHEAD; s++) {
        if (s < k_tiles)
            load_stage(s, s);
        mi4_copy_commit();
    }
    const int warpgroup = tid / 128;
    for (int kt = 0; kt < k_tiles; kt++) {
        mi4_copy_wait<AHEAD - 1>();
        mi4_fence_proxy_async();
        __syncthreads();
        int next = kt + AHEAD;
        if (next < k_tiles)
            load_stage(next % WG_STAGES, next);
        mi4_copy_commit();
        int stage = kt % WG_STAGES;
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
    }
    mi4_wgmma_wait_all();
    mi4_fence_registers(acc);
    mi4_copy_wait<0>();

    const int lane = tid % 32;
    const int row0 = warpgroup * 64 + ((tid % 128) / 32) * 16 + lane / 4;
    const int col0 = 2 * (lane % 4);
    if (GATED) {
#pragma unroll
        for (int j = 0; j < BN / 16; j++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                int r = row0 + half * 8;
                int n = out_tile * (BN / 2) + 8 * j + col0;
                if (row_slot[r] < 0 || n >= p.out_cols)
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
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int half = 0; half < 2; half++) {
                int r = row0 + half * 8;
                int c = out_tile * BN + 8 * j + col0;
                int slot = row_slot[r];
                if (slot < 0 || c >= p.out_cols)
                    continue;
                float w = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
                const float *v = acc + 4 * j + 2 * half;
                *(float2 *)(p.y + (size_t)slot * (size_t)p.out_cols + c) =
                    make_float2(v[0] * w, v[1] * w);
            }
    }
#else
    (void)p;
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}
#endif

/* Pipeline depth: AMD copies complete at once, two stages suffice there
 * (and keep every tile within gfx90a's 64 KiB of LDS). */
#if defined(MI4_PLATFORM_NVIDIA)
#define DEEP 4
#else
#define DEEP 2
#endif

/* Deeper k steps where shared memory allows (AMD: 64 KiB of LDS). */
#if defined(MI4_PLATFORM_NVIDIA)
#define WIDE_K 64
#else
#define WIDE_K 32
#endif

/* BM, BN, BK, WM, WN, STAGES of each configuration (mi4_hip_tile_config). */
#define CONFIG_16 16, 64, 128, 16, 32, DEEP
#define CONFIG_16_NARROW 16, 32, 128, 16, 32, DEEP
#define CONFIG_64 64, 128, 32, 32, 64, DEEP
#define CONFIG_128 128, 128, 32, 64, 32, DEEP
#define CONFIG_128_DEEP 128, 128, WIDE_K, 64, 64, (DEEP > 3 ? 3 : DEEP)
#define CONFIG_256 128, 256, 32, 64, 64, DEEP

gemm_params make_params(const mi4_hip_gemm_args *a, bool gated)
{
    const mi4_hip_weights *w = a->weights;
    gemm_params p;
    p.a = gated ? a->x_bf16 : a->act;
    p.a_by_slot = a->x_per_slot;
    p.b = gated ? w->w13 : w->w2;
    p.b_rows = gated ? 2 * w->intermediate_size : w->hidden_size;
    p.inner = gated ? w->hidden_size : w->intermediate_size;
    p.out_cols = gated ? w->intermediate_size : w->hidden_size;
    p.topk = a->topk;
    p.sorted_slot = a->routing->sorted_slot;
    p.tile_expert = a->routing->tile_expert;
    p.status = a->routing->status;
    p.act = a->act;
    p.y = a->y;
    p.topk_weights = a->topk_weights;
    p.weight_on_output = a->weight_on_output;
    p.activation = a->activation;
    p.limit = a->limit;
    p.alpha = a->alpha;
    p.beta = a->beta;
    p.topk_ids = a->topk_ids;
    p.expert_map = w->expert_map;
    p.num_slots = (int)a->num_slots;
    p.num_experts = w->num_experts;
    p.route_status = a->routing->status;
    p.route_sorted = a->routing->sorted_slot;
    p.route_tile_expert = a->routing->tile_expert;
    p.done_counter = a->routing->status + 3;
    p.combine = a->combine;
    return p;
}

template <bool GATED> hipError_t launch_gemv(const mi4_hip_gemm_args *a)
{
    gemm_params p = make_params(a, GATED);
    constexpr int outs = GATED ? GEMV_ROWS / 2 : GEMV_ROWS;
    int groups = (p.out_cols + GEMV_WARPS * outs - 1) / (GEMV_WARPS * outs);
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)groups;
    if (blocks == 0)
        return hipSuccess;
    dim3 grid((unsigned)blocks), block(GEMV_WARPS * MI4_WARP);
    if (GATED ? a->fuse_route : a->fuse_combine)
        decode_gemv<GATED, true><<<grid, block, 0, a->stream>>>(p);
    else
        decode_gemv<GATED, false><<<grid, block, 0, a->stream>>>(p);
    return hipGetLastError();
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool GATED>
hipError_t launch(const mi4_hip_gemm_args *a, bool set_attributes_only)
{
    typedef tile_shape<BM, BN, BK, WM, WN, STAGES> shape;
    if (set_attributes_only) {
#if defined(MI4_PLATFORM_NVIDIA)
        if (shape::smem_bytes > 48 * 1024) {
            hipError_t e = hipFuncSetAttribute(
                (const void *)grouped_gemm<BM, BN, BK, WM, WN, STAGES, true, GATED>,
                hipFuncAttributeMaxDynamicSharedMemorySize, shape::smem_bytes);
            if (e == hipSuccess)
                e = hipFuncSetAttribute(
                    (const void *)grouped_gemm<BM, BN, BK, WM, WN, STAGES, false, GATED>,
                    hipFuncAttributeMaxDynamicSharedMemorySize, shape::smem_bytes);
            return e;
        }
#endif
        return hipSuccess;
    }
    gemm_params p = make_params(a, GATED);
    int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2) : (p.out_cols + BN - 1) / BN;
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    if (blocks == 0)
        return hipSuccess;
    dim3 grid((unsigned)blocks), block(shape::threads);
    if (a->use_mma)
        grouped_gemm<BM, BN, BK, WM, WN, STAGES, true, GATED>
            <<<grid, block, shape::smem_bytes, a->stream>>>(p);
    else
        grouped_gemm<BM, BN, BK, WM, WN, STAGES, false, GATED>
            <<<grid, block, shape::smem_bytes, a->stream>>>(p);
    return hipGetLastError();
}

template <int BN, bool GATED> hipError_t launch_wgmma(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    constexpr int smem = wgmma_smem_bytes<BN>();
    if (init)
        return hipFuncSetAttribute((const void *)wgmma_gemm<BN, GATED>,
                                   hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_params p = make_params(a, GATED);
    int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2) : (p.out_cols + BN - 1) / BN;
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    if (blocks == 0)
        return hipSuccess;
    wgmma_gemm<BN, GATED><<<dim3((unsigned)blocks), dim3(WG_THREADS), smem, a->stream>>>(p);
    return hipGetLastError();
#else
    /* no sm_90a code in this build: the matrix-core tile of the same shape */
    return launch<CONFIG_128, GATED>(a, init);
#endif
}

template <bool GATED>
hipError_t launch_config(mi4_hip_tile_config config, const mi4_hip_gemm_args *a, bool init)
{
    switch (config) {
    case MI4_TILE_16: return launch<CONFIG_16, GATED>(a, init);
    case MI4_TILE_16_NARROW: return launch<CONFIG_16_NARROW, GATED>(a, init);
    case MI4_TILE_64: return launch<CONFIG_64, GATED>(a, init);
    case MI4_TILE_128: return launch<CONFIG_128, GATED>(a, init);
    case MI4_TILE_128_DEEP: return launch<CONFIG_128_DEEP, GATED>(a, init);
    case MI4_TILE_GEMV: return init ? hipSuccess : launch_gemv<GATED>(a);
    case MI4_TILE_WGMMA_128: return launch_wgmma<128, GATED>(a, init);
    case MI4_TILE_WGMMA_256: return launch_wgmma<256, GATED>(a, init);
    default: return launch<CONFIG_256, GATED>(a, init);
    }
}

} // namespace

int mi4_hip_tile_rows(mi4_hip_tile_config config)
{
    switch (config) {
    case MI4_TILE_16:
    case MI4_TILE_16_NARROW: return 16;
    case MI4_TILE_GEMV: return GEMV_TOKENS;
    case MI4_TILE_64: return 64;
    default: return 128;
    }
}

const char *mi4_hip_tile_name(mi4_hip_tile_config config)
{
    static const char *const names[MI4_TILE_COUNT] = {"16", "16n", "64", "128", "128d", "256",
                                                             "8v", "w128", "w256"};
    return (int)config >= 0 && config < MI4_TILE_COUNT ? names[config] : nullptr;
}

hipError_t mi4_hip_launch_gemm13(mi4_hip_tile_config config, const mi4_hip_gemm_args *a)
{
    return launch_config<true>(config, a, false);
}

hipError_t mi4_hip_launch_gemm2(mi4_hip_tile_config config, const mi4_hip_gemm_args *a)
{
    return launch_config<false>(config, a, false);
}

hipError_t mi4_hip_gemm_init(void)
{
    for (int c = 0; c < MI4_TILE_COUNT; c++) {
        hipError_t e = launch_config<true>((mi4_hip_tile_config)c, nullptr, true);
        if (e == hipSuccess)
            e = launch_config<false>((mi4_hip_tile_config)c, nullptr, true);
        if (e != hipSuccess)
            return e;
    }
    return hipSuccess;
}
