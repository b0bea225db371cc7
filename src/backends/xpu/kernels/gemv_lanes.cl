/* One-token GEMVs that split each row over the work-items of a team and
 * keep the token's activations in registers (mi4_w13_gemv_lanes,
 * mi4_w2_gemv_lanes; the host launches them with MOEINT4_XPU_GEMV_LANES, a
 * few long-lived work-groups per compute unit, on rows of 16-byte pieces).
 *
 * Why: the staged GEMVs (gemm.cl, gemv_walk.cl) read a float4 of local
 * memory for every 4 codes and stage the activations between barriers; on
 * the H200 they stream at 32-38% of the copy bandwidth. Here work-item
 * `lane` of a team owns pieces lane, lane + team (at most MI4_LANES_PIECES
 * of them) of every row: their 32 activations each, read once per
 * work-group and pre-scaled for codes decoded in place (mi4_staged_scale), stay
 * in registers for every row the team walks. A batch is 8 rows per team
 * (w13: 4 columns, gate and up; w2: 8 rows): a work-item loads its pieces
 * of all 8 (and their scales) before using any, and issues the next
 * batch's loads before the team adds up this one's sums (two barriers,
 * local memory), so the reduction overlaps the loads.
 *
 * team (the kernels' `team` argument): a power of two from 8 to MI4_GROUP
 * with team * MI4_LANES_PIECES pieces covering the row, chosen by the host
 * (mi4_xpu_lanes_team).
 * Sums: each work-item's pieces in order, then 8 work-items' sums in lane
 * order, then those in order: deterministic, not the staged GEMVs' order
 * (test_gemv_lanes checks against the double reference). */

#define MI4_LANES_PIECES 2 /* the host's MI4_XPU_LANES_PIECES */
/* Bench switches (MOEINT4_XPU_BUILD_OPTIONS): MI4_LANES_EARLY=0 loads each
 * batch when its turn comes (after the previous reduction);
 * MI4_LANES_STREAM_PROBE=1 replaces the arithmetic by an XOR of the codes
 * (wrong results: a measure of what the loads alone take). */
#ifndef MI4_LANES_EARLY
#define MI4_LANES_EARLY 1
#endif
#ifndef MI4_LANES_STREAM_PROBE
#define MI4_LANES_STREAM_PROBE 0
#endif
#define MI4_LANES_SUMS 8   /* rows a team finishes per batch */

/* A piece's 32 codes against its activations in registers, scaled for codes
 * in place (position p of a word times 16^-(p < 5 ? p : p - 5)). */
float mi4_lanes_dot(uint4 piece, const float *x)
{
#if MI4_LANES_STREAM_PROBE
    return (float)(piece.x ^ piece.y ^ piece.z ^ piece.w) * x[0];
#endif
    uint w[4] = { piece.x, piece.y, piece.z, piece.w };
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        uint high = w[j] >> 20;
        const float *xj = x + 8 * j;
        sum = fma(MI4_CODE_IN_PLACE(w[j], 0), xj[0], sum);
        sum = fma(MI4_CODE_IN_PLACE(w[j], 1), xj[1], sum);
        sum = fma(MI4_CODE_IN_PLACE(w[j], 2), xj[2], sum);
        sum = fma(MI4_CODE_IN_PLACE(w[j], 3), xj[3], sum);
        sum = fma(MI4_CODE_IN_PLACE(w[j], 4), xj[4], sum);
        sum = fma(MI4_CODE_IN_PLACE(high, 0), xj[5], sum);
        sum = fma(MI4_CODE_IN_PLACE(high, 1), xj[6], sum);
        sum = fma(MI4_CODE_IN_PLACE(high, 2), xj[7], sum);
    }
    return sum;
}

/* Row s of the batch whose first column is col0: w13 (halves 2) sums
 * 0..3 are gate rows, 4..7 their up rows; w2 sums are 8 rows. A column past
 * the end reads the last one (valid addresses; nothing is written). */
int mi4_lanes_row(const mi4_expert_rows *w, int col0, int s)
{
    int per_half = MI4_LANES_SUMS / w->halves;
    int col = min(col0 + s % per_half, w->cols - 1);
    return s / per_half * w->cols + col;
}

