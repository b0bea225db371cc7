/* forward(): routing on the device, then per chunk of tokens the int4
 * grouped GEMMs (or oneDNN for experts with many slots), then the combine.
 * Everything is enqueued on the caller's queue (or the runtime's own); the
 * host reads back only the per-expert offsets, which it needs to size the
 * GEMM launches and to report a bad expert id before anything is written. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "xpu_backend.h"

/* GEMM work-groups must be exactly this wide; other kernels take any size */
#define LOCAL_SIZE MI4_XPU_GEMM_LANES

typedef struct fwd_buffers {
    int32_t *route;        /* 3E+2 ints, see kernels/routing.cl */
    int32_t *slot_expert;  /* [S] */
    int32_t *sorted;       /* [S] */
    int32_t *tiles;        /* [2 * max_tiles] */
    float *act;            /* [S, N] */
    float *slot_out;       /* [S, K] */
    /* oneDNN scratch, allocated at first use */
    void *dnnl_a, *dnnl_w, *dnnl_a2;
    uint16_t *dnnl_s;      /* one expert's transposed scales (int4 path) */
    float *dnnl_c13, *dnnl_c2;
} fwd_buffers;

typedef struct fwd_state {
    mi4_xpu_context *ctx;
    const mi4_xpu_weights *w;
    const moeint4_forward_args *args;
    mi4_xpu_runtime *rt;
    void *queue;
    int64_t chunk_tokens;
    int max_tiles;
    fwd_buffers buf;
    int32_t *host_route;   /* 3E+2 */
    int32_t *host_tiles;
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
    size_t local[2] = {size0 > 1 ? LOCAL_SIZE : 1, 1};
    size_t global[2] = {round_up(size0, local[0]), size1};
    if (size0 == 0 || size1 == 0)
        return MOEINT4_SUCCESS;
    return s->rt->ops->launch(s->rt, s->queue, kernel, global, local, num_args, args, s->err,
                              s->cap);
}

static size_t dtype_size(moeint4_dtype dtype) { return dtype == MOEINT4_DTYPE_F32 ? 4 : 2; }

static moeint4_status alloc(fwd_state *s, size_t bytes, void **ptr)
{
    return s->rt->ops->alloc(s->rt, bytes, ptr, s->err, s->cap);
}

static void free_buffers(fwd_state *s)
{
    void *all[] = {s->buf.route, s->buf.slot_expert, s->buf.sorted, s->buf.tiles,
                   s->buf.act, s->buf.slot_out, s->buf.dnnl_a, s->buf.dnnl_w,
                   s->buf.dnnl_a2, s->buf.dnnl_c13, s->buf.dnnl_c2, s->buf.dnnl_s};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        s->rt->ops->free(s->rt, all[i]);
    free(s->host_route);
    free(s->host_tiles);
}

static moeint4_status alloc_buffers(fwd_state *s)
{
    const mi4_xpu_weights *w = s->w;
    size_t slots = (size_t)s->chunk_tokens * (size_t)s->args->topk;
    size_t route_ints = 3 * (size_t)w->num_local + 2;
    s->max_tiles = (int)(slots / MI4_XPU_TILE_ROWS) + w->num_local + 1;
    s->host_route = malloc(route_ints * sizeof(int32_t));
    s->host_tiles = malloc(2 * (size_t)s->max_tiles * sizeof(int32_t));
    if (!s->host_route || !s->host_tiles)
        return mi4_xpu_fail(s->err, s->cap, MOEINT4_OUT_OF_MEMORY, "xpu: out of host memory");
    moeint4_status st = alloc(s, route_ints * 4, (void **)&s->buf.route);
    if (!st)
        st = alloc(s, slots * 4, (void **)&s->buf.slot_expert);
    if (!st)
        st = alloc(s, slots * 4, (void **)&s->buf.sorted);
    if (!st)
        st = alloc(s, 2 * (size_t)s->max_tiles * 4, (void **)&s->buf.tiles);
    if (!st)
        st = alloc(s, slots * (size_t)w->intermediate * 4, (void **)&s->buf.act);
    if (!st)
        st = alloc(s, slots * (size_t)w->hidden * 4, (void **)&s->buf.slot_out);
    return st;
}

