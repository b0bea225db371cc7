/* forward(): per chunk of tokens, routing on the device (ids and router
 * weights checked there, slots sorted by expert, the GEMM tile list built),
 * the int4 grouped GEMMs, the combine. Everything is enqueued on the
 * caller's queue (or the runtime's own) into buffers the context reserved;
 * the int4 path reads nothing back before the end. Only the oneDNN path
 * (experts with many slots) reads the per-expert counts back, because the
 * host must size oneDNN's matmuls. A forward of several chunks combines into
 * staging and copies to the output last; the combine and that copy skip the
 * write while the device's error record is set, so the output stays
 * untouched on every error. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "xpu_backend.h"

/* routing and GEMM work-groups must be exactly this wide; other kernels take any size */
#define LOCAL_SIZE MI4_XPU_GROUP

typedef struct fwd_state {
    mi4_xpu_context *ctx;
    int async;       /* MOEINT4_FORWARD_ASYNC: enqueue only */
    int32_t *record; /* the error record this forward writes */
    void *staging;   /* several chunks: the combined output before the copy */
    const mi4_xpu_weights *w;
    const moeint4_forward_args *args;
    mi4_xpu_runtime *rt;
    void *queue;
    int64_t chunk_tokens;
    int use_dnnl; /* oneDNN may serve experts of this forward */
    /* what the w13 GEMMs and the oneDNN gather read as the chunk's input:
     * the caller's hidden states (dtype, topk), or for act-order weights
     * the gathered rows (f32, one per slot: topk 1) */
    const void *input;
    int input_dtype, input_topk;
    int reset; /* the next routing launch resets the error record first */
    mi4_xpu_chunk_buffers buf;
    void **dnnl; /* ctx->scratch.dnnl */
    char *err;
    size_t cap;
} fwd_state;

static size_t round_up(size_t value, size_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

static moeint4_status launch(fwd_state *s, mi4_xpu_kernel kernel, size_t size0, size_t size1,
                             int num_args, const mi4_xpu_arg *args)
{
    size_t local[2] = { size0 > 1 ? LOCAL_SIZE : 1, 1 };
    size_t global[2] = { round_up(size0, local[0]), size1 };
    if (size0 == 0 || size1 == 0)
        return MOEINT4_SUCCESS;
    return s->rt->ops->launch(s->rt, s->queue, kernel, global, local, num_args, args, s->err,
                              s->cap);
}

static size_t dtype_size(moeint4_dtype dtype) { return dtype == MOEINT4_DTYPE_F32 ? 4 : 2; }

static moeint4_status reserve_dnnl_buffers(fwd_state *s)
{
    const mi4_xpu_weights *w = s->w;
    mi4_xpu_scratch *sc = &s->ctx->scratch;
    size_t rows = (size_t)s->chunk_tokens * (size_t)s->args->topk;
    size_t K = (size_t)w->hidden, N = (size_t)w->intermediate;
    size_t esize = dtype_size(mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype));
    size_t scales13 = 2 * N * (K / (size_t)w->group13), scales2 = K * (N / (size_t)w->group2);
    size_t bytes[MI4_XPU_DNNL_BUFFERS];
    bytes[MI4_XPU_DNNL_A] = rows * K * esize;
    bytes[MI4_XPU_DNNL_W] = 2 * N * K * esize;
    bytes[MI4_XPU_DNNL_A2] = rows * N * esize;
    bytes[MI4_XPU_DNNL_C13] = rows * 2 * N * 4;
    bytes[MI4_XPU_DNNL_C2] = rows * K * 4;
    bytes[MI4_XPU_DNNL_S] = (scales13 > scales2 ? scales13 : scales2) * 2;
    moeint4_status st = MOEINT4_SUCCESS;
    for (int i = 0; i < MI4_XPU_DNNL_BUFFERS && !st; ++i)
        st = mi4_xpu_reserve(s->ctx, &sc->dnnl[i], &sc->dnnl_bytes[i], bytes[i], s->queue, s->err,
                             s->cap);
    return st;
}

/* Routes the slots of tokens [first_token, +tokens) in one launch of one
 * work-group: clear, count (checking ids and weights into the error record,
 * which the forward's first launch resets) and, with sort, the offsets,
 * the tile list and the sorted slots (kernels/routing.cl). */
