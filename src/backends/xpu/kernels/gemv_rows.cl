/* One-token GEMVs that split each row over a few work-items and keep the
 * reductions out of the walk (mi4_w13_gemv_rows, mi4_w2_gemv_rows; the
 * host launches them with MOEINT4_XPU_GEMV_ROWS, a few work-groups per
 * compute unit, on rows of 16-byte pieces in groups of whole pieces).
 *
 * Why: the staged, walking and lanes GEMVs end every batch of a few rows
 * with a work-group reduction (barriers), and a work-group's loads stop
 * while it reduces; on the H200 they stream at 32-40% of the copy
 * bandwidth. Here a team of `team` work-items (4 to 32, the host's choice)
 * shares one row: work-item q reads pieces q, q + team, ... (a team reads
 * team * 16 neighbouring bytes a step) and keeps one sum for the whole row.
 * The work-group's MI4_GROUP / team teams walk that many rows side by side
 * (a chunk; w13: the gate and up rows of half as many columns). The
 * chunk's sums meet in local memory behind one barrier per chunk, in two
 * buffers, so that a chunk's sums never overwrite the previous chunk's
 * before they are read. The token's activations are staged in local
 * memory once per work-group (per block of MI4_ROWS_XBLOCK values and
 * chunk when the row is longer), pre-scaled for codes decoded in place
 * (mi4_staged_scale), each piece's 32 values followed by 4 of padding so
 * that the 8 pieces a team of 8 reads at once lie in distinct banks.
 * Sums: a work-item's pieces in order, then the team's sums in lane order:
 * deterministic (test_gemv_rows checks against the double reference). */

/* Build switches (MOEINT4_XPU_BUILD_OPTIONS): MI4_ROWS_AHEAD pieces of each
 * row a work-item loads before using any; MI4_ROWS_PIPELINE=1
 * (mi4_rows_sum); MI4_ROWS_LOCKSTEP rows per team, walked side by side so
 * that each piece's activations are read once for all of them (the host
 * sizes its grid for 1: with more, some work-groups find nothing to do);
 * MI4_ROWS_MASK_ONCE=1 (mi4_rows_dots); MI4_ROWS_STREAM_PROBE=1 replaces
 * the arithmetic by one product per word (wrong results: what the loads
 * alone take). */
#ifndef MI4_ROWS_AHEAD
#define MI4_ROWS_AHEAD 4
#endif
#ifndef MI4_ROWS_PIPELINE
#define MI4_ROWS_PIPELINE 0
#endif
#ifndef MI4_ROWS_LOCKSTEP
#define MI4_ROWS_LOCKSTEP 1
#endif
#ifndef MI4_ROWS_MASK_ONCE
#define MI4_ROWS_MASK_ONCE 0
#endif
#ifndef MI4_ROWS_STREAM_PROBE
#define MI4_ROWS_STREAM_PROBE 0
#endif
#define MI4_ROWS_XBLOCK 4096 /* activations staged at a time */
#define MI4_ROWS_PIECE 36    /* floats a staged piece takes: 32 and padding */

/* Stages activations [x_at, x_at + count) (dtype; count a multiple of 32),
 * pre-scaled for codes in place, into xs. Every work-item calls it. */
void mi4_rows_stage(__local float4 *xs, __global const uchar *x, int dtype, long x_at, int count)
{
    for (int k = 4 * (int)get_local_id(0); k < count; k += 4 * MI4_GROUP) {
        float4 v = mi4_load4(x, dtype, x_at + k);
        int p = k & 7; /* 0 or 4 */
        float4 scaled = (float4)(v.x * mi4_staged_scale(p), v.y * mi4_staged_scale(p + 1),
                                 v.z * mi4_staged_scale(p + 2), v.w * mi4_staged_scale(p + 3));
        xs[(k >> 5) * (MI4_ROWS_PIECE / 4) + (k & 31) / 4] = scaled;
    }
}

/* Code i of a word already ORed with 2^23's bits (mi4_rows_dots), as
 * (code - 8) 16^i: one AND, where MI4_CODE_IN_PLACE masks and ORs per code.
 * The same values. */
#define MI4_CODE_MASKED(v, i)                                                                      \
    (as_float((v) & (MI4_MAGIC | (15u << (4 * (i))))) -                                            \
     (8388608.0f + 8.0f * (float)(1u << (4 * (i)))))

/* Adds the R = MI4_ROWS_LOCKSTEP pieces' 32 codes (one piece of each of the
 * team's rows) against their staged activations (8 float4, read once for
 * all R rows) to sum[0..R). */