static moeint4_status alloc_dnnl_buffers(fwd_state *s)
{
    if (s->buf.dnnl_w)
        return MOEINT4_SUCCESS;
    const mi4_xpu_weights *w = s->w;
    size_t rows = (size_t)s->chunk_tokens * (size_t)s->args->topk;
    size_t K = (size_t)w->hidden, N = (size_t)w->intermediate;
    size_t esize = dtype_size(mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype));
    moeint4_status st = alloc(s, 2 * N * K * esize, &s->buf.dnnl_w);
    if (!st)
        st = alloc(s, rows * K * esize, &s->buf.dnnl_a);
    if (!st)
        st = alloc(s, rows * N * esize, &s->buf.dnnl_a2);
    if (!st)
        st = alloc(s, rows * 2 * N * 4, (void **)&s->buf.dnnl_c13);
    if (!st)
        st = alloc(s, rows * K * 4, (void **)&s->buf.dnnl_c2);
    size_t scales13 = 2 * N * (K / (size_t)w->group13), scales2 = K * (N / (size_t)w->group2);
    if (!st)
        st = alloc(s, (scales13 > scales2 ? scales13 : scales2) * 2, (void **)&s->buf.dnnl_s);
    return st;
}

/* Routes slots [first_token * topk, +tokens * topk): count (and, with
 * sort = 1, scan + scatter), then reads back the route table. A bad id fails
 * with its position. */
static moeint4_status route(fwd_state *s, int64_t first_token, int64_t tokens, int sort)
{
    const mi4_xpu_weights *w = s->w;
    int topk = s->args->topk;
    int num_slots = (int)(tokens * topk);
    int num_local = w->num_local, num_experts = w->num_experts;
    const int32_t *ids = s->args->topk_ids + first_token * topk;
    mi4_xpu_arg init_args[] = {MI4_XPU_PTR(s->buf.route), MI4_XPU_INT(num_local)};
    mi4_xpu_arg count_args[] = {MI4_XPU_PTR(ids), MI4_XPU_PTR(w->expert_map),
                                MI4_XPU_INT(num_slots), MI4_XPU_INT(num_experts),
                                MI4_XPU_INT(num_local), MI4_XPU_PTR(s->buf.slot_expert),
                                MI4_XPU_PTR(s->buf.route)};
    mi4_xpu_arg scan_args[] = {MI4_XPU_PTR(s->buf.route), MI4_XPU_INT(num_local)};
    mi4_xpu_arg scatter_args[] = {MI4_XPU_PTR(s->buf.slot_expert), MI4_XPU_INT(num_slots),
                                  MI4_XPU_INT(num_local), MI4_XPU_PTR(s->buf.route),
                                  MI4_XPU_PTR(s->buf.sorted)};
    size_t route_ints = 3 * (size_t)num_local + 2;
    moeint4_status st = launch(s, MI4_XPU_ROUTE_INIT, route_ints, 1, 2, init_args);
    if (!st)
        st = launch(s, MI4_XPU_ROUTE_COUNT, (size_t)num_slots, 1, 7, count_args);
    if (!st && sort)
        st = launch(s, MI4_XPU_ROUTE_SCAN, 1, 1, 2, scan_args);
    if (!st && sort)
        st = launch(s, MI4_XPU_ROUTE_SCATTER, (size_t)num_slots, 1, 5, scatter_args);
    if (!st)
        st = s->rt->ops->copy(s->rt, s->queue, s->host_route, s->buf.route, route_ints * 4,
                              s->err, s->cap);
    if (st)
        return st;
    int bad = s->host_route[3 * num_local + 1];
    if (bad != INT_MAX) {
        int32_t value = 0;
        st = s->rt->ops->copy(s->rt, s->queue, &value, ids + bad, sizeof value, s->err, s->cap);
        if (st)
            return st;
        int64_t slot = first_token * topk + bad;
        return mi4_xpu_fail(s->err, s->cap, MOEINT4_INVALID_ARGUMENT,
                            "topk_ids[%lld][%d] = %d is outside [0, %d)", (long long)(slot / topk),
                            (int)(slot % topk), (int)value, num_experts);
    }
    return MOEINT4_SUCCESS;
}

