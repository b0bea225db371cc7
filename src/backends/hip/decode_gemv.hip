/* Decode GEMVs: with a few token rows per expert the GEMMs are weight
 * streams, so weights go from global memory straight into registers (16
 * bytes per lane and row, GEMV_UNROLL chunks in flight) and meet the token
 * rows on the FMA units: no shared-memory staging, no matrix cores.
 *
 * Grids are persistent (a fixed number of blocks per SM) and each warp walks
 * units of work with a grid stride, so the stream never waits on a partial
 * last wave of short blocks.
 *
 *   routed (MI4_TILE_GEMV): a unit is one output (gemm13: its gate and up
 *     rows) or two outputs (gemm2) of a routed tile of GEMV_TOKENS slots of
 *     one expert; the weight rows are read once for all of the tile's rows.
 *   direct (MI4_TILE_DIRECT): no routing at all. gemm13's units are
 *     (slot, output): the warp reads the slot's id itself. gemm2's units are
 *     (token, two outputs) over all of the token's slots, summed in slot
 *     order with the router weight, and written to the caller's output: the
 *     combine is gone too. Two launches per forward. */
#include "gemm_common.h"

namespace {

using namespace mi4_gemm;

constexpr int GEMV_WARPS = 8;
constexpr int GEMV_UNROLL = 4;
constexpr int GEMV_BLOCKS_PER_SM = 2;
constexpr int CHUNK = MI4_WARP * 8; /* k covered by one lane-wide 16-byte load */

MI4_DEVICE void bf16x8_to_f32(const uint4 &v, float (&f)[8])
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = mi4_dev_bits_to_f32(w[i] << 16);
        f[2 * i + 1] = mi4_dev_bits_to_f32(w[i] & 0xffff0000u);
    }
}

/* Per-lane partial dot products of NR weight rows with T token rows over
 * `inner` (a multiple of 8). ALL: every row with every token (acc[r][t]);
 * otherwise row r meets token r / (NR / T) only (acc[r][0]). Null rows and
 * tokens >= `tokens` contribute nothing. The caller sums over the lanes. */
template <int NR, int T, bool ALL>
MI4_DEVICE void stream_dots(const uint16_t *const (&w)[NR], const uint16_t *const (&x)[T],
                            int tokens, int inner, float (&acc)[NR][T])
{
    const int lane = (int)threadIdx.x % MI4_WARP;
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int t = 0; t < T; t++)
            acc[r][t] = 0.0f;
    for (int k0 = lane * 8; k0 < inner; k0 += CHUNK * GEMV_UNROLL) {
        uint4 wv[GEMV_UNROLL][NR];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++)
#pragma unroll
            for (int r = 0; r < NR; r++) {
                int k = k0 + u * CHUNK;
                wv[u][r] = w[r] && k < inner ? mi4_load_stream((const uint4 *)(w[r] + k))
                                             : make_uint4(0u, 0u, 0u, 0u);
            }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            int k = k0 + u * CHUNK;
            if (k >= inner)
                continue;
            float wf[NR][8];
#pragma unroll
            for (int r = 0; r < NR; r++)
                bf16x8_to_f32(wv[u][r], wf[r]);
#pragma unroll
            for (int t = 0; t < T; t++) {
                if (t >= tokens || x[t] == nullptr)
                    continue;
                float xf[8];
                bf16x8_to_f32(*(const uint4 *)(x[t] + k), xf);
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    if (!ALL && r / (NR / T) != t)
                        continue;
                    float &a = acc[r][ALL ? t : 0];
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        a = fmaf(wf[r][i], xf[i], a);
                }
            }
        }
    }
}

MI4_DEVICE const uint16_t *weight_row(const gemm_params &p, int expert, int row)
{
    return p.b + ((size_t)expert * p.b_rows + (size_t)row) * (size_t)p.inner;
}

/* Routed tiles (MI4_TILE_GEMV): gemm13 units are one output (gate + up rows),
 * gemm2 units two outputs; valid rows come first in a tile. */