void mi4_rows_dots(const uint4 *piece, __local const float4 *x, float *sum)
{
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float4 a = x[2 * j], b = x[2 * j + 1];
#pragma unroll
        for (int t = 0; t < MI4_ROWS_LOCKSTEP; ++t) {
            uint w = j == 0 ? piece[t].x : j == 1 ? piece[t].y : j == 2 ? piece[t].z : piece[t].w;
            float s = sum[t];
#if MI4_ROWS_STREAM_PROBE
            s += (float)w * a.x;
#elif MI4_ROWS_MASK_ONCE
            uint low = (w & 0x007fffffu) | MI4_MAGIC, high = (w >> 20) | MI4_MAGIC;
            s = fma(MI4_CODE_MASKED(low, 0), a.x, s);
            s = fma(MI4_CODE_MASKED(low, 1), a.y, s);
            s = fma(MI4_CODE_MASKED(low, 2), a.z, s);
            s = fma(MI4_CODE_MASKED(low, 3), a.w, s);
            s = fma(MI4_CODE_MASKED(low, 4), b.x, s);
            s = fma(MI4_CODE_MASKED(high, 0), b.y, s);
            s = fma(MI4_CODE_MASKED(high, 1), b.z, s);
            s = fma(MI4_CODE_MASKED(high, 2), b.w, s);
#else
            uint high = w >> 20;
            s = fma(MI4_CODE_IN_PLACE(w, 0), a.x, s);
            s = fma(MI4_CODE_IN_PLACE(w, 1), a.y, s);
            s = fma(MI4_CODE_IN_PLACE(w, 2), a.z, s);
            s = fma(MI4_CODE_IN_PLACE(w, 3), a.w, s);
            s = fma(MI4_CODE_IN_PLACE(w, 4), b.x, s);
            s = fma(MI4_CODE_IN_PLACE(high, 0), b.y, s);
            s = fma(MI4_CODE_IN_PLACE(high, 1), b.z, s);
            s = fma(MI4_CODE_IN_PLACE(high, 2), b.w, s);
#endif
            sum[t] = s;
        }
    }
}

/* The team's rows (MI4_ROWS_LOCKSTEP of them) within one expert. */
typedef struct mi4_rows_team {
    __global const uint4 *row[MI4_ROWS_LOCKSTEP];
    __global const ushort *scales[MI4_ROWS_LOCKSTEP];
} mi4_rows_team;

/* Loads the batch of pieces i, i + team, ... (MI4_ROWS_AHEAD of them; past
 * the end: the last piece, unused) of the team's rows and their scales'
 * bits: piece[a * R + t] is piece a of row t. */
void mi4_rows_load(const mi4_expert_rows *w, const mi4_rows_team *rows, int p0, int count, int i,
                   int team, uint4 *piece, uint *bits)
{
#pragma unroll
    for (int a = 0; a < MI4_ROWS_AHEAD; ++a) {
        int p = p0 + min(i + a * team, count - 1);
        int group = mi4_group_of(32 * p, w->group_size, w->group_shift);
#pragma unroll
        for (int t = 0; t < MI4_ROWS_LOCKSTEP; ++t) {
            piece[a * MI4_ROWS_LOCKSTEP + t] = rows->row[t][p];
            bits[a * MI4_ROWS_LOCKSTEP + t] = rows->scales[t][group];
        }
    }
}

/* The batch's products added to acc[t] in order. */
void mi4_rows_use(const mi4_expert_rows *w, __local const float4 *xs, int count, int i, int team,
                  const uint4 *piece, const uint *bits, float *acc)
{
#pragma unroll
    for (int a = 0; a < MI4_ROWS_AHEAD; ++a)
        if (i + a * team < count) {
            float dot[MI4_ROWS_LOCKSTEP];
#pragma unroll
            for (int t = 0; t < MI4_ROWS_LOCKSTEP; ++t)
                dot[t] = 0.0f;
            mi4_rows_dots(piece + a * MI4_ROWS_LOCKSTEP, xs + (i + a * team) * (MI4_ROWS_PIECE / 4),
                          dot);
#pragma unroll
            for (int t = 0; t < MI4_ROWS_LOCKSTEP; ++t)
                acc[t] +=
                    dot[t] * mi4_scale_from_bits(bits[a * MI4_ROWS_LOCKSTEP + t], w->scales_bf16);
        }
}

/* Adds the work-item's products over pieces [p0, p0 + count) of the team's
 * rows (pieces q, q + team, ...) to acc, against xs holding those pieces'
 * activations. With MI4_ROWS_PIPELINE=1 the next batch's loads go out
 * before this batch's arithmetic (two batches of registers). */
void mi4_rows_sum(const mi4_expert_rows *w, const mi4_rows_team *rows, __local const float4 *xs,
                  int p0, int count, int q, int team, float *acc)
{
    enum { N = MI4_ROWS_AHEAD * MI4_ROWS_LOCKSTEP };
    uint4 piece[N];
    uint bits[N];
    int stride = team * MI4_ROWS_AHEAD;
#if MI4_ROWS_PIPELINE
    if (q < count)
        mi4_rows_load(w, rows, p0, count, q, team, piece, bits);
    for (int i = q; i < count; i += stride) {
        uint4 next[N];
        uint next_bits[N];
        if (i + stride < count)
            mi4_rows_load(w, rows, p0, count, i + stride, team, next, next_bits);
        mi4_rows_use(w, xs, count, i, team, piece, bits, acc);
#pragma unroll
        for (int a = 0; a < N; ++a)
            piece[a] = next[a], bits[a] = next_bits[a];
    }
#else
    for (int i = q; i < count; i += stride) {
        mi4_rows_load(w, rows, p0, count, i, team, piece, bits);
        mi4_rows_use(w, xs, count, i, team, piece, bits, acc);
    }
#endif
}