static moeint4_status route(fwd_state *s, int64_t first_token, int64_t tokens, int sort,
                            int tile_rows)
{
    const mi4_xpu_weights *w = s->w;
    int topk = s->args->topk;
    int num_slots = (int)(tokens * topk), slot_base = (int)(first_token * topk);
    int num_local = w->num_local, num_experts = w->num_experts;
    int gated = !s->async, reset = s->reset;
    int dnnl_min_rows = s->use_dnnl ? s->ctx->onednn_min_tokens : INT_MAX;
    const int32_t *ids = s->args->topk_ids + first_token * topk;
    const float *weights = s->args->topk_weights + first_token * topk;
    mi4_xpu_arg args[] = { MI4_XPU_PTR(ids),
                           MI4_XPU_PTR(weights),
                           MI4_XPU_PTR(w->expert_map),
                           MI4_XPU_INT(num_slots),
                           MI4_XPU_INT(slot_base),
                           MI4_XPU_INT(num_experts),
                           MI4_XPU_INT(num_local),
                           MI4_XPU_INT(dnnl_min_rows),
                           MI4_XPU_INT(tile_rows),
                           MI4_XPU_INT(gated),
                           MI4_XPU_INT(reset),
                           MI4_XPU_INT(sort),
                           MI4_XPU_PTR(s->buf.slot_expert),
                           MI4_XPU_PTR(s->buf.route),
                           MI4_XPU_PTR(s->buf.sorted),
                           MI4_XPU_PTR(s->record) };
    s->reset = 0;
    return launch(s, MI4_XPU_ROUTE, MI4_XPU_GROUP, 1, 16, args);
}

int mi4_xpu_gemm_team(int in, int forced)
{
    if (forced == 4 || forced == 8 || forced == 16 || forced == 32)
        return forced;
    int team = 4;
    while (team < 16 && 2 * team * 4 * 32 <= in)
        team *= 2;
    return team;
}

size_t mi4_xpu_gemm_width(int columns, int team)
{
    size_t per_group = (size_t)(MI4_XPU_GROUP / team);
    return ((size_t)columns + per_group - 1) / per_group * MI4_XPU_GROUP;
}

size_t mi4_xpu_gemv_walk_width(int columns, int team, size_t tiles, int groups_per_unit,
                               int compute_units)
{
    size_t units = compute_units > 0 ? (size_t)compute_units : 64;
    tiles = tiles > 0 ? tiles : 1;
    size_t groups = ((size_t)groups_per_unit * units + tiles - 1) / tiles;
    size_t most = mi4_xpu_gemm_width(columns, team) / MI4_XPU_GROUP;
    groups = groups < 1 ? 1 : groups;
    return (groups < most ? groups : most) * MI4_XPU_GROUP;
}

int mi4_xpu_lanes_fit(int in, int group_size)
{
    return in > 0 && in % 32 == 0 && group_size % 32 == 0 &&
           in / 32 <= MI4_XPU_GROUP * MI4_XPU_LANES_PIECES;
}

mi4_xpu_kernel mi4_xpu_lanes_kernel(int in, int w13)
{
    if (in / 32 <= MI4_XPU_GROUP)
        return w13 ? MI4_XPU_W13_GEMV_LANES : MI4_XPU_W2_GEMV_LANES;
    return w13 ? MI4_XPU_W13_GEMV_LANES2 : MI4_XPU_W2_GEMV_LANES2;
}

int mi4_xpu_lanes_team(int in)
{
    int team = 8;
    while (team < MI4_XPU_GROUP && team < in / 32)
        team *= 2;
    return team;
}

size_t mi4_xpu_gemv_lanes_width(int columns, int in, int halves, size_t tiles, int groups_per_unit,
                                int compute_units)
{
    /* a work-group finishes 8 rows per team and batch: MI4_XPU_GROUP / t
     * columns, as a GEMM team t = team * halves / 8 would */
    int per_column = mi4_xpu_lanes_team(in) * halves / 8;
    return mi4_xpu_gemv_walk_width(columns, per_column, tiles, groups_per_unit, compute_units);
}

int mi4_xpu_rows_fit(int in, int group_size)
{
    return in > 0 && in % 32 == 0 && group_size > 0 && group_size % 32 == 0;
}

int mi4_xpu_rows_team(int forced)
{
    return forced == 4 || forced == 8 || forced == 16 || forced == 32 ? forced : 8;
}

size_t mi4_xpu_gemv_rows_width(int columns, int team, int halves, size_t tiles, int groups_per_unit,
                               int compute_units)
{
    /* a work-group finishes MI4_XPU_GROUP / team rows a chunk: the columns
     * of a GEMM team of team * halves */
    return mi4_xpu_gemv_walk_width(columns, team * halves, tiles, groups_per_unit, compute_units);
}

/* The message the core gives for the same input. */
static moeint4_status bad_slot(char *err, size_t cap, int is_id, int64_t slot, int topk,
                               int32_t bits, int num_experts)
{
    if (is_id)
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "topk_ids[%lld][%d] = %d is outside [0, %d)", (long long)(slot / topk),
                            (int)(slot % topk), (int)bits, num_experts);
    float value;
    memcpy(&value, &bits, sizeof value);
    return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                        "topk_weights[%lld][%d] = %g is not finite", (long long)(slot / topk),
                        (int)(slot % topk), (double)value);
}

