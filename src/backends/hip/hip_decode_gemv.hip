/* Decode GEMVs: with a few token rows per expert the GEMMs are weight
 * streams, so weights go from global memory straight into registers (16
 * bytes per lane and row, UNROLL chunks of each row in flight) and meet the
 * token rows on the FMA units: no shared-memory staging, no matrix cores.
 *
 * Grids are persistent (a fixed number of blocks per SM) and each warp walks
 * a contiguous run of units of work, so the stream never waits on a partial
 * last wave of short blocks and a warp's consecutive units share their
 * expert and routing.
 *
 *   routed (MI4_TILE_GEMV): a unit is one output (gemm13: its gate and up
 *     rows) or two outputs (gemm2) of a routed tile of GEMV_TOKENS slots of
 *     one expert; the weight rows are read once for all of the tile's rows.
 *   direct (MI4_TILE_DIRECT): no routing at all; each block first maps every
 *     slot to its local expert in shared memory. gemm13's units are (slot,
 *     output); gemm2's units are (token, output) over all of the token's
 *     slots, summed in slot order with the router weight and written to the
 *     caller's output: the combine is gone too. Two launches per forward. */
#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_gemv_units.h"

namespace {

using namespace mi4_gemm;

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
template <int NR, int T, bool ALL, int UNROLL>
MI4_DEVICE void stream_dots(const uint16_t *const (&w)[NR], const uint16_t *const (&x)[T],
                            int tokens, int inner, float (&acc)[NR][T])
{
    const int lane = (int)threadIdx.x % MI4_WARP;
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int t = 0; t < T; t++)
            acc[r][t] = 0.0f;
    for (int k0 = lane * 8; k0 < inner; k0 += CHUNK * UNROLL) {
        /* Paired rows (the direct GEMVs) issue every load of the step before
         * the first use: a token chunk loaded next to its multiply costs an
         * L2 round trip each. ALL (8 tokens of a routed tile) has no
         * registers for that and loads token chunks at their use. */
        uint4 wv[UNROLL][NR], xv[UNROLL][ALL ? 1 : T];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            int k = k0 + u * CHUNK;
#pragma unroll
            for (int r = 0; r < NR; r++)
                wv[u][r] = w[r] && k < inner ? mi4_load_stream((const uint4 *)(w[r] + k))
                                             : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
            for (int t = 0; t < (ALL ? 0 : T); t++)
                xv[u][t] = t < tokens && x[t] && k < inner ? *(const uint4 *)(x[t] + k)
                                                           : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
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
                bf16x8_to_f32(ALL ? *(const uint4 *)(x[t] + k) : xv[u][ALL ? 0 : t], xf);
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
    const int lane = (int)threadIdx.x % MI4_WARP;
    int64_t unit, end;
    warp_units((int64_t)p.status[2] * per_tile, &unit, &end);
    int tile = -1, expert = 0, tokens = 0;
    int slots[GEMV_TOKENS];
    const uint16_t *x[GEMV_TOKENS];
    for (; unit < end; unit++) {
        const int out0 = (int)(unit % per_tile) * OUTS;
        if (tile != (int)(unit / per_tile)) { /* a new tile: its expert and rows */
            tile = (int)(unit / per_tile);
            expert = p.tile_expert[tile];
            tokens = 0;
#pragma unroll
            for (int t = 0; t < GEMV_TOKENS; t++) {
                slots[t] = p.sorted_slot[(size_t)tile * GEMV_TOKENS + t];
                size_t index = GATED ? (size_t)(p.a_by_slot ? slots[t] : slots[t] / p.topk)
                                     : (size_t)tile * GEMV_TOKENS + t;
                x[t] = slots[t] >= 0 ? p.a + index * (size_t)p.inner : nullptr;
                tokens += slots[t] >= 0;
            }
        }
        const uint16_t *w[2] = {weight_row(p, expert, out0),
                                weight_row(p, expert, GATED ? p.out_cols + out0 : out0 + 1)};
        float acc[2][GEMV_TOKENS];
        stream_dots<2, GEMV_TOKENS, true, 4>(w, x, tokens, p.inner, acc);
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

/* Direct gemm13: units (slot, output). A bad or non-local slot skips the
 * unit (gemm2 reports a bad one). act has a row per slot. */
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    direct_gemm13(gemm_params p)
{
    extern __shared__ int slot_expert[];
    map_slots(p, slot_expert);
    const int lane = (int)threadIdx.x % MI4_WARP;
    int64_t unit, end;
    warp_units((int64_t)p.num_slots * p.out_cols, &unit, &end);
    for (; unit < end; unit++) {
        const int slot = (int)(unit / p.out_cols), out = (int)(unit % p.out_cols);
        const int expert = slot_expert[slot];
        if (expert < 0)
            continue;
        const uint16_t *x[1] = {p.a + (size_t)(p.a_by_slot ? slot : slot / p.topk) * p.inner};
        const uint16_t *w[2] = {weight_row(p, expert, out),
                                weight_row(p, expert, p.out_cols + out)};
        float acc[2][1];
        stream_dots<2, 1, false, 8>(w, x, 1, p.inner, acc);
        float gate = mi4_warp_sum(acc[0][0]), up = mi4_warp_sum(acc[1][0]);
        if (lane == 0)
            p.act[(size_t)slot * p.out_cols + out] =
                mi4_dev_f32_to_bf16(activate(p.activation, gate, up, p.limit, p.alpha, p.beta));
    }
}

/* Direct gemm2 + combine: units (token, output). Block 0 reports the
 * smallest bad slot; a synchronous forward then writes no output, an
 * asynchronous one leaves the bad slots out.
 * Each lane sums its partial products over the token's slots in slot order
 * (STEP slots per step, UNROLL chunks of each of their rows in flight),
 * then the warp sums the lanes: the same inputs give the same bits. */
template <int STEP, int UNROLL>
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    direct_gemm2(gemm_params p)
{
    extern __shared__ int slot_expert[];
    const int first_bad = map_slots(p, slot_expert);
    if (first_bad != INT_MAX) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            mi4_report_bad_slot(p.combine.check, first_bad);
        if (!p.combine.check.sticky)
            return;
    }
    const int lane = (int)threadIdx.x % MI4_WARP;
    int64_t unit, end;
    warp_units(p.combine.num_tokens * p.out_cols, &unit, &end);
    for (; unit < end; unit++) {
        const int64_t token = unit / p.out_cols;
        const int out = (int)(unit % p.out_cols);
        float lane_sum = 0.0f;
        for (int j = 0; j < p.topk; j += STEP) {
            const uint16_t *w[STEP], *x[STEP];
            float scale[STEP];
#pragma unroll
            for (int h = 0; h < STEP; h++) {
                int64_t slot = token * p.topk + j + h;
                int expert = j + h < p.topk ? slot_expert[slot] : -1;
                w[h] = expert >= 0 ? weight_row(p, expert, out) : nullptr;
                x[h] = expert >= 0 ? p.a + (size_t)slot * p.inner : nullptr;
                scale[h] = p.weight_on_output && expert >= 0 ? p.topk_weights[slot] : 1.0f;
            }
            float acc[STEP][STEP]; /* row h meets token h only: acc[h][0] */
            stream_dots<STEP, STEP, false, UNROLL>(w, x, STEP, p.inner, acc);
#pragma unroll
            for (int h = 0; h < STEP; h++)
                if (x[h] != nullptr)
                    lane_sum = fmaf(acc[h][0], scale[h], lane_sum);
        }
        float v = mi4_warp_sum(lane_sum);
        if (lane == 0)
            mi4_combine_store(p.combine, (size_t)token * p.out_cols + out, v);
    }
}

} // namespace

hipError_t mi4_hip_launch_gemv(bool gated, bool direct, const mi4_hip_gemm_args *a)
{
    gemm_params p = make_params(a, gated);
    int resident = a->multiprocessors * GEMV_BLOCKS_PER_SM;
    dim3 block(GEMV_WARPS * MI4_WARP);
    size_t slot_table = (size_t)p.num_slots * sizeof(int); /* direct: <= MI4_DIRECT_MAX_SLOTS */
    if (direct && gated)
        return mi4_launch(direct_gemm13,
                          dim3(persistent_grid((int64_t)p.num_slots * p.out_cols, resident)),
                          block, slot_table, a->stream, p);
    if (direct && p.topk <= 2) /* Mixtral-like: two long rows, deeper loads */
        return mi4_launch(direct_gemm2<2, 4>,
                          dim3(persistent_grid(p.combine.num_tokens * p.out_cols, resident)),
                          block, slot_table, a->stream, p);
    if (direct)
        return mi4_launch(direct_gemm2<4, 2>,
                          dim3(persistent_grid(p.combine.num_tokens * p.out_cols, resident)),
                          block, slot_table, a->stream, p);
    if (gated)
        return mi4_launch(
            routed_gemv<true>,
            dim3(persistent_grid((int64_t)a->routing->max_tiles * p.out_cols, resident)), block,
            0, a->stream, p);
    return mi4_launch(
        routed_gemv<false>,
        dim3(persistent_grid((int64_t)a->routing->max_tiles * p.out_cols / 2, resident)), block, 0,
        a->stream, p);
}
