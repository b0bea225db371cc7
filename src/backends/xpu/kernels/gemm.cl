/* Int4 grouped GEMMs on the XPU layout. Weights: packed [E, OUT, IN/2] bytes
 * (low nibble = even column), uint4b8 codes (value = code - 8); scales
 * [E, OUT, IN/group] as f16 or bf16 bits. One work-group of MI4_LANES
 * work-items owns one output column and one tile of up to MI4_TILE_ROWS
 * sorted slots of one expert (mi4_find_tile: the routing's tile list; groups
 * past its end return at once). The lanes split the reduction dimension in
 * chunks of 8 codes (one 32-bit word; groups are multiples of 8, so a chunk
 * never straddles two), so neighbouring lanes read neighbouring words of the
 * weight row and of the activations; each lane scales its chunk sums by the
 * chunk's group scale, then a fixed tree in local memory adds the lanes.
 * Lane assignment and tree are fixed, so results are deterministic. Words
 * are read little-endian (Intel GPUs, NVIDIA GPUs, PoCL on x86). 32 lanes:
 * typical MoE reduction lengths (768..4096 codes = 96..512 words) keep every
 * lane busy for several words (the host's MI4_XPU_GEMM_LANES must match). On
 * the H200 (NVIDIA OpenCL, 2026-12-01) neither 4 columns per work-group nor
 * each lane loading 4 or 8 words before multiplying was faster
 * (bench/results/xpu-2026-12-01.md); nothing is tuned for Intel GPUs. */

#define MI4_ROUTE_END(route, num_local, e) ((route)[(num_local) + (e) + 1])
#define MI4_LANES 32
#define MI4_SUMS (2 * MI4_TILE_ROWS)

/* Adds each lane's sums over the work-group: rows [0, rows) of each of the
 * `halves` halves (w13: gate and up; w2: one), the rows a tile really has,
 * so a one-row tile (M = 1) reduces 1/8 of the array. Totals end in
 * scratch[h * MI4_TILE_ROWS + r]. Every lane must call it. */
void mi4_add_lanes(__local float *scratch, const float *sums, int rows, int halves, int lane)
{
    /* constant indices into sums (unrolled, guarded): an index known only at
     * run time would put the caller's sums array in memory instead of
     * registers for the whole multiply loop */
#pragma unroll
    for (int i = 0; i < MI4_SUMS; ++i)
        if (i / MI4_TILE_ROWS < halves && i % MI4_TILE_ROWS < rows)
            scratch[lane * MI4_SUMS + i] = sums[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int stride = MI4_LANES / 2; stride > 0; stride >>= 1) {
        if (lane < stride)
            for (int h = 0; h < halves; ++h)
                for (int r = 0; r < rows; ++r) {
                    int i = h * MI4_TILE_ROWS + r;
                    scratch[lane * MI4_SUMS + i] += scratch[(lane + stride) * MI4_SUMS + i];
                }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* sum_i code_i(word) * x_i, added left to right (the order is part of the
 * determinism promise). */
float mi4_dot8(uint word, float8 x)
{
    int8 codes = as_int8((uint8)(word) >> (uint8)(0, 4, 8, 12, 16, 20, 24, 28) & (uint8)(15u));
    float8 c = convert_float8(codes - 8);
    return c.s0 * x.s0 + c.s1 * x.s1 + c.s2 * x.s2 + c.s3 * x.s3 + c.s4 * x.s4 + c.s5 * x.s5 +
           c.s6 * x.s6 + c.s7 * x.s7;
}

/* w13: gate = rows [0, N), up = rows [N, 2N); act_out[slot][n] (f32) =
 * act(gate, up). With weight_on_input the router weight scales x first,
 * which is the same as scaling both dot products. */
__kernel __attribute__((reqd_work_group_size(MI4_LANES, 1, 1)))
void mi4_w13_gemm(__global const int *route, int num_local,
                  __global const int *sorted_slots, __global const uchar *hidden, int dtype,
                  __global const float *topk_weights, int weight_on_input, int topk,
                  __global const uchar *packed, __global const ushort *scales, int scales_bf16,
                  int K, int N, int group_size, int act_kind, float limit, float alpha,
                  float beta, __global float *act_out)
{
    __local float scratch[MI4_LANES * MI4_SUMS];
    long x_row[MI4_TILE_ROWS];
    float sums[MI4_SUMS]; /* gate sums [0, TILE), up sums [TILE, 2 TILE) */
    int n = (int)get_group_id(0);
    int lane = (int)get_local_id(0);
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_global_id(1), &expert, &row0))
        return; /* the whole work-group: no barrier is skipped by part of it */
    int rows = min(MI4_TILE_ROWS, MI4_ROUTE_END(route, num_local, expert) - row0);
    int groups = K / group_size, words = K / 8;
    __global const uint *w_gate =
        (__global const uint *)(packed + ((long)expert * 2 * N + n) * (K / 2));
    __global const uint *w_up = w_gate + (long)N * words;
    __global const ushort *s_gate = scales + ((long)expert * 2 * N + n) * groups;
    __global const ushort *s_up = s_gate + (long)N * groups;

    /* loops over the tile's rows run to MI4_TILE_ROWS, unrolled, with a
     * guard: constant indices keep sums and x_row in registers */
#pragma unroll
    for (int i = 0; i < MI4_SUMS; ++i)
        sums[i] = 0.0f;
#pragma unroll
    for (int r = 0; r < MI4_TILE_ROWS; ++r)
        x_row[r] = r < rows ? (long)(sorted_slots[row0 + r] / topk) * K : 0;
    for (int c = lane; c < words; c += MI4_LANES) {
        uint wg = w_gate[c], wu = w_up[c];
        int g = c * 8 / group_size;
        float sg = mi4_load_scale(s_gate, scales_bf16, g);
        float su = mi4_load_scale(s_up, scales_bf16, g);
#pragma unroll
        for (int r = 0; r < MI4_TILE_ROWS; ++r) {
            if (r < rows) {
                float8 x = mi4_load8(hidden, dtype, x_row[r] + 8 * c);
                sums[r] += mi4_dot8(wg, x) * sg;
                sums[MI4_TILE_ROWS + r] += mi4_dot8(wu, x) * su;
            }
        }
    }
    mi4_add_lanes(scratch, sums, rows, 2, lane);
    if (lane < rows) { /* lane r finishes row r */
        int slot = sorted_slots[row0 + lane];
        float scale = weight_on_input ? topk_weights[slot] : 1.0f;
        float gate = scratch[lane] * scale, up = scratch[MI4_TILE_ROWS + lane] * scale;
        act_out[(long)slot * N + n] = mi4_activate(act_kind, gate, up, limit, alpha, beta);
    }
}