/* After the device finished: a set error record becomes the failure. */
static moeint4_status read_errors(fwd_state *s)
{
    int32_t record[2], bits = 0;
    moeint4_status st =
        s->rt->ops->copy(s->rt, s->queue, record, s->record, sizeof record, s->err, s->cap);
    if (st || (record[0] == INT_MAX && record[1] == INT_MAX))
        return st;
    int is_id = record[0] <= record[1]; /* the first bad slot, as the CPU backend reports it */
    int64_t slot = is_id ? record[0] : record[1];
    const void *source = is_id ? (const void *)(s->args->topk_ids + slot)
                               : (const void *)(s->args->topk_weights + slot);
    st = s->rt->ops->copy(s->rt, s->queue, &bits, source, sizeof bits, s->err, s->cap);
    return st ? st : bad_slot(s->err, s->cap, is_id, slot, s->args->topk, bits, s->w->num_experts);
}

/* oneDNN reads what the kernels wrote: the queue may be the caller's, not
 * the one oneDNN's stream was built on, so wait first. */
static moeint4_status dnnl_matmul(fwd_state *s, int64_t M, int64_t N, int64_t K, const void *a,
                                  const void *b, void *c)
{
    moeint4_status st = s->rt->ops->wait(s->rt, s->queue, s->err, s->cap);
    moeint4_dtype operands = mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype);
    return st ? st : mi4_xpu_dnnl_matmul(s->ctx->dnnl, operands, M, N, K, a, b, c, s->err, s->cap);
}

/* c[rows][out] (f32) = a[rows][in] . W[expert]^T for one projection of one
 * expert (packed [E, out, in/2], scales [E, out, in/group]). With oneDNN's
 * int4 weights: the expert's codes are copied to the start of the weight
 * buffer and its scales transposed (oneDNN's [in/group][out] order), because
 * only whole SVM allocations may back the OpenCL buffers oneDNN is given.
 * Otherwise the expert is dequantized just in time into the weight buffer. */
static moeint4_status expert_projection(fwd_state *s, const uint8_t *packed, const uint16_t *scales,
                                        const uint8_t *zeros, int expert, int out, int in,
                                        int group_size, int rows, const void *a, float *c)
{
    const mi4_xpu_weights *w = s->w;
    int bf16 = w->scales_bf16, groups = in / group_size, has_zeros = zeros != NULL;
    moeint4_dtype operands = mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype);
    int mdt = (int)operands;
    size_t expert_bytes = (size_t)out * (size_t)(in / 2);
    moeint4_status st;
    /* oneDNN's int4 weights take the one zero point 8 (mi4_xpu_dnnl_matmul_int4) */
    if (mi4_xpu_dnnl_has_int4(s->ctx->dnnl) && !bf16 && !has_zeros &&
        operands != MOEINT4_DTYPE_F32) {
        mi4_xpu_arg args[] = { MI4_XPU_PTR(scales), MI4_XPU_INT(expert), MI4_XPU_INT(out),
                               MI4_XPU_INT(groups), MI4_XPU_PTR(s->dnnl[MI4_XPU_DNNL_S]) };
        st = launch(s, MI4_XPU_DNNL_SCALES_T, (size_t)out, (size_t)groups, 5, args);
        if (!st) /* the copy waits for everything before it */
            st = s->rt->ops->copy(s->rt, s->queue, s->dnnl[MI4_XPU_DNNL_W],
                                  packed + (size_t)expert * expert_bytes, expert_bytes, s->err,
                                  s->cap);
        return st ? st
                  : mi4_xpu_dnnl_matmul_int4(s->ctx->dnnl, operands, rows, out, in, group_size, a,
                                             s->dnnl[MI4_XPU_DNNL_W], s->dnnl[MI4_XPU_DNNL_S], c,
                                             s->err, s->cap);
    }
    /* without zero points the kernel reads no zeros: any valid pointer */
    const void *zeros_arg = has_zeros ? (const void *)zeros : (const void *)packed;
    mi4_xpu_arg args[] = {
        MI4_XPU_PTR(packed),     MI4_XPU_PTR(scales),   MI4_XPU_INT(bf16),
        MI4_XPU_INT(expert),     MI4_XPU_INT(out),      MI4_XPU_INT(in),
        MI4_XPU_INT(group_size), MI4_XPU_INT(mdt),      MI4_XPU_PTR(s->dnnl[MI4_XPU_DNNL_W]),
        MI4_XPU_PTR(zeros_arg),  MI4_XPU_INT(has_zeros)
    };
    st = launch(s, MI4_XPU_DNNL_DEQUANT, (size_t)in, (size_t)out, 11, args);
    return st ? st : dnnl_matmul(s, rows, out, in, a, s->dnnl[MI4_XPU_DNNL_W], c);
}

