/* One-token GEMVs whose work-groups live longer (mi4_w13_gemv_walk,
 * mi4_w2_gemv_walk; the host launches them with MOEINT4_XPU_GEMV_WALK, a
 * few work-groups per compute unit). Same arguments, teams and arithmetic
 * as mi4_w13_gemv / mi4_w2_gemv (gemm.cl): each sum is added in the same
 * order, so the results are the same bits (test_gemv_walk checks it on
 * PoCL). What differs is the schedule.
 * On the H200 the GEMVs' short work-groups (stage activations, barrier,
 * one or two batches of loads, barrier, reduce) left loads and arithmetic
 * hardly overlapped; here:
 *  - a work-group walks rounds of columns (round g, g + groups, ...), each
 *    round MI4_WALK_COLUMNS columns per team (neighbouring teams take
 *    neighbouring columns at each step), and adds the sums of the whole
 *    round in one local-memory reduction;
 *  - the activations are staged once per work-group when a row fits one
 *    block (else once per block and round, as the GEMV does);
 *  - a team's pieces of all its columns form one sequence walked in
 *    batches of MI4_WALK_AHEAD, so the loads of the next column go out with
 *    those of the end of the current one;
 *  - MI4_WALK_SPLIT=1: w13's gate and up rows are separate columns of the
 *    sequence (half the loads in flight per batch, fewer registers);
 *  - MI4_WALK_X_GLOBAL=1: activations read from global memory (cached) as
 *    float4, no staging and no barrier before the loads (16-byte path;
 *    rows on the word path are still staged);
 *  - MI4_WALK_LOCKSTEP=L: L of a team's columns walked side by side, each
 *    piece's activations read once for all of their rows (fewer local
 *    memory reads per code: w2 reads one float4 per 4 codes otherwise).
 * All are build options (MOEINT4_XPU_BUILD_OPTIONS); the defaults below
 * are a guess, not a measurement. */

#ifndef MI4_WALK_COLUMNS
#define MI4_WALK_COLUMNS 2
#endif
#ifndef MI4_WALK_AHEAD
#define MI4_WALK_AHEAD MI4_AHEAD
#endif
#ifndef MI4_WALK_SPLIT
#define MI4_WALK_SPLIT 0
#endif
#ifndef MI4_WALK_X_GLOBAL
#define MI4_WALK_X_GLOBAL 0
#endif
#ifndef MI4_WALK_LOCKSTEP
#define MI4_WALK_LOCKSTEP 1
#endif
#if MI4_WALK_COLUMNS % MI4_WALK_LOCKSTEP != 0
#error "MI4_WALK_LOCKSTEP must divide MI4_WALK_COLUMNS"
#endif
/* sums per work-item and round: w13 gate sums, then up sums (w2: the first half) */
#define MI4_WALK_SUMS (2 * MI4_WALK_COLUMNS)

/* The rows a team walks in one round: column j < MI4_WALK_COLUMNS is
 * min(n0 + j * step, cols - 1) (a column past the end reads the last row
 * and writes nothing); w13 (halves 2) has the up row `cols` rows after the
 * gate row. Rows and scales are those of one expert. */
typedef struct mi4_walk_rows {
    __global const uchar *packed;
    __global const ushort *scales;
    int in, groups, group_size, group_shift, scales_bf16, cols, halves, n0, step;
} mi4_walk_rows;

/* 4 activations from global memory, index a multiple of 4 */
float4 mi4_load4(__global const uchar *base, int dtype, long index)
{
    if (dtype == MI4_DT_F32)
        return vload4(0, (__global const float *)base + index);
    if (dtype == MI4_DT_F16)
        return vload_half4(0, (__global const half *)base + index);
    return as_float4(convert_uint4(vload4(0, (__global const ushort *)base + index)) << 16);
}