/* oneDNN reads what the kernels wrote: the queue may be the caller's, not
 * the one oneDNN's stream was built on, so wait first. */
static moeint4_status dnnl_matmul(fwd_state *s, int64_t M, int64_t N, int64_t K, const void *a,
                                  const void *b, void *c)
{
    moeint4_status st = s->rt->ops->wait(s->rt, s->queue, s->err, s->cap);
    moeint4_dtype operands = mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype);
    return st ? st
              : mi4_xpu_dnnl_matmul(s->ctx->dnnl, operands, M, N, K, a, b, c, s->err, s->cap);
}

/* c[rows][out] (f32) = a[rows][in] . W[expert]^T for one projection of one
 * expert (packed [E, out, in/2], scales [E, out, in/group]). With oneDNN's
 * int4 weights: the expert's codes are copied to the start of dnnl_w and its
 * scales transposed into dnnl_s (oneDNN's [in/group][out] order), because
 * only whole SVM allocations may back the OpenCL buffers oneDNN is given.
 * Otherwise the expert is dequantized just in time into dnnl_w. */
static moeint4_status expert_projection(fwd_state *s, const uint8_t *packed,
                                        const uint16_t *scales, int expert, int out, int in,
                                        int group_size, int rows, const void *a, float *c)
{
    const mi4_xpu_weights *w = s->w;
    int bf16 = w->scales_bf16, groups = in / group_size;
    moeint4_dtype operands = mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype);
    int mdt = (int)operands;
    size_t expert_bytes = (size_t)out * (size_t)(in / 2);
    moeint4_status st;
    if (mi4_xpu_dnnl_has_int4(s->ctx->dnnl) && !bf16 && operands != MOEINT4_DTYPE_F32) {
        mi4_xpu_arg args[] = {MI4_XPU_PTR(scales), MI4_XPU_INT(expert), MI4_XPU_INT(out),
                              MI4_XPU_INT(groups), MI4_XPU_PTR(s->buf.dnnl_s)};
        st = launch(s, MI4_XPU_DNNL_SCALES_T, (size_t)out, (size_t)groups, 5, args);
        if (!st) /* the copy waits for everything before it */
            st = s->rt->ops->copy(s->rt, s->queue, s->buf.dnnl_w,
                                  packed + (size_t)expert * expert_bytes, expert_bytes, s->err,
                                  s->cap);
        return st ? st
                  : mi4_xpu_dnnl_matmul_int4(s->ctx->dnnl, operands, rows, out, in, group_size,
                                             a, s->buf.dnnl_w, s->buf.dnnl_s, c, s->err, s->cap);
    }
    mi4_xpu_arg args[] = {MI4_XPU_PTR(packed),   MI4_XPU_PTR(scales),     MI4_XPU_INT(bf16),
                          MI4_XPU_INT(expert),   MI4_XPU_INT(out),        MI4_XPU_INT(in),
                          MI4_XPU_INT(group_size), MI4_XPU_INT(mdt),      MI4_XPU_PTR(s->buf.dnnl_w)};
    st = launch(s, MI4_XPU_DNNL_DEQUANT, (size_t)in, (size_t)out, 9, args);
    return st ? st : dnnl_matmul(s, rows, out, in, a, s->buf.dnnl_w, c);
}

/* One expert with many slots through oneDNN: gather its rows, w13, the
 * activation, w2, scatter to slots. */