/* One expert with many slots through oneDNN: gather its rows, w13, the
 * activation, w2, scatter to slots. */
static moeint4_status expert_dnnl(fwd_state *s, int expert, int rows, const void *hidden,
                                  const float *topk_weights)
{
    const mi4_xpu_weights *w = s->w;
    const moeint4_forward_args *a = s->args;
    int K = w->hidden, N = w->intermediate, num_local = w->num_local;
    int dtype = s->input_dtype, topk = s->input_topk, act_kind = (int)a->activation;
    int on_input = a->apply_router_weight_on_input != 0;
    int mdt = (int)mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype);
    float limit = a->swiglu_limit, alpha = a->swiglu_alpha, beta = a->swiglu_beta;
    mi4_xpu_arg gather_args[] = { MI4_XPU_PTR(s->buf.route), MI4_XPU_INT(num_local),
                                  MI4_XPU_INT(expert),       MI4_XPU_PTR(s->buf.sorted),
                                  MI4_XPU_PTR(hidden),       MI4_XPU_INT(dtype),
                                  MI4_XPU_PTR(topk_weights), MI4_XPU_INT(on_input),
                                  MI4_XPU_INT(topk),         MI4_XPU_INT(K),
                                  MI4_XPU_INT(mdt),          MI4_XPU_PTR(s->dnnl[MI4_XPU_DNNL_A]) };
    mi4_xpu_arg act_args[] = { MI4_XPU_PTR(s->dnnl[MI4_XPU_DNNL_C13]),
                               MI4_XPU_INT(rows),
                               MI4_XPU_INT(N),
                               MI4_XPU_INT(act_kind),
                               MI4_XPU_FLOAT(limit),
                               MI4_XPU_FLOAT(alpha),
                               MI4_XPU_FLOAT(beta),
                               MI4_XPU_INT(mdt),
                               MI4_XPU_PTR(s->dnnl[MI4_XPU_DNNL_A2]) };
    mi4_xpu_arg scatter_args[] = { MI4_XPU_PTR(s->buf.route),
                                   MI4_XPU_INT(num_local),
                                   MI4_XPU_INT(expert),
                                   MI4_XPU_PTR(s->buf.sorted),
                                   MI4_XPU_PTR(s->dnnl[MI4_XPU_DNNL_C2]),
                                   MI4_XPU_PTR(topk_weights),
                                   MI4_XPU_INT(on_input),
                                   MI4_XPU_INT(K),
                                   MI4_XPU_PTR(s->buf.slot_out) };
    moeint4_status st = launch(s, MI4_XPU_DNNL_GATHER, (size_t)K, (size_t)rows, 12, gather_args);
    if (!st)
        st =
            expert_projection(s, w->w13_packed, w->w13_scales, w->w13_zeros, expert, 2 * N, K,
                              w->group13, rows, s->dnnl[MI4_XPU_DNNL_A], s->dnnl[MI4_XPU_DNNL_C13]);
    if (!st)
        st = launch(s, MI4_XPU_DNNL_ACTIVATE, (size_t)N, (size_t)rows, 9, act_args);
    if (!st)
        st = expert_projection(s, w->w2_packed, w->w2_scales, w->w2_zeros, expert, K, N, w->group2,
                               rows, s->dnnl[MI4_XPU_DNNL_A2], s->dnnl[MI4_XPU_DNNL_C2]);
    if (!st)
        st = launch(s, MI4_XPU_DNNL_SCATTER, (size_t)K, (size_t)rows, 9, scatter_args);
    return st;
}

/* The oneDNN part of a chunk: the one place the host reads the routing
 * back (it sizes oneDNN's matmuls). Stops at a bad input. */
static moeint4_status run_dnnl_experts(fwd_state *s, const void *hidden, const float *topk_weights)
{
    int num_local = s->w->num_local;
    size_t count_bytes = (size_t)num_local * sizeof(int32_t); /* route[0, E): the counts */
    int32_t *counts = malloc(count_bytes);
    if (!counts)
        return mi4_xpu_fail(s->err, s->cap, MOEINT4_OUT_OF_MEMORY, "xpu: out of host memory");
    moeint4_status st =
        s->rt->ops->copy(s->rt, s->queue, counts, s->buf.route, count_bytes, s->err, s->cap);
    if (!st)
        st = read_errors(s);
    if (!st)
        st = reserve_dnnl_buffers(s);
    for (int e = 0; e < num_local && !st; ++e)
        if (counts[e] >= s->ctx->onednn_min_tokens)
            st = expert_dnnl(s, e, counts[e], hidden, topk_weights);
    free(counts);
    return st;
}