/* mi4_dot_piece with the piece's 32 activations in registers (xv[0..7]) */
float mi4_dot_piece_values(uint4 piece, const float4 *xv)
{
    return (mi4_dot_word_values(piece.x, xv[0], xv[1]) +
            mi4_dot_word_values(piece.y, xv[2], xv[3])) +
           (mi4_dot_word_values(piece.z, xv[4], xv[5]) +
            mi4_dot_word_values(piece.w, xv[6], xv[7]));
}

/* The expert row of column col (< MI4_WALK_COLUMNS) of the round, half h
 * (w13: 0 gate, 1 up). */
int mi4_walk_row(const mi4_walk_rows *w, int h, int col)
{
    return h * w->cols + min(w->n0 + col * w->step, w->cols - 1);
}

/* A job: MI4_WALK_LOCKSTEP neighbouring columns of the round walked in
 * lockstep (each piece's activations read once for all their rows); paired
 * w13 jobs take gate and up rows, split ones the gate rows of the round's
 * columns, then their up rows. Sum l of job q (l < MI4_WALK_LOCKSTEP) is
 * acc[mi4_walk_sum(q, l)], its up sum (paired) MI4_WALK_COLUMNS further. */
#define MI4_WALK_JOB_COLUMNS (MI4_WALK_COLUMNS / MI4_WALK_LOCKSTEP)
int mi4_walk_sum(int job, int l)
{
    return job / MI4_WALK_JOB_COLUMNS * MI4_WALK_COLUMNS +
           job % MI4_WALK_JOB_COLUMNS * MI4_WALK_LOCKSTEP + l;
}

/* A job's sums out of and back into acc, at constant indices (acc stays
 * in registers). Two loops, not one with a direction flag: IGC's SPIR-V
 * builds (not optimised) of the walking GEMVs spill more with the flag. */
void mi4_walk_take(const float *acc, int job, float *sum_g, float *sum_u)
{
#pragma unroll
    for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l)
#pragma unroll
        for (int i = 0; i < MI4_WALK_SUMS; ++i) {
            if (i == mi4_walk_sum(job, l))
                sum_g[l] = acc[i];
            if (i == mi4_walk_sum(job, l) + MI4_WALK_COLUMNS)
                sum_u[l] = acc[i];
        }
}

void mi4_walk_give(float *acc, int job, const float *sum_g, const float *sum_u, int paired)
{
#pragma unroll
    for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l)
#pragma unroll
        for (int i = 0; i < MI4_WALK_SUMS; ++i) {
            if (i == mi4_walk_sum(job, l))
                acc[i] = sum_g[l];
            if (paired && i == mi4_walk_sum(job, l) + MI4_WALK_COLUMNS)
                acc[i] = sum_u[l];
        }
}

/* The rows of job q: piece and scale pointers per lockstep column. */
void mi4_walk_job_rows(const mi4_walk_rows *w, __global const uint4 *p, int row_pieces, int job,
                       __global const uint4 **pr, __global const ushort **sr)
{
    int h = job / MI4_WALK_JOB_COLUMNS, col0 = job % MI4_WALK_JOB_COLUMNS * MI4_WALK_LOCKSTEP;
#pragma unroll
    for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l) {
        int row = mi4_walk_row(w, h, col0 + l);
        pr[l] = p + row * row_pieces;
        sr[l] = w->scales + row * w->groups;
    }
}

/* The team's 16-byte pieces [kb0, kb0 + kbn) of every job of the round,
 * added into acc. A work-item takes the GEMV's pieces of each job (lane,
 * lane + team, ...), one job after the other, each added to running sums
 * taken from acc when the job starts and put back when it ends, so every
 * sum is added in the GEMV's order. x: staged (xs, interleaved as
 * MI4_CODE_AT) or global (x_at: the token's row start in elements). */
