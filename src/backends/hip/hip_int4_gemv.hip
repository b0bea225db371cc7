/* Decode GEMVs over int4 weights (gpu_weights INT4), dequantized in
 * registers: the structure of hip_decode_gemv.hip (persistent grids, a
 * warp's contiguous run of units, the direct path's slot table and fused
 * combine, the routed path's 8-row tiles) with weights read as int4 codes.
 *
 * Each lane loads 16 bytes of one row (32 codes of one group: groups are
 * 32, 64, 128 inputs or the whole row, rows padded to 128), turns a code
 * into a float by a byte permute into the mantissa of 2^23 and one
 * subtraction of 2^23 + zero (exact: q - zero), multiplies with the
 * token's bf16 inputs in f32, and applies the group's scale once per 32
 * codes. Weights are therefore exact ((q - zero) * scale in f32 without
 * rounding); inputs and the intermediate are bf16 as in the BF16 mode. */
#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_gemv_units.h"

namespace {

using namespace mi4_gemm;

constexpr int CODES_PER_LOAD = 32;                       /* 16 bytes */
constexpr int WARP_CODES = MI4_WARP * CODES_PER_LOAD;    /* k covered by one warp-wide load */
constexpr float MAGIC = 8388608.0f;                      /* 2^23 */

struct int4_row {
    const uint8_t *codes;    /* NULL: no row (contributes nothing) */
    const uint16_t *scales;
    const uint8_t *zeros;    /* NULL: zero point 8 */
};

MI4_DEVICE int4_row int4_row_of(const mi4_hip_int4_matrix &q, int expert, int row)
{
    const size_t r = (size_t)expert * q.rows + (size_t)row;
    int4_row out;
    out.codes = q.codes + mi4_int4_row_offset(q.inner_padded, r);
    out.scales = q.scales + r * (size_t)q.groups;
    out.zeros = q.zeros ? q.zeros + r * (size_t)q.groups : nullptr;
    return out;
}

MI4_DEVICE int4_row no_row()
{
    int4_row out;
    out.codes = nullptr;
    out.scales = nullptr;
    out.zeros = nullptr;
    return out;
}

/* Codes (q) of one 32-bit word as floats 2^23 + q, in input order: code j
 * sits in bits 4j..4j+3. */
MI4_DEVICE void word_to_magic(uint32_t word, float (&f)[8])
{
    const uint32_t even = word & 0x0f0f0f0fu, odd = (word >> 4) & 0x0f0f0f0fu;
#pragma unroll
    for (int b = 0; b < 4; b++) {
        f[2 * b] = mi4_dev_bits_to_f32(__byte_perm(even, 0x4b000000u, 0x7440u | (unsigned)b));
        f[2 * b + 1] = mi4_dev_bits_to_f32(__byte_perm(odd, 0x4b000000u, 0x7440u | (unsigned)b));
    }
}

MI4_DEVICE void bf16x8(const uint4 &v, float (&f)[8])
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        f[2 * i] = mi4_dev_bits_to_f32(w[i] << 16);
        f[2 * i + 1] = mi4_dev_bits_to_f32(w[i] & 0xffff0000u);
    }
}

/* Per-lane partial dot products of NR int4 rows with T bf16 token rows
 * over `q.inner`. ALL: every row with every token (acc[r][t]); otherwise row
 * r meets token r / (NR / T) only (acc[r][0]). Null rows and tokens >=
 * `tokens` contribute nothing. The caller sums over the lanes. */