static moeint4_status run_chunk(fwd_state *s, int64_t first_token, int64_t tokens, void *target)
{
    const mi4_xpu_weights *w = s->w;
    const moeint4_forward_args *a = s->args;
    size_t esize = dtype_size(a->dtype);
    int K = w->hidden, N = w->intermediate, num_local = w->num_local;
    int gs13 = w->group13, gs2 = w->group2;
    int topk = a->topk, dtype = (int)a->dtype, bf16 = w->scales_bf16;
    int on_input = a->apply_router_weight_on_input != 0, act_kind = (int)a->activation;
    int num_tokens = (int)tokens;
    float limit = a->swiglu_limit, alpha = a->swiglu_alpha, beta = a->swiglu_beta;
    const void *hidden = (const uint8_t *)a->hidden_states + (size_t)first_token * K * esize;
    const float *topk_weights = a->topk_weights + first_token * topk;
    size_t slots = (size_t)tokens * (size_t)topk;
    /* one token: tiles of one slot for the one-row kernels (GEMVs) */
    int gemv = tokens == 1 && s->ctx->gemv;
    int tile_rows = gemv ? 1 : MI4_XPU_TILE_ROWS;
    /* the most tiles a chunk can have: each touched expert's last tile may
     * be partial (one slot per tile: exactly the slots) */
    size_t touched = (size_t)num_local < slots ? (size_t)num_local : slots;
    size_t max_tiles = (slots + touched * (size_t)(tile_rows - 1)) / (size_t)tile_rows;

    int team13 = mi4_xpu_gemm_team(K, s->ctx->gemm_team);
    int team2 = mi4_xpu_gemm_team(N, s->ctx->gemm_team);
    /* the kernels and their teams (an argument of each): one-token chunks
     * take the GEMVs, or with MOEINT4_XPU_GEMV_WALK the walking ones (those
     * and the lanes GEMVs have no zero-point variant: not for such weights) */
    int has_zeros = w->w13_zeros != NULL;
    int walk = gemv && !has_zeros ? s->ctx->gemv_walk : 0, units = s->rt->compute_units;
    mi4_xpu_kernel k13 = walk > 0 ? MI4_XPU_W13_GEMV_WALK
                         : gemv   ? MI4_XPU_W13_GEMV
                                  : MI4_XPU_W13_GEMM;
    mi4_xpu_kernel k2 = walk > 0 ? MI4_XPU_W2_GEMV_WALK : gemv ? MI4_XPU_W2_GEMV : MI4_XPU_W2_GEMM;
    size_t width13 = walk > 0 ? mi4_xpu_gemv_walk_width(N, team13, max_tiles, walk, units)
                              : mi4_xpu_gemm_width(N, team13);
    size_t width2 = walk > 0 ? mi4_xpu_gemv_walk_width(K, team2, max_tiles, walk, units)
                             : mi4_xpu_gemm_width(K, team2);
    /* ... or with MOEINT4_XPU_GEMV_LANES the lanes ones, where the rows fit */
    int lanes = gemv && !has_zeros ? s->ctx->gemv_lanes : 0;
    if (lanes > 0 && mi4_xpu_lanes_fit(K, gs13)) {
        k13 = mi4_xpu_lanes_kernel(K, 1);
        width13 = mi4_xpu_gemv_lanes_width(N, K, 2, max_tiles, lanes, units);
        team13 = mi4_xpu_lanes_team(K);
    }
    if (lanes > 0 && mi4_xpu_lanes_fit(N, gs2)) {
        k2 = mi4_xpu_lanes_kernel(N, 0);
        width2 = mi4_xpu_gemv_lanes_width(K, N, 1, max_tiles, lanes, units);
        team2 = mi4_xpu_lanes_team(N);
    }

    /* ... or, unless one of those was asked for, the rows GEMVs where the
     * rows fit them (MOEINT4_XPU_GEMV_ROWS, on by default) */
    int rows_gemv = gemv && walk <= 0 && lanes <= 0 ? s->ctx->gemv_rows : 0;
    int rows_team = mi4_xpu_rows_team(s->ctx->gemm_team);
    if (rows_gemv > 0 && mi4_xpu_rows_fit(K, gs13)) {
        k13 = MI4_XPU_W13_GEMV_ROWS;
        team13 = rows_team;
        width13 = mi4_xpu_gemv_rows_width(N, rows_team, 2, max_tiles, rows_gemv, units);
    }
    if (rows_gemv > 0 && mi4_xpu_rows_fit(N, gs2)) {
        k2 = MI4_XPU_W2_GEMV_ROWS;
        team2 = rows_team;
        width2 = mi4_xpu_gemv_rows_width(K, rows_team, 1, max_tiles, rows_gemv, units);
    }

    if (has_zeros) { /* the same kernels with zero points */
        k13 = k13 == MI4_XPU_W13_GEMV_ROWS ? MI4_XPU_W13_GEMV_ROWS_ZP
              : gemv                       ? MI4_XPU_W13_GEMV_ZP
                                           : MI4_XPU_W13_GEMM_ZP;
        k2 = k2 == MI4_XPU_W2_GEMV_ROWS ? MI4_XPU_W2_GEMV_ROWS_ZP
             : gemv                     ? MI4_XPU_W2_GEMV_ZP
                                        : MI4_XPU_W2_GEMM_ZP;
    }

    moeint4_status st = route(s, first_token, tokens, 1, tile_rows);
    s->input = hidden, s->input_dtype = dtype, s->input_topk = topk;
    if (!st && w->input_perm) { /* act-order: x gathered by each slot's expert's sort order */
        int num_slots = (int)slots;
        mi4_xpu_arg gather_args[] = { MI4_XPU_PTR(s->buf.slot_expert),
                                      MI4_XPU_PTR(w->input_perm),
                                      MI4_XPU_PTR(hidden),
                                      MI4_XPU_INT(dtype),
                                      MI4_XPU_INT(num_slots),
                                      MI4_XPU_INT(topk),
                                      MI4_XPU_INT(K),
                                      MI4_XPU_PTR(s->buf.gathered) };
        st = launch(s, MI4_XPU_GATHER_INPUT, (size_t)K, slots, 8, gather_args);
        s->input = s->buf.gathered, s->input_dtype = MOEINT4_DTYPE_F32, s->input_topk = 1;
    }
    if (!st && s->use_dnnl && slots >= (size_t)s->ctx->onednn_min_tokens)
        st = run_dnnl_experts(s, s->input, topk_weights);
    if (st)
        return st;
    mi4_xpu_arg w13_args[] = { MI4_XPU_PTR(s->buf.route),
                               MI4_XPU_INT(num_local),
                               MI4_XPU_PTR(s->buf.sorted),
                               MI4_XPU_PTR(s->input),
                               MI4_XPU_INT(s->input_dtype),
                               MI4_XPU_PTR(topk_weights),
                               MI4_XPU_INT(on_input),
                               MI4_XPU_INT(s->input_topk),
                               MI4_XPU_PTR(w->w13_packed),
                               MI4_XPU_PTR(w->w13_scales),
                               MI4_XPU_INT(bf16),
                               MI4_XPU_INT(K),
                               MI4_XPU_INT(N),
                               MI4_XPU_INT(gs13),
                               MI4_XPU_INT(act_kind),
                               MI4_XPU_FLOAT(limit),
                               MI4_XPU_FLOAT(alpha),
                               MI4_XPU_FLOAT(beta),
                               MI4_XPU_INT(team13),
                               MI4_XPU_PTR(s->buf.act),
                               MI4_XPU_PTR(w->w13_zeros) };
    mi4_xpu_arg w2_args[] = { MI4_XPU_PTR(s->buf.route),
                              MI4_XPU_INT(num_local),
                              MI4_XPU_PTR(s->buf.sorted),
                              MI4_XPU_PTR(s->buf.act),
                              MI4_XPU_PTR(topk_weights),
                              MI4_XPU_INT(on_input),
                              MI4_XPU_PTR(w->w2_packed),
                              MI4_XPU_PTR(w->w2_scales),
                              MI4_XPU_INT(bf16),
                              MI4_XPU_INT(K),
                              MI4_XPU_INT(N),
                              MI4_XPU_INT(gs2),
                              MI4_XPU_INT(team2),
                              MI4_XPU_PTR(s->buf.slot_out),
                              MI4_XPU_PTR(w->w2_zeros) };
    int gated = !s->async;
    mi4_xpu_arg combine_args[] = { MI4_XPU_PTR(s->buf.slot_expert),
                                   MI4_XPU_PTR(s->buf.slot_out),
                                   MI4_XPU_INT(num_tokens),
                                   MI4_XPU_INT(topk),
                                   MI4_XPU_INT(K),
                                   MI4_XPU_INT(dtype),
                                   MI4_XPU_PTR(s->record),
                                   MI4_XPU_INT(gated),
                                   MI4_XPU_PTR(target) };
    /* the zeros, the last argument, only for the zero-point kernels */
    st = launch(s, k13, width13, max_tiles, has_zeros ? 21 : 20, w13_args);
    if (!st)
        st = launch(s, k2, width2, max_tiles, has_zeros ? 15 : 14, w2_args);
    if (!st)
        st = launch(s, MI4_XPU_COMBINE, (size_t)K, (size_t)num_tokens, 9, combine_args);
    return st;
}