template <bool GATED>
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    routed_gemv(gemm_params p)
{
    constexpr int OUTS = GATED ? 1 : 2;
    const int per_tile = p.out_cols / OUTS;
    const int tiles = p.status[2];
    const int lane = (int)threadIdx.x % MI4_WARP;
    const int64_t warps = (int64_t)gridDim.x * GEMV_WARPS;
    for (int64_t unit = (int64_t)blockIdx.x * GEMV_WARPS + (int)threadIdx.x / MI4_WARP;
         unit < (int64_t)tiles * per_tile; unit += warps) {
        const int tile = (int)(unit / per_tile), out0 = (int)(unit % per_tile) * OUTS;
        const int expert = p.tile_expert[tile];
        int slots[GEMV_TOKENS];
        const uint16_t *x[GEMV_TOKENS];
        int tokens = 0;
#pragma unroll
        for (int t = 0; t < GEMV_TOKENS; t++) {
            slots[t] = p.sorted_slot[(size_t)tile * GEMV_TOKENS + t];
            size_t index = GATED ? (size_t)(p.a_by_slot ? slots[t] : slots[t] / p.topk)
                                 : (size_t)tile * GEMV_TOKENS + t;
            x[t] = slots[t] >= 0 ? p.a + index * (size_t)p.inner : nullptr;
            tokens += slots[t] >= 0;
        }
        const uint16_t *w[2] = {weight_row(p, expert, out0),
                                weight_row(p, expert, GATED ? p.out_cols + out0 : out0 + 1)};
        float acc[2][GEMV_TOKENS];
        stream_dots<2, GEMV_TOKENS, true>(w, x, tokens, p.inner, acc);
#pragma unroll
        for (int t = 0; t < GEMV_TOKENS; t++) {
            if (t >= tokens)
                continue;
            float first = mi4_warp_sum(acc[0][t]), second = mi4_warp_sum(acc[1][t]);
            if (lane != 0)
                continue;
            if (GATED) {
                p.act[((size_t)tile * GEMV_TOKENS + t) * (size_t)p.out_cols + out0] =
                    mi4_dev_f32_to_bf16(
                        activate(p.activation, first, second, p.limit, p.alpha, p.beta));
            } else {
                float scale = p.weight_on_output ? p.topk_weights[slots[t]] : 1.0f;
                float *y = p.y + (size_t)slots[t] * (size_t)p.out_cols + out0;
                y[0] = first * scale;
                y[1] = second * scale;
            }
        }
    }
}

/* Direct gemm13: units (slot, output). A bad or non-local id skips the unit;
 * gemm2 reports the bad id. act has a row per slot. */
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    direct_gemm13(gemm_params p)
{
    const int lane = (int)threadIdx.x % MI4_WARP;
    const int64_t warps = (int64_t)gridDim.x * GEMV_WARPS;
    for (int64_t unit = (int64_t)blockIdx.x * GEMV_WARPS + (int)threadIdx.x / MI4_WARP;
         unit < (int64_t)p.num_slots * p.out_cols; unit += warps) {
        const int slot = (int)(unit / p.out_cols), out = (int)(unit % p.out_cols);
        const int id = p.topk_ids[slot];
        if (id < 0 || id >= p.num_experts)
            continue;
        const int expert = p.expert_map[id];
        if (expert < 0)
            continue;
        const uint16_t *x[1] = {p.a + (size_t)(p.a_by_slot ? slot : slot / p.topk) * p.inner};
        const uint16_t *w[2] = {weight_row(p, expert, out),
                                weight_row(p, expert, p.out_cols + out)};
        float acc[2][1];
        stream_dots<2, 1, false>(w, x, 1, p.inner, acc);
        float gate = mi4_warp_sum(acc[0][0]), up = mi4_warp_sum(acc[1][0]);
        if (lane == 0)
            p.act[(size_t)slot * p.out_cols + out] =
                mi4_dev_f32_to_bf16(activate(p.activation, gate, up, p.limit, p.alpha, p.beta));
    }
}