/* w2: slot_out[slot][k] (f32) = (router weight unless applied on the input)
 * * sum_n act[slot][n] * W2[e][k][n]. */
__kernel __attribute__((reqd_work_group_size(MI4_LANES, 1, 1)))
void mi4_w2_gemm(__global const int *route, int num_local,
                 __global const int *sorted_slots, __global const float *act,
                 __global const float *topk_weights, int weight_on_input,
                 __global const uchar *packed, __global const ushort *scales, int scales_bf16,
                 int K, int N, int group_size, __global float *slot_out)
{
    __local float scratch[MI4_LANES * MI4_SUMS];
    long a_row[MI4_TILE_ROWS];
    float sums[MI4_SUMS];
    int k = (int)get_group_id(0);
    int lane = (int)get_local_id(0);
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_global_id(1), &expert, &row0))
        return; /* the whole work-group: no barrier is skipped by part of it */
    int rows = min(MI4_TILE_ROWS, MI4_ROUTE_END(route, num_local, expert) - row0);
    int groups = N / group_size, words = N / 8;
    __global const uint *w = (__global const uint *)(packed + ((long)expert * K + k) * (N / 2));
    __global const ushort *s = scales + ((long)expert * K + k) * groups;

#pragma unroll
    for (int i = 0; i < MI4_SUMS; ++i)
        sums[i] = 0.0f;
#pragma unroll
    for (int r = 0; r < MI4_TILE_ROWS; ++r)
        a_row[r] = r < rows ? (long)sorted_slots[row0 + r] * N : 0;
    for (int c = lane; c < words; c += MI4_LANES) {
        uint word = w[c];
        float sc = mi4_load_scale(s, scales_bf16, c * 8 / group_size);
#pragma unroll
        for (int r = 0; r < MI4_TILE_ROWS; ++r)
            if (r < rows)
                sums[r] += mi4_dot8(word, vload8(0, act + a_row[r] + 8 * c)) * sc;
    }
    mi4_add_lanes(scratch, sums, rows, 1, lane);
    if (lane < rows) {
        int slot = sorted_slots[row0 + lane];
        float scale = weight_on_input ? 1.0f : topk_weights[slot];
        slot_out[(long)slot * K + k] = scratch[lane] * scale;
    }
}

/* out[m][k] = sum over the token's local slots, in slot order (deterministic);
 * a token with no local slot gets 0. Rounded once to dtype. */
__kernel void mi4_combine(__global const int *slot_expert, __global const float *slot_out,
                          int num_tokens, int topk, int K, int dtype,
                          __global const int *errors, int gated, __global uchar *output)
{
    int k = (int)get_global_id(0);
    int m = (int)get_global_id(1);
    if (k >= K || m >= num_tokens || (gated && mi4_errors_set(errors)))
        return;
    float sum = 0.0f;
    for (int j = 0; j < topk; ++j) {
        int slot = m * topk + j;
        if (slot_expert[slot] >= 0)
            sum += slot_out[(long)slot * K + k];
    }
    mi4_store(output, dtype, (long)m * K + k, sum);
}

/* A forward of several chunks combines into staging; this copies it to the
 * output once every chunk has run, unless (gated) the error record is set. */
__kernel void mi4_copy_out(__global const uint *staging, long words, __global const int *errors,
                           int gated, __global uint *output)
{
    long i = (long)get_global_id(0) + (long)get_global_id(1) * (long)get_global_size(0);
    if (i < words && !(gated && mi4_errors_set(errors)))
        output[i] = staging[i];
}