int64_t mi4_xpu_chunk_tokens(const mi4_xpu_context *ctx, const mi4_xpu_weights *w, int topk,
                             int64_t num_tokens)
{
    int64_t chunk = ctx->chunk_tokens;
    if (chunk <= 0) {
        size_t per_token = (size_t)topk * ((size_t)w->hidden + (size_t)w->intermediate) * 4;
        if (w->input_perm) /* the gathered inputs */
            per_token += (size_t)topk * (size_t)w->hidden * 4;
        chunk = (int64_t)(MI4_XPU_SCRATCH_BUDGET / per_token);
    }
    if (chunk > MI4_XPU_MAX_CHUNK_TOKENS)
        chunk = MI4_XPU_MAX_CHUNK_TOKENS;
    if (chunk < 1)
        chunk = 1;
    return chunk < num_tokens ? chunk : num_tokens;
}

/* Copies the staged output (several chunks) to the caller's, guarded. */
static moeint4_status copy_out(fwd_state *s)
{
    long long words = (long long)((size_t)s->args->num_tokens * (size_t)s->w->hidden *
                                  dtype_size(s->args->dtype) / 4);
    size_t width = words < (1 << 16) ? (size_t)words : (size_t)1 << 16;
    size_t height = (size_t)((words + (long long)width - 1) / (long long)width);
    int gated = !s->async;
    mi4_xpu_arg args[] = { MI4_XPU_PTR(s->staging), MI4_XPU_LONG(words), MI4_XPU_PTR(s->record),
                           MI4_XPU_INT(gated), MI4_XPU_PTR(s->args->output) };
    return launch(s, MI4_XPU_COPY_OUT, width, height, 5, args);
}