void mi4_walk_pieces(const mi4_walk_rows *w, __local const float4 *xs, __global const uchar *x,
                     int dtype, long x_at, int x_global, int kb0, int kbn, int team, int lane,
                     float *acc)
{
    int pieces = kbn / 32;
    int paired = !MI4_WALK_SPLIT && w->halves == 2;
    int jobs = MI4_WALK_JOB_COLUMNS * (paired ? 1 : w->halves);
    /* offsets within one expert's rows fit an int (its packed bytes / 16) */
    int row_pieces = w->in / 32, up_pieces = w->cols * row_pieces;
    int up_groups = w->cols * w->groups;
    __global const uint4 *p = (__global const uint4 *)w->packed + kb0 / 32;
    int c = lane, j = lane < pieces ? 0 : jobs; /* rows shorter than the team: idle lanes */
    /* the rows of job j (of the last job once the sequence has ended) */
    __global const uint4 *pr[MI4_WALK_LOCKSTEP];
    __global const ushort *sr[MI4_WALK_LOCKSTEP];
    mi4_walk_job_rows(w, p, row_pieces, min(j, jobs - 1), pr, sr);
    /* the job being summed: a work-item's piece index only grows within a
     * job and starts again at `lane` in the next, so a piece at or below
     * the last one used starts the next job */
    int job = j, last = -1;
    float sum_g[MI4_WALK_LOCKSTEP], sum_u[MI4_WALK_LOCKSTEP];
#pragma unroll
    for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l)
        sum_g[l] = sum_u[l] = 0.0f;
    if (job < jobs)
        mi4_walk_take(acc, job, sum_g, sum_u);
    while (j < jobs) {
        uint4 g[MI4_WALK_AHEAD][MI4_WALK_LOCKSTEP], u[MI4_WALK_AHEAD][MI4_WALK_LOCKSTEP];
        float sg[MI4_WALK_AHEAD][MI4_WALK_LOCKSTEP], su[MI4_WALK_AHEAD][MI4_WALK_LOCKSTEP];
        int ca[MI4_WALK_AHEAD]; /* -1: past the end of the sequence */
#pragma unroll
        for (int a = 0; a < MI4_WALK_AHEAD; ++a) { /* loads only: all in flight */
            int live = j < jobs, cc = live ? c : pieces - 1;
            int group = mi4_group_of(kb0 + 32 * cc, w->group_size, w->group_shift);
#pragma unroll
            for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l) {
                g[a][l] = pr[l][cc];
                sg[a][l] = mi4_load_scale(sr[l], w->scales_bf16, group);
                u[a][l] = paired ? pr[l][up_pieces + cc] : g[a][l];
                su[a][l] = paired ? mi4_load_scale(sr[l] + up_groups, w->scales_bf16, group) : 0.0f;
            }
            ca[a] = live ? cc : -1;
            c += team;
            if (c >= pieces && j < jobs) { /* the next job, from the same piece as the GEMV's */
                c = lane, ++j;
                if (j < jobs)
                    mi4_walk_job_rows(w, p, row_pieces, j, pr, sr);
            }
        }
#pragma unroll
        for (int a = 0; a < MI4_WALK_AHEAD; ++a) {
            if (ca[a] < 0)
                continue;
            if (ca[a] <= last) {
                mi4_walk_give(acc, job, sum_g, sum_u, paired);
                ++job;
                mi4_walk_take(acc, job, sum_g, sum_u);
            }
            last = ca[a];
            if (x_global) {
                float4 xv[8];
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    xv[i] = mi4_load4(x, dtype, x_at + kb0 + 32 * ca[a] + 4 * i);
#pragma unroll
                for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l) {
                    sum_g[l] += mi4_dot_piece_values(g[a][l], xv) * sg[a][l];
                    if (paired)
                        sum_u[l] += mi4_dot_piece_values(u[a][l], xv) * su[a][l];
                }
            } else {
                __local const float4 *xp = xs + MI4_PIECE_AT(ca[a], MI4_XBLOCK / 32);
                int stride = MI4_PIECE_STRIDE(MI4_XBLOCK / 32);
#pragma unroll
                for (int l = 0; l < MI4_WALK_LOCKSTEP; ++l) {
                    sum_g[l] += mi4_dot_piece(g[a][l], xp, stride) * sg[a][l];
                    if (paired)
                        sum_u[l] += mi4_dot_piece(u[a][l], xp, stride) * su[a][l];
                }
            }
        }
    }
    if (job < jobs)
        mi4_walk_give(acc, job, sum_g, sum_u, paired);
}

