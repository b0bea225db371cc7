/* Decode GEMMs: the weights of the few experts a small batch hits are
 * streamed once through registers (see decode_gemv below), optionally with
 * the routing and the combine fused in (MOEINT4_HIP_FUSE=1). */
#include "gemm_common.h"

namespace {

using namespace mi4_gemm;

/* Decode: few rows per expert, so the weights are streamed straight from
 * global memory into registers (16 bytes per lane and row, UNROLL chunks in
 * flight) and multiplied on the FMA units; no shared-memory staging, no
 * matrix cores. A warp owns ROWS weight rows (gemm13: the gate and up rows
 * of ROWS/2 outputs) and up to TOKENS token rows of one routed tile, sums
 * over the lanes in a fixed butterfly order, and runs the same epilogues. */
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

} // namespace

hipError_t mi4_hip_launch_gemv(bool gated, const mi4_hip_gemm_args *a)
{
    return gated ? launch_gemv<true>(a) : launch_gemv<false>(a);
}