template <int NR, int T, bool ALL, int UNROLL>
MI4_DEVICE void int4_dots(const mi4_hip_int4_matrix &q, const int4_row (&w)[NR],
                          const uint16_t *const (&x)[T], int tokens, float (&acc)[NR][ALL ? T : 1])
{
    constexpr int TA = ALL ? T : 1;
    constexpr int ROWS_PER_TOKEN = ALL ? 1 : NR / T;
    const int lane = (int)threadIdx.x % MI4_WARP;
#pragma unroll
    for (int r = 0; r < NR; r++)
#pragma unroll
        for (int t = 0; t < TA; t++)
            acc[r][t] = 0.0f;
    for (int k0 = lane * CODES_PER_LOAD; k0 < q.inner_padded; k0 += WARP_CODES * UNROLL) {
        /* every load of the step before the first use; the token rows too
         * where each row meets one token (a token chunk loaded at its use
         * costs an L2 round trip each); ALL (8 tokens) has no registers for
         * that and reads them at their use */
        uint4 cv[UNROLL][NR], xv[UNROLL][ALL ? 1 : T][4];
        float scale[UNROLL][NR], bias[UNROLL][NR];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int k = k0 + u * WARP_CODES, g = k / q.group_size;
#pragma unroll
            for (int r = 0; r < NR; r++) {
                /* a chunk wholly in the row padding (grouped rows: IN is a
                 * multiple of 32) has no group: nothing loaded, scale 0 */
                const bool valid = w[r].codes != nullptr && k < q.inner;
                cv[u][r] = valid ? mi4_load_stream((const uint4 *)(w[r].codes +
                                                                   mi4_int4_input_offset(k)))
                                 : make_uint4(0u, 0u, 0u, 0u);
                const uint16_t s = valid ? w[r].scales[g] : (uint16_t)0;
                scale[u][r] = mi4_dev_scale_to_f32(s, q.scales_bf16);
                bias[u][r] = MAGIC + (float)(valid && w[r].zeros ? (int)w[r].zeros[g] : 8);
            }
#pragma unroll
            for (int t = 0; t < (ALL ? 0 : T); t++)
#pragma unroll
                for (int word = 0; word < 4; word++)
                    xv[u][t][word] = t < tokens && x[t] && k + 8 * word < q.inner
                                         ? *(const uint4 *)(x[t] + k + 8 * word)
                                         : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int k = k0 + u * WARP_CODES;
            if (k >= q.inner_padded)
                continue;
            float part[NR][TA];
#pragma unroll
            for (int r = 0; r < NR; r++)
#pragma unroll
                for (int t = 0; t < TA; t++)
                    part[r][t] = 0.0f;
#pragma unroll
            for (int word = 0; word < 4; word++) {
                const int kw = k + 8 * word;
                if (kw >= q.inner) /* row padding */
                    continue;
                float wf[NR][8];
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    const uint32_t bits = word == 0   ? cv[u][r].x
                                          : word == 1 ? cv[u][r].y
                                          : word == 2 ? cv[u][r].z
                                                      : cv[u][r].w;
                    word_to_magic(bits, wf[r]);
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        wf[r][i] -= bias[u][r];
                }
#pragma unroll
                for (int t = 0; t < T; t++) {
                    if (t >= tokens || x[t] == nullptr)
                        continue;
                    float xf[8];
                    bf16x8(ALL ? *(const uint4 *)(x[t] + kw) : xv[u][ALL ? 0 : t][word], xf);
#pragma unroll
                    for (int r = 0; r < NR; r++) {
                        if (!ALL && r / ROWS_PER_TOKEN != t)
                            continue;
                        float &a = part[r][ALL ? t : 0];
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            a = fmaf(wf[r][i], xf[i], a);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < NR; r++)
#pragma unroll
                for (int t = 0; t < TA; t++)
                    acc[r][t] = fmaf(part[r][t], scale[u][r], acc[r][t]);
        }
    }
}

/* Routed tiles (MI4_TILE_GEMV): gemm13 units are one output (gate + up
 * rows), gemm2 units two outputs; valid rows come first in a tile. */
template <bool GATED>
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    int4_routed_gemv(gemm_params p, mi4_hip_int4_matrix q)
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
        const int4_row w[2] = {int4_row_of(q, expert, out0),
                               int4_row_of(q, expert, GATED ? p.out_cols + out0 : out0 + 1)};
        float acc[2][GEMV_TOKENS];
        int4_dots<2, GEMV_TOKENS, true, 2>(q, w, x, tokens, acc);
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

/* Direct gemm13: units (slot, output); a bad or non-local slot skips the
 * unit (gemm2 reports a bad one). act has a row per slot. */
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    int4_direct_gemm13(gemm_params p, mi4_hip_int4_matrix q)
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
        const int4_row w[2] = {int4_row_of(q, expert, out),
                               int4_row_of(q, expert, p.out_cols + out)};
        float acc[2][1];
        int4_dots<2, 1, false, 2>(q, w, x, 1, acc);
        float gate = mi4_warp_sum(acc[0][0]), up = mi4_warp_sum(acc[1][0]);
        if (lane == 0)
            p.act[(size_t)slot * p.out_cols + out] =
                mi4_dev_f32_to_bf16(activate(p.activation, gate, up, p.limit, p.alpha, p.beta));
    }
}