/* Direct gemm2 + combine: units (token, two outputs). Every block first
 * checks every id, so after a bad one no block writes the output; block 0
 * reports the smallest bad slot to the host. Each lane sums its partial
 * products over the token's slots in slot order (two slots per step, so
 * four weight rows are in flight), then the warp sums the lanes: the same
 * inputs give the same bits. */
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    direct_gemm2(gemm_params p)
{
    __shared__ int first_bad;
    const int tid = (int)threadIdx.x, lane = tid % MI4_WARP;
    if (tid == 0)
        first_bad = INT_MAX;
    __syncthreads();
    for (int s = tid; s < p.num_slots; s += (int)blockDim.x) {
        int id = p.topk_ids[s];
        if (id < 0 || id >= p.num_experts)
            atomicMin(&first_bad, s);
    }
    __syncthreads();
    if (first_bad != INT_MAX) {
        if (blockIdx.x == 0 && tid == 0) {
            p.combine.host_status[1] = first_bad;
            p.combine.host_status[0] = 1;
        }
        return;
    }
    const int per_token = p.out_cols / 2;
    const int64_t warps = (int64_t)gridDim.x * GEMV_WARPS;
    for (int64_t unit = (int64_t)blockIdx.x * GEMV_WARPS + tid / MI4_WARP;
         unit < p.combine.num_tokens * per_token; unit += warps) {
        const int64_t token = unit / per_token;
        const int out0 = (int)(unit % per_token) * 2;
        float lane_sum[2] = {0.0f, 0.0f};
        for (int j = 0; j < p.topk; j += 2) {
            const uint16_t *w[4] = {nullptr, nullptr, nullptr, nullptr};
            const uint16_t *x[2] = {nullptr, nullptr};
            float scale[2] = {0.0f, 0.0f};
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int64_t slot = token * p.topk + j + h;
                int expert = j + h < p.topk ? p.expert_map[p.topk_ids[slot]] : -1;
                if (expert < 0)
                    continue;
                w[2 * h] = weight_row(p, expert, out0);
                w[2 * h + 1] = weight_row(p, expert, out0 + 1);
                x[h] = p.a + (size_t)slot * p.inner;
                scale[h] = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
            }
            float acc[4][2];
            stream_dots<4, 2, false>(w, x, 2, p.inner, acc);
#pragma unroll
            for (int h = 0; h < 2; h++)
                if (x[h] != nullptr) {
                    lane_sum[0] = fmaf(acc[2 * h][0], scale[h], lane_sum[0]);
                    lane_sum[1] = fmaf(acc[2 * h + 1][0], scale[h], lane_sum[1]);
                }
        }
        float v0 = mi4_warp_sum(lane_sum[0]), v1 = mi4_warp_sum(lane_sum[1]);
        if (lane == 0) {
            size_t at = (size_t)token * p.out_cols + out0;
            mi4_combine_store(p.combine, at, v0);
            mi4_combine_store(p.combine, at + 1, v1);
        }
    }
}

/* Enough blocks to fill every SM, fewer when there is less work. */
unsigned persistent_grid(int64_t units, int resident_blocks)
{
    int64_t blocks = (units + GEMV_WARPS - 1) / GEMV_WARPS;
    int64_t cap = resident_blocks > 0 ? resident_blocks : 1;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace

hipError_t mi4_hip_launch_gemv(bool gated, bool direct, const mi4_hip_gemm_args *a)
{
    gemm_params p = make_params(a, gated);
    int resident = a->multiprocessors * GEMV_BLOCKS_PER_SM;
    dim3 block(GEMV_WARPS * MI4_WARP);
    if (direct && gated)
        direct_gemm13<<<persistent_grid((int64_t)p.num_slots * p.out_cols, resident), block, 0,
                        a->stream>>>(p);
    else if (direct)
        direct_gemm2<<<persistent_grid(p.combine.num_tokens * (p.out_cols / 2), resident), block,
                       0, a->stream>>>(p);
    else if (gated)
        routed_gemv<true><<<persistent_grid((int64_t)a->routing->max_tiles * p.out_cols, resident),
                            block, 0, a->stream>>>(p);
    else
        routed_gemv<false><<<persistent_grid((int64_t)a->routing->max_tiles * p.out_cols / 2,
                                             resident),
                             block, 0, a->stream>>>(p);
    return hipGetLastError();
}