/* The work-group's chunks of one expert's rows against the token's
 * activations (x + x_at elements of dtype): chunk c covers columns
 * [c * per_chunk, +per_chunk); groups walk chunks group, group + groups, ...
 * Each column's totals times `scale` go to out[out_at + column]: w13
 * (halves 2) the activation of gate and up, w2 the sum. A column past the
 * end reads the last row and writes nothing. */
void mi4_rows_walk(const mi4_expert_rows *w, __local float4 *xs, __local float *sums,
                   __global const uchar *x, int dtype, long x_at, int team, float scale,
                   int act_kind, float limit, float alpha, float beta, __global float *out,
                   long out_at)
{
    enum { R = MI4_ROWS_LOCKSTEP };
    int lid = (int)get_local_id(0), q = lid % team, slot = lid / team;
    int per_chunk = MI4_GROUP / team * R / w->halves, in = 32 * w->pieces;
    int once = in <= MI4_ROWS_XBLOCK;
    int chunk = (int)get_group_id(0), step = (int)get_num_groups(0);
    if (once && chunk * per_chunk < w->cols) {
        mi4_rows_stage(xs, x, dtype, x_at, in);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int buf = 0; chunk * per_chunk < w->cols; chunk += step, buf ^= 1) {
        /* the team's rows: j = slot * R + t of the chunk's, column j / halves */
        mi4_rows_team rows;
#pragma unroll
        for (int t = 0; t < R; ++t) {
            int j = slot * R + t;
            int col = min(chunk * per_chunk + j / w->halves, w->cols - 1);
            long row = (long)(j % w->halves) * w->cols + col;
            rows.row[t] = w->packed + row * w->pieces;
            rows.scales[t] = w->scales + row * w->groups;
        }
        float acc[R];
#pragma unroll
        for (int t = 0; t < R; ++t)
            acc[t] = 0.0f;
        if (once)
            mi4_rows_sum(w, &rows, xs, 0, w->pieces, q, team, acc);
        else
            for (int kb = 0; kb < in; kb += MI4_ROWS_XBLOCK) {
                int count = min(MI4_ROWS_XBLOCK, in - kb);
                barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with the last block */
                mi4_rows_stage(xs, x, dtype, x_at + kb, count);
                barrier(CLK_LOCAL_MEM_FENCE);
                mi4_rows_sum(w, &rows, xs, kb / 32, count / 32, q, team, acc);
            }
        /* row j's sums at red[j * team + q] */
        __local float *red = sums + buf * MI4_GROUP * R;
#pragma unroll
        for (int t = 0; t < R; ++t)
            red[(slot * R + t) * team + q] = acc[t];
        barrier(CLK_LOCAL_MEM_FENCE);
        int first = chunk * per_chunk;
        if (lid < per_chunk && first + lid < w->cols) {
            __local const float *gate = red + lid * w->halves * team;
            float g = 0.0f, u = 0.0f;
            for (int j = 0; j < team; ++j)
                g += gate[j];
            if (w->halves == 2)
                for (int j = 0; j < team; ++j)
                    u += gate[team + j];
            out[out_at + first + lid] =
                w->halves == 2 ? mi4_activate(act_kind, g * scale, u * scale, limit, alpha, beta)
                               : g * scale;
        }
    }
}

#define MI4_ROWS_LOCALS                                                                            \
    __local float4 xs[MI4_ROWS_XBLOCK / 32 * MI4_ROWS_PIECE / 4];                                  \
    __local float sums[2 * MI4_GROUP * MI4_ROWS_LOCKSTEP]

__kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void
mi4_w13_gemv_rows(MI4_W13_PARAMS)
{
    MI4_ROWS_LOCALS;
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0];
    float scale = weight_on_input ? topk_weights[slot] : 1.0f;
    mi4_expert_rows w =
        mi4_expert_rows_at(packed, scales, expert, 2 * N, K, N, 2, group_size, scales_bf16);
    mi4_rows_walk(&w, xs, sums, hidden, dtype, (long)(slot / topk) * K, team, scale, act_kind,
                  limit, alpha, beta, act_out, (long)slot * N);
}

__kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void
mi4_w2_gemv_rows(MI4_W2_PARAMS)
{
    MI4_ROWS_LOCALS;
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0];
    float scale = weight_on_input ? 1.0f : topk_weights[slot];
    mi4_expert_rows w =
        mi4_expert_rows_at(packed, scales, expert, K, N, K, 1, group_size, scales_bf16);
    mi4_rows_walk(&w, xs, sums, (__global const uchar *)act, MI4_DT_F32, (long)slot * N, team,
                  scale, 0, 0.0f, 0.0f, 0.0f, slot_out, (long)slot * K);
}