static size_t staging_bytes(const mi4_xpu_weights *w, int64_t tokens, moeint4_dtype dtype)
{
    return (size_t)tokens * (size_t)w->hidden * dtype_size(dtype);
}

size_t mi4_xpu_workspace_bytes(const mi4_xpu_context *ctx, const mi4_xpu_weights *w,
                               int64_t max_tokens, int topk, moeint4_dtype dtype)
{
    int64_t chunk = mi4_xpu_chunk_tokens(ctx, w, topk, max_tokens > 0 ? max_tokens : 1);
    size_t bytes = MI4_XPU_ALIGN /* an unaligned pointer */ + MI4_XPU_ALIGN /* the record */ +
                   mi4_xpu_chunk_scratch(w, chunk, topk, NULL, NULL);
    if (chunk < max_tokens)
        bytes += staging_bytes(w, max_tokens, dtype);
    return bytes;
}

/* The scratch: the caller's workspace, or the context's reserved buffers
 * (grown when too small; synchronous forwards only). */
static moeint4_status take_scratch(fwd_state *s, int chunked)
{
    const moeint4_forward_args *a = s->args;
    mi4_xpu_context *ctx = s->ctx;
    mi4_xpu_scratch *sc = &ctx->scratch;
    if (a->workspace) {
        size_t need = mi4_xpu_workspace_bytes(ctx, s->w, a->num_tokens, a->topk, a->dtype);
        if (a->workspace_bytes < need)
            return mi4_xpu_fail(s->err, s->cap, MOEINT4_INVALID_ARGUMENT,
                                "args->workspace_bytes = %zu is less than the %zu bytes this "
                                "forward needs (moeint4_forward_workspace_size)",
                                a->workspace_bytes, need);
        uint8_t *p = (uint8_t *)round_up((size_t)(uintptr_t)a->workspace, MI4_XPU_ALIGN);
        s->record = s->async ? (int32_t *)p : s->w->errors;
        p += MI4_XPU_ALIGN;
        p += mi4_xpu_chunk_scratch(s->w, s->chunk_tokens, a->topk, p, &s->buf);
        s->staging = chunked ? p : NULL;
        return MOEINT4_SUCCESS;
    }
    if (s->async)
        return mi4_xpu_fail(s->err, s->cap, MOEINT4_INVALID_ARGUMENT,
                            "args->flags has MOEINT4_FORWARD_ASYNC: args->workspace is required");
    moeint4_status st =
        mi4_xpu_reserve(ctx, &sc->chunk, &sc->chunk_bytes,
                        mi4_xpu_chunk_scratch(s->w, s->chunk_tokens, a->topk, NULL, NULL), s->queue,
                        s->err, s->cap);
    if (!st && chunked)
        st =
            mi4_xpu_reserve(ctx, &sc->staging, &sc->staging_bytes,
                            staging_bytes(s->w, a->num_tokens, a->dtype), s->queue, s->err, s->cap);
    if (st)
        return st;
    s->record = s->w->errors;
    mi4_xpu_chunk_scratch(s->w, s->chunk_tokens, a->topk, sc->chunk, &s->buf);
    s->staging = chunked ? sc->staging : NULL;
    return MOEINT4_SUCCESS;
}