/* Rows that are not 16-byte pieces: each column through the GEMV's word
 * path (mi4_block), its sums carried in and out of acc. */
void mi4_walk_words(const mi4_walk_rows *w, __local const float4 *xs, int kb0, int kbn, int team,
                    int lane, float *acc)
{
    int in_bytes = w->in / 2;
#pragma unroll
    for (int j = 0; j < MI4_WALK_COLUMNS; ++j) {
        long row = mi4_walk_row(w, 0, j), up = w->halves == 2 ? row + w->cols : row;
        float t[2 * MI4_TILE_ROWS];
        t[0] = acc[j];
        t[MI4_TILE_ROWS] = acc[MI4_WALK_COLUMNS + j];
        int span = w->n0 + j * w->step < w->cols ? kbn : 0;
        mi4_block(xs, MI4_XBLOCK, kb0, span, 1, 1, w->halves, w->packed + row * in_bytes,
                  w->packed + up * in_bytes, w->scales + row * w->groups,
                  w->scales + up * w->groups, 0, 0, w->scales_bf16, w->group_size, 0, team,
                  lane, 0, 0, 0, 0, 0, 0, 0, t); /* the word path (vec 0): no preloaded batch */
        acc[j] = t[0];
        acc[MI4_WALK_COLUMNS + j] = t[MI4_TILE_ROWS];
    }
}

/* One round of a team: its sums over whole rows against the token's
 * activations (x + x_at elements, of dtype), published in red for
 * mi4_lanes_total. Every work-item of the group calls it (barriers);
 * `first`: the group's first round (activations that fit one block are
 * staged then only). Rounds alternate between two red areas: a round's
 * totals are read before the barrier of the next round's publication,
 * which every work-item passes before the round after writes that area
 * again, so no barrier closes a round. */