static moeint4_status expert_dnnl(fwd_state *s, int expert, int rows, const void *hidden,
                                  const float *topk_weights)
{
    const mi4_xpu_weights *w = s->w;
    const moeint4_forward_args *a = s->args;
    int K = w->hidden, N = w->intermediate, num_local = w->num_local;
    int dtype = (int)a->dtype, topk = a->topk, act_kind = (int)a->activation;
    int on_input = a->apply_router_weight_on_input != 0;
    int mdt = (int)mi4_xpu_dnnl_dtype(s->ctx->dnnl, s->args->dtype);
    float limit = a->swiglu_limit, alpha = a->swiglu_alpha, beta = a->swiglu_beta;
    mi4_xpu_arg gather_args[] = {MI4_XPU_PTR(s->buf.route), MI4_XPU_INT(num_local),
                                 MI4_XPU_INT(expert), MI4_XPU_PTR(s->buf.sorted),
                                 MI4_XPU_PTR(hidden), MI4_XPU_INT(dtype),
                                 MI4_XPU_PTR(topk_weights), MI4_XPU_INT(on_input),
                                 MI4_XPU_INT(topk), MI4_XPU_INT(K), MI4_XPU_INT(mdt),
                                 MI4_XPU_PTR(s->buf.dnnl_a)};
    mi4_xpu_arg act_args[] = {MI4_XPU_PTR(s->buf.dnnl_c13), MI4_XPU_INT(rows), MI4_XPU_INT(N),
                              MI4_XPU_INT(act_kind), MI4_XPU_FLOAT(limit), MI4_XPU_FLOAT(alpha),
                              MI4_XPU_FLOAT(beta), MI4_XPU_INT(mdt),
                              MI4_XPU_PTR(s->buf.dnnl_a2)};
    mi4_xpu_arg scatter_args[] = {MI4_XPU_PTR(s->buf.route), MI4_XPU_INT(num_local),
                                  MI4_XPU_INT(expert), MI4_XPU_PTR(s->buf.sorted),
                                  MI4_XPU_PTR(s->buf.dnnl_c2), MI4_XPU_PTR(topk_weights),
                                  MI4_XPU_INT(on_input), MI4_XPU_INT(K),
                                  MI4_XPU_PTR(s->buf.slot_out)};
    moeint4_status st = launch(s, MI4_XPU_DNNL_GATHER, (size_t)K, (size_t)rows, 12, gather_args);
    if (!st)
        st = expert_projection(s, w->w13_packed, w->w13_scales, expert, 2 * N, K, w->group13,
                               rows, s->buf.dnnl_a, s->buf.dnnl_c13);
    if (!st)
        st = launch(s, MI4_XPU_DNNL_ACTIVATE, (size_t)N, (size_t)rows, 9, act_args);
    if (!st)
        st = expert_projection(s, w->w2_packed, w->w2_scales, expert, K, N, w->group2, rows,
                               s->buf.dnnl_a2, s->buf.dnnl_c2);
    if (!st)
        st = launch(s, MI4_XPU_DNNL_SCATTER, (size_t)K, (size_t)rows, 9, scatter_args);
    return st;
}

/* Experts below the crossover become tiles of the int4 kernels; the others
 * go through oneDNN now. Returns the tile count in *num_tiles. */
static moeint4_status plan_experts(fwd_state *s, const void *hidden, const float *topk_weights,
                                   int *num_tiles)
{
    int num_local = s->w->num_local, tiles = 0;
    const int32_t *offsets = s->host_route + num_local;
    int min_tokens = s->ctx->onednn_min_tokens;
    for (int e = 0; e < num_local; ++e) {
        int rows = offsets[e + 1] - offsets[e];
        if (rows == 0)
            continue;
        if (s->ctx->dnnl && min_tokens > 0 && rows >= min_tokens) {
            moeint4_status st = alloc_dnnl_buffers(s);
            if (!st)
                st = expert_dnnl(s, e, rows, hidden, topk_weights);
            if (st)
                return st;
            continue;
        }
        for (int r = offsets[e]; r < offsets[e + 1]; r += MI4_XPU_TILE_ROWS) {
            s->host_tiles[2 * tiles] = e;
            s->host_tiles[2 * tiles + 1] = r;
            ++tiles;
        }
    }
    *num_tiles = tiles;
    return MOEINT4_SUCCESS;
}