/* Loads the work-item's pieces (piece[s][i] = piece p_i of row s) and scales
 * of the batch at col0. */
void mi4_lanes_load(const mi4_expert_rows *w, int col0, const int *p, const int *group,
                    int ppl, uint4 (*piece)[MI4_LANES_PIECES],
                    uint (*scale)[MI4_LANES_PIECES])
{
#pragma unroll
    for (int s = 0; s < MI4_LANES_SUMS; ++s) {
        int row = mi4_lanes_row(w, col0, s);
        __global const uint4 *r = w->packed + (long)row * w->pieces;
        __global const ushort *rs = w->scales + (long)row * w->groups;
#pragma unroll
        for (int i = 0; i < MI4_LANES_PIECES; ++i)
            if (i < ppl) { /* p[i] is a valid piece, so no test of live[i] */
                piece[s][i] = r[p[i]];
                scale[s][i] = rs[group[i]]; /* bits (mi4_scale_from_bits) */
            }
    }
}

/* The team's totals of the batch's 8 sums, published by every work-item in
 * red ([8][MI4_GROUP]); work-item s < 8 of the team returns sum s (and w13's
 * lanes r < 4 get the up sum r + 4 in *second). part: [MI4_GROUP]. Every
 * work-item calls it (barriers). */
float mi4_lanes_finish(__local float *red, __local float *part, const float *sums, int team,
                      int lane, int halves, float *second)
{
    int lid = (int)get_local_id(0), base = lid - lane, segments = team / 8;
#pragma unroll
    for (int s = 0; s < MI4_LANES_SUMS; ++s)
        red[s * MI4_GROUP + lid] = sums[s];
    barrier(CLK_LOCAL_MEM_FENCE);
    { /* 8 work-items' sums of one row, in lane order: team / 8 segments of 8 rows */
        int s = lane / segments, seg = lane % segments;
        __local const float *r = red + s * MI4_GROUP + base + 8 * seg;
        float t = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j)
            t += r[j];
        part[lid] = t;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float total = 0.0f, up = 0.0f;
    if (lane < MI4_LANES_SUMS / halves) {
        for (int seg = 0; seg < segments; ++seg)
            total += part[base + lane * segments + seg];
        if (halves == 2)
            for (int seg = 0; seg < segments; ++seg)
                up += part[base + (lane + MI4_LANES_SUMS / 2) * segments + seg];
    }
    *second = up;
    return total;
}

/* The work-group's batches of one expert's rows against the token's
 * activations (x + x_at elements of dtype). Batch b covers columns
 * [b * per_batch, +per_batch); groups walk batches group, group + groups,
 * ... Each column's totals times `scale` go to out[out_at + column]: w13
 * (halves 2) the activation of gate and up, w2 the sum. */