static moeint4_status forward_locked(fwd_state *s)
{
    const moeint4_forward_args *a = s->args;
    int64_t total = a->num_tokens, chunk = s->chunk_tokens;
    int chunked = chunk < total, topk = a->topk;
    moeint4_status st = take_scratch(s, chunked);
    if (st)
        return st;
    s->reset = 1;
    /* several chunks: check every slot before the first chunk computes */
    for (int64_t m = 0; !st && chunked && m < total; m += chunk)
        st = route(s, m, total - m < chunk ? total - m : chunk, 0, MI4_XPU_TILE_ROWS);
    for (int64_t m = 0; !st && m < total; m += chunk) {
        size_t offset = (size_t)m * (size_t)s->w->hidden * dtype_size(a->dtype);
        void *target = (uint8_t *)(chunked ? s->staging : a->output) + offset;
        st = run_chunk(s, m, total - m < chunk ? total - m : chunk, target);
    }
    if (!st && chunked)
        st = copy_out(s);
    if (!st && s->async) { /* enqueue only: the sticky record keeps a bad slot */
        mi4_xpu_arg merge_args[] = { MI4_XPU_PTR(s->record), MI4_XPU_PTR(a->topk_ids),
                                     MI4_XPU_PTR(a->topk_weights), MI4_XPU_INT(topk),
                                     MI4_XPU_PTR(s->w->errors + 2) };
        return launch(s, MI4_XPU_RECORD_MERGE, 1, 1, 5, merge_args);
    }
    if (!st)
        st = s->rt->ops->wait(s->rt, s->queue, s->err, s->cap);
    if (!st)
        st = read_errors(s);
    return st;
}

moeint4_status mi4_xpu_forward(void *backend_context, const void *backend_weights,
                               const moeint4_forward_args *args, char *err, size_t cap)
{
    mi4_xpu_context *ctx = backend_context;
    const mi4_xpu_weights *w = backend_weights;
    if (args->num_tokens == 0)
        return MOEINT4_SUCCESS;
    moeint4_status st = ctx->rt->ops->check_queue(ctx->rt, args->stream, err, cap);
    if (st)
        return st;
    fwd_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.w = w;
    s.args = args;
    s.rt = ctx->rt;
    s.queue = args->stream;
    s.err = err;
    s.cap = cap;
    s.chunk_tokens = mi4_xpu_chunk_tokens(ctx, w, args->topk, args->num_tokens);
    s.async = (args->flags & MOEINT4_FORWARD_ASYNC) != 0;
    /* oneDNN's matmuls are sized on the host: not in an asynchronous forward */
    s.use_dnnl = ctx->dnnl && ctx->onednn_min_tokens > 0 && !s.async;
    s.dnnl = ctx->scratch.dnnl;
    pthread_mutex_lock(&ctx->lock);
    st = forward_locked(&s);
    if (st && !s.async) /* the scratch may still be in use by enqueued work */
        s.rt->ops->wait(s.rt, s.queue, NULL, 0);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

moeint4_status mi4_xpu_forward_check(void *backend_context, const void *backend_weights,
                                     void *stream, char *err, size_t cap)
{
    mi4_xpu_context *ctx = backend_context;
    const mi4_xpu_weights *w = backend_weights;
    mi4_xpu_runtime *rt = ctx->rt;
    int32_t sticky[4], cleared[4] = { 0, 0, 0, 0 };
    moeint4_status st = rt->ops->check_queue(rt, stream, err, cap);
    if (st)
        return st;
    pthread_mutex_lock(&ctx->lock);
    st = rt->ops->wait(rt, stream, err, cap);
    if (!st)
        st = rt->ops->copy(rt, stream, sticky, w->errors + 2, sizeof sticky, err, cap);
    if (!st && sticky[0] != 0)
        st = rt->ops->copy(rt, stream, w->errors + 2, cleared, sizeof cleared, err, cap);
    pthread_mutex_unlock(&ctx->lock);
    if (st || sticky[0] == 0)
        return st;
    return bad_slot(err, cap, sticky[0] == 1, sticky[1], sticky[3], sticky[2], w->num_experts);
}