void mi4_walk_round(const mi4_walk_rows *w, __local float4 *xs, __local float *red,
                    __global const uchar *x, int dtype, long x_at, int first, int team, int lane)
{
    int vec = w->in % 32 == 0 && w->group_size % 32 == 0 && ((size_t)w->packed & 15) == 0;
    int x_global = MI4_WALK_X_GLOBAL && vec;
    int block = x_global ? w->in : MI4_XBLOCK;
    int lid = (int)get_local_id(0);
    __local float *xf = (__local float *)xs;
    float acc[MI4_WALK_SUMS];
#pragma unroll
    for (int i = 0; i < MI4_WALK_SUMS; ++i)
        acc[i] = 0.0f;
    for (int kb0 = 0; kb0 < w->in; kb0 += block) {
        int kbn = min(block, w->in - kb0);
        int stage = !x_global && (first || w->in > block);
        if (stage) {
            for (int k = lid; k < kbn; k += MI4_GROUP)
                xf[vec ? MI4_CODE_AT(k, MI4_XBLOCK / 32) : k] =
                    MI4_STAGED(mi4_load(x, dtype, x_at + kb0 + k), k);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (vec)
            mi4_walk_pieces(w, xs, x, dtype, x_at, x_global, kb0, kbn, team, lane, acc);
        else
            mi4_walk_words(w, xs, kb0, kbn, team, lane, acc);
        if (stage && w->in > block)
            barrier(CLK_LOCAL_MEM_FENCE); /* all have read the block */
    }
#pragma unroll
    for (int i = 0; i < MI4_WALK_SUMS; ++i)
        if (i < MI4_WALK_COLUMNS * w->halves)
            red[i * MI4_GROUP + lid] = acc[i];
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The rows of `expert` (out_rows of in codes) as the walk sees them. */
mi4_walk_rows mi4_walk_setup(__global const uchar *packed, __global const ushort *scales,
                             int expert, int out_rows, int in, int cols, int halves, int group_size,
                             int scales_bf16, int team)
{
    mi4_walk_rows w;
    w.groups = in / group_size;
    w.packed = packed + (long)expert * out_rows * (in / 2);
    w.scales = scales + (long)expert * out_rows * w.groups;
    w.in = in;
    w.group_size = group_size;
    w.group_shift = mi4_group_shift(group_size);
    w.scales_bf16 = scales_bf16;
    w.cols = cols;
    w.halves = halves;
    w.step = MI4_GROUP / team;
    w.n0 = 0;
    return w;
}

/* Round r covers columns [r * per_round, +per_round): whether it exists,
 * and the team's first column in it (w->n0). */
int mi4_walk_start(mi4_walk_rows *w, int round, int team)
{
    w->n0 = round * MI4_WALK_COLUMNS * w->step + (int)get_local_id(0) / team;
    return round * MI4_WALK_COLUMNS * w->step < w->cols;
}

void mi4_w13_walk(__local float4 *xs, __local float *red, MI4_W13_PARAMS)
{
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0], lane = (int)get_local_id(0) % team;
    float scale = weight_on_input ? topk_weights[slot] : 1.0f;
    mi4_walk_rows w =
        mi4_walk_setup(packed, scales, expert, 2 * N, K, N, 2, group_size, scales_bf16, team);
    for (int round = (int)get_group_id(0), turn = 0; mi4_walk_start(&w, round, team);
         round += (int)get_num_groups(0), turn ^= 1) {
        __local float *sums = red + turn * MI4_WALK_SUMS * MI4_GROUP;
        mi4_walk_round(&w, xs, sums, hidden, dtype, (long)(slot / topk) * K,
                       round == (int)get_group_id(0), team, lane);
        for (int j = lane; j < MI4_WALK_COLUMNS; j += team) { /* lane j finishes column j */
            int n = w.n0 + j * w.step;
            if (n < N) {
                float gate = mi4_lanes_total(sums, j, team, lane) * scale;
                float up = mi4_lanes_total(sums, MI4_WALK_COLUMNS + j, team, lane) * scale;
                act_out[(long)slot * N + n] = mi4_activate(act_kind, gate, up, limit, alpha, beta);
            }
        }
    }
}

void mi4_w2_walk(__local float4 *xs, __local float *red, MI4_W2_PARAMS)
{
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0], lane = (int)get_local_id(0) % team;
    float scale = weight_on_input ? 1.0f : topk_weights[slot];
    mi4_walk_rows w =
        mi4_walk_setup(packed, scales, expert, K, N, K, 1, group_size, scales_bf16, team);
    for (int round = (int)get_group_id(0), turn = 0; mi4_walk_start(&w, round, team);
         round += (int)get_num_groups(0), turn ^= 1) {
        __local float *sums = red + turn * MI4_WALK_SUMS * MI4_GROUP;
        mi4_walk_round(&w, xs, sums, (__global const uchar *)act, MI4_DT_F32, (long)slot * N,
                       round == (int)get_group_id(0), team, lane);
        for (int j = lane; j < MI4_WALK_COLUMNS; j += team) {
            int k = w.n0 + j * w.step;
            if (k < K)
                slot_out[(long)slot * K + k] = mi4_lanes_total(sums, j, team, lane) * scale;
        }
    }
}

#define MI4_WALK_ENTRY(name, body, PARAMS, ARGS)                                                   \
    __kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void name(      \
        PARAMS)                                                                                    \
    {                                                                                              \
        __local float4 xs[MI4_XBLOCK / 4];                                                         \
        __local float red[2 * MI4_WALK_SUMS * MI4_GROUP];                                          \
        body(xs, red, ARGS);                                                                       \
    }

MI4_WALK_ENTRY(mi4_w13_gemv_walk, mi4_w13_walk, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_WALK_ENTRY(mi4_w2_gemv_walk, mi4_w2_walk, MI4_W2_PARAMS, MI4_W2_ARGS)