void mi4_lanes_walk(const mi4_expert_rows *w, __local float *red, __local float *part,
                    __global const uchar *x, int dtype, long x_at, int group_size, int team,
                    float scale, int act_kind, float limit, float alpha, float beta,
                    __global float *out, long out_at, int ppl)
{
    int lid = (int)get_local_id(0), lane = lid % team, teams = MI4_GROUP / team;
    int per_half = MI4_LANES_SUMS / w->halves, per_batch = teams * per_half;
    int p[MI4_LANES_PIECES], group[MI4_LANES_PIECES], live[MI4_LANES_PIECES];
    float xv[MI4_LANES_PIECES * 32];
#pragma unroll
    for (int i = 0; i < MI4_LANES_PIECES; ++i) {
        int piece = lane + i * team;
        live[i] = i < ppl && piece < w->pieces;
        p[i] = live[i] ? piece : w->pieces - 1;
        group[i] = mi4_group_of(32 * p[i], group_size, mi4_group_shift(group_size));
#pragma unroll
        for (int k = 0; k < 32; k += 4) {
            float4 v = live[i] ? mi4_load4(x, dtype, x_at + 32 * piece + k) : (float4)(0.0f);
            xv[32 * i + k] = v.x * mi4_staged_scale(k & 7);
            xv[32 * i + k + 1] = v.y * mi4_staged_scale((k + 1) & 7);
            xv[32 * i + k + 2] = v.z * mi4_staged_scale((k + 2) & 7);
            xv[32 * i + k + 3] = v.w * mi4_staged_scale((k + 3) & 7);
        }
    }
    uint4 piece[MI4_LANES_SUMS][MI4_LANES_PIECES];
    uint scales[MI4_LANES_SUMS][MI4_LANES_PIECES];
    int b = (int)get_group_id(0), step = (int)get_num_groups(0);
    int col0 = b * per_batch + lid / team * per_half;
    if (MI4_LANES_EARLY && b * per_batch < w->cols)
        mi4_lanes_load(w, col0, p, group, ppl, piece, scales);
    for (; b * per_batch < w->cols; b += step) {
        if (!MI4_LANES_EARLY)
            mi4_lanes_load(w, col0, p, group, ppl, piece, scales);
        float sums[MI4_LANES_SUMS];
#pragma unroll
        for (int s = 0; s < MI4_LANES_SUMS; ++s) {
            float t = 0.0f;
#pragma unroll
            for (int i = 0; i < MI4_LANES_PIECES; ++i)
                if (live[i])
                    t += mi4_lanes_dot(piece[s][i], xv + 32 * i) *
                         mi4_scale_from_bits(scales[s][i], w->scales_bf16);
            sums[s] = t;
        }
        int col = col0 + lane;
        col0 += step * per_batch;
        if (MI4_LANES_EARLY && (b + step) * per_batch < w->cols) /* next batch's loads first */
            mi4_lanes_load(w, col0, p, group, ppl, piece, scales);
        float up, sum = mi4_lanes_finish(red, part, sums, team, lane, w->halves, &up);
        if (lane < per_half && col < w->cols)
            out[out_at + col] = w->halves == 2 ? mi4_activate(act_kind, sum * scale, up * scale,
                                                              limit, alpha, beta)
                                               : sum * scale;
    }
}

void mi4_w13_lanes(__local float *red, __local float *part, int ppl, MI4_W13_PARAMS)
{
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0];
    float scale = weight_on_input ? topk_weights[slot] : 1.0f;
    mi4_expert_rows w =
        mi4_expert_rows_at(packed, scales, 0, expert, 2 * N, K, N, 2, group_size, scales_bf16);
    mi4_lanes_walk(&w, red, part, hidden, dtype, (long)(slot / topk) * K, group_size, team,
                   scale, act_kind, limit, alpha, beta, act_out, (long)slot * N, ppl);
}

void mi4_w2_lanes(__local float *red, __local float *part, int ppl, MI4_W2_PARAMS)
{
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0];
    float scale = weight_on_input ? 1.0f : topk_weights[slot];
    mi4_expert_rows w =
        mi4_expert_rows_at(packed, scales, 0, expert, K, N, K, 1, group_size, scales_bf16);
    mi4_lanes_walk(&w, red, part, (__global const uchar *)act, MI4_DT_F32, (long)slot * N,
                   group_size, team, scale, 0, 0.0f, 0.0f, 0.0f, slot_out, (long)slot * K, ppl);
}

/* ppl: the most pieces per work-item, a constant per kernel so that the
 * one-piece kernels hold registers for one piece only (the host takes them
 * for rows of at most MI4_GROUP pieces: on the H200 the two-piece build
 * took 251 registers, one work-group an SM). */
#define MI4_LANES_ENTRY(name, body, ppl, PARAMS, ARGS)                                             \
    __kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void name(      \
        PARAMS)                                                                                    \
    {                                                                                              \
        __local float red[MI4_LANES_SUMS * MI4_GROUP];                                             \
        __local float part[MI4_GROUP];                                                             \
        body(red, part, ppl, ARGS);                                                                \
    }

MI4_LANES_ENTRY(mi4_w13_gemv_lanes, mi4_w13_lanes, 1, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_LANES_ENTRY(mi4_w2_gemv_lanes, mi4_w2_lanes, 1, MI4_W2_PARAMS, MI4_W2_ARGS)
MI4_LANES_ENTRY(mi4_w13_gemv_lanes2, mi4_w13_lanes, 2, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_LANES_ENTRY(mi4_w2_gemv_lanes2, mi4_w2_lanes, 2, MI4_W2_PARAMS, MI4_W2_ARGS)