static moeint4_status run_chunk(fwd_state *s, int64_t first_token, int64_t tokens)
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
    void *output = (uint8_t *)a->output + (size_t)first_token * K * esize;
    int num_tiles = 0;

    moeint4_status st = route(s, first_token, tokens, 1);
    if (!st)
        st = plan_experts(s, hidden, topk_weights, &num_tiles);
    if (!st && num_tiles > 0)
        st = s->rt->ops->copy(s->rt, s->queue, s->buf.tiles, s->host_tiles,
                              (size_t)num_tiles * 2 * 4, s->err, s->cap);
    if (st)
        return st;
    mi4_xpu_arg w13_args[] = {MI4_XPU_PTR(s->buf.tiles), MI4_XPU_PTR(s->buf.route),
                              MI4_XPU_INT(num_local), MI4_XPU_PTR(s->buf.sorted),
                              MI4_XPU_PTR(hidden), MI4_XPU_INT(dtype), MI4_XPU_PTR(topk_weights),
                              MI4_XPU_INT(on_input), MI4_XPU_INT(topk),
                              MI4_XPU_PTR(w->w13_packed), MI4_XPU_PTR(w->w13_scales),
                              MI4_XPU_INT(bf16), MI4_XPU_INT(K), MI4_XPU_INT(N), MI4_XPU_INT(gs13),
                              MI4_XPU_INT(act_kind), MI4_XPU_FLOAT(limit), MI4_XPU_FLOAT(alpha),
                              MI4_XPU_FLOAT(beta), MI4_XPU_PTR(s->buf.act)};
    mi4_xpu_arg w2_args[] = {MI4_XPU_PTR(s->buf.tiles), MI4_XPU_PTR(s->buf.route),
                             MI4_XPU_INT(num_local), MI4_XPU_PTR(s->buf.sorted),
                             MI4_XPU_PTR(s->buf.act), MI4_XPU_PTR(topk_weights),
                             MI4_XPU_INT(on_input), MI4_XPU_PTR(w->w2_packed),
                             MI4_XPU_PTR(w->w2_scales), MI4_XPU_INT(bf16), MI4_XPU_INT(K),
                             MI4_XPU_INT(N), MI4_XPU_INT(gs2), MI4_XPU_PTR(s->buf.slot_out)};
    mi4_xpu_arg combine_args[] = {MI4_XPU_PTR(s->buf.slot_expert), MI4_XPU_PTR(s->buf.slot_out),
                                  MI4_XPU_INT(num_tokens), MI4_XPU_INT(topk), MI4_XPU_INT(K),
                                  MI4_XPU_INT(dtype), MI4_XPU_PTR(output)};
    st = launch(s, MI4_XPU_W13_GEMM, (size_t)N * MI4_XPU_GEMM_LANES, (size_t)num_tiles, 20,
                w13_args);
    if (!st)
        st = launch(s, MI4_XPU_W2_GEMM, (size_t)K * MI4_XPU_GEMM_LANES, (size_t)num_tiles, 14,
                    w2_args);
    if (!st)
        st = launch(s, MI4_XPU_COMBINE, (size_t)K, (size_t)num_tokens, 7, combine_args);
    return st;
}

static int64_t chunk_tokens_for(const mi4_xpu_context *ctx, const mi4_xpu_weights *w, int topk,
                                int64_t num_tokens)
{
    int64_t chunk = ctx->chunk_tokens;
    if (chunk <= 0) {
        size_t per_token = (size_t)topk * ((size_t)w->hidden + (size_t)w->intermediate) * 4;
        chunk = (int64_t)(MI4_XPU_SCRATCH_BUDGET / per_token);
    }
    if (chunk > MI4_XPU_MAX_CHUNK_TOKENS)
        chunk = MI4_XPU_MAX_CHUNK_TOKENS;
    if (chunk < 1)
        chunk = 1;
    return chunk < num_tokens ? chunk : num_tokens;
}

static moeint4_status forward_locked(fwd_state *s)
{
    int64_t total = s->args->num_tokens;
    moeint4_status st = alloc_buffers(s);
    /* with several chunks, check every id first so the output stays untouched */
    for (int64_t m = 0; !st && s->chunk_tokens < total && m < total; m += s->chunk_tokens)
        st = route(s, m, total - m < s->chunk_tokens ? total - m : s->chunk_tokens, 0);
    for (int64_t m = 0; !st && m < total; m += s->chunk_tokens)
        st = run_chunk(s, m, total - m < s->chunk_tokens ? total - m : s->chunk_tokens);
    if (!st)
        st = s->rt->ops->wait(s->rt, s->queue, s->err, s->cap);
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
    s.chunk_tokens = chunk_tokens_for(ctx, w, args->topk, args->num_tokens);
    pthread_mutex_lock(&ctx->lock);
    st = forward_locked(&s);
    if (st) /* buffers may still be in use by enqueued work */
        s.rt->ops->wait(s.rt, s.queue, NULL, 0);
    free_buffers(&s);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}