/* Direct gemm2 + combine: units (token, output), the token's slots summed
 * in slot order with the router weight (same inputs, same bits). Block 0
 * reports the smallest bad slot; a synchronous forward then writes no
 * output, an asynchronous one leaves the bad slots out. */
template <int STEP, int UNROLL>
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    int4_direct_gemm2(gemm_params p, mi4_hip_int4_matrix q)
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
            int4_row w[STEP];
            const uint16_t *x[STEP];
            float scale[STEP];
#pragma unroll
            for (int h = 0; h < STEP; h++) {
                int64_t slot = token * p.topk + j + h;
                int expert = j + h < p.topk ? slot_expert[slot] : -1;
                w[h] = expert >= 0 ? int4_row_of(q, expert, out) : no_row();
                x[h] = expert >= 0 ? p.a + (size_t)slot * p.inner : nullptr;
                scale[h] = p.weight_on_output && expert >= 0 ? p.topk_weights[slot] : 1.0f;
            }
            float acc[STEP][1]; /* row h meets token h only */
            int4_dots<STEP, STEP, false, UNROLL>(q, w, x, STEP, acc);
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

hipError_t mi4_hip_launch_int4(mi4_hip_tile_config config, bool gated,
                               const mi4_hip_gemm_args *a)
{
    if (mi4_hip_tile_is_int4_gemm(config)) /* hip_int4_grouped_gemm.hip */
        return mi4_hip_launch_int4_wgmma(config, gated, a, false);
    if (a->weights->int4_tile_dequant && mi4_hip_int4_tile_reads_bf16(a->weights, config))
        return mi4_hip_launch_gemm_dequant(config, gated, a); /* no expansion */
    const bool direct = config == MI4_TILE_DIRECT;
    bool served = false;
    if (direct) { /* hip_int4_decode.hip where it serves */
        const hipError_t e = mi4_hip_launch_int4_decode(gated, a, &served);
        if (served)
            return e;
    }
    if (config == MI4_TILE_D8) { /* hip_int4_routed.hip where it serves */
        const hipError_t e = mi4_hip_launch_int4_routed(gated, a, &served);
        if (served)
            return e;
    }
    if (a->weights->int4_mma && !direct) /* hip_int4_mma.hip */
        return mi4_hip_launch_int4_mma(gated, a);
    gemm_params p = make_params(a, gated);
    p.b = nullptr; /* the weights are q below */
    const mi4_hip_int4_matrix q = gated ? a->weights->q13 : a->weights->q2;
    const int resident = a->multiprocessors * GEMV_BLOCKS_PER_SM;
    const dim3 block(GEMV_WARPS * MI4_WARP);
    const size_t slot_table = (size_t)p.num_slots * sizeof(int); /* direct only */
    if (direct && gated)
        return mi4_launch(int4_direct_gemm13,
                          dim3(persistent_grid((int64_t)p.num_slots * p.out_cols, resident)),
                          block, slot_table, a->stream, p, q);
    if (direct && p.topk <= 2) /* Mixtral-like: two long rows */
        return mi4_launch(int4_direct_gemm2<2, 2>,
                          dim3(persistent_grid(p.combine.num_tokens * p.out_cols, resident)),
                          block, slot_table, a->stream, p, q);
    if (direct)
        return mi4_launch(int4_direct_gemm2<2, 1>,
                          dim3(persistent_grid(p.combine.num_tokens * p.out_cols, resident)),
                          block, slot_table, a->stream, p, q);
    if (gated)
        return mi4_launch(
            int4_routed_gemv<true>,
            dim3(persistent_grid((int64_t)a->routing->max_tiles * p.out_cols, resident)), block,
            0, a->stream, p, q);
    return mi4_launch(
        int4_routed_gemv<false>,
        dim3(persistent_grid((int64_t)a->routing->max_tiles * p.out_cols / 2, resident)), block, 0,
        a->stream, p, q);
}
