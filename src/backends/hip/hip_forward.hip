/* One forward on the caller's stream: input conversion, routing, gemm13,
 * gemm2 and combine (or the two direct decode GEMVs), all on the device:
 * routing, per-expert counts and offsets never come back to the host.
 *   synchronous (default): scratch from the caller's workspace or the
 *     context's pool, wait for the stream, report a bad slot as
 *     INVALID_ARGUMENT (the output untouched);
 *   asynchronous (MOEINT4_FORWARD_ASYNC): enqueue only, on the caller's
 *     workspace; bad slots are dropped and kept in the weights' sticky
 *     record, which mi4_hip_forward_check reads (hip_slots.h). */
#include <stdio.h>
#include <string.h>

#include "backends/hip/hip_internal.h"

namespace {

/* The message of a bad-slot record, as the synchronous path and the check
 * give it. */
moeint4_status record_failure(const volatile int *record, int num_experts, char *err, size_t cap)
{
    const int slot = record[1], topk = record[3] > 0 ? record[3] : 1;
    const long long token = slot / topk;
    const int j = slot % topk;
    if (record[0] == MI4_RECORD_BAD_ID) {
        snprintf(err, cap, "topk_ids[%lld][%d] = %d is outside [0, %d)", token, j, record[2],
                 num_experts);
    } else {
        int bits = record[2];
        float weight;
        memcpy(&weight, &bits, sizeof weight);
        snprintf(err, cap, "topk_weights[%lld][%d] = %g is not finite", token, j, (double)weight);
    }
    return MOEINT4_INVALID_ARGUMENT;
}

/* What the host decides about a forward before anything is enqueued. */
struct forward_shape {
    int64_t tokens, slots;
    mi4_hip_tile_config config;
    bool per_slot;  /* a converted row per slot: the router weight on the input, or
                       act-order int4 weights (the slot's expert's input order) */
    bool x_direct;  /* bf16 input read in place, no conversion */
    mi4_hip_workspace_plan plan;
};

forward_shape shape_of(const mi4_hip_weights *w, const moeint4_forward_args *args)
{
    forward_shape s;
    s.tokens = args->num_tokens;
    s.slots = s.tokens * args->topk;
    s.config = mi4_hip_choose_tile(s.tokens, s.slots, w);
    s.per_slot = args->apply_router_weight_on_input != 0 || w->input_perm != nullptr;
    s.x_direct = args->dtype == MOEINT4_DTYPE_BF16 && !s.per_slot &&
                 ((uintptr_t)args->hidden_states % 16) == 0;
    s.plan = mi4_hip_plan_workspace(w, s.slots, s.per_slot ? s.slots : s.tokens, !s.x_direct,
                                    s.config);
    return s;
}

/* Enqueues the forward's kernels on args->stream over the scratch at `base`;
 * stops at the first failed launch and names it in *step. */
hipError_t enqueue(const mi4_hip_context *ctx, const mi4_hip_weights *w,
                   const moeint4_forward_args *args, const forward_shape &s, char *base,
                   int *record, int sticky, const char **step)
{
    const hipStream_t stream = (hipStream_t)args->stream;
    const mi4_hip_workspace_plan &p = s.plan;
    mi4_hip_routing routing;
    routing.status = (int *)base;
    routing.tile_expert = (int *)(base + p.at_tile);
    routing.sorted_slot = (int *)(base + p.at_sorted);
    routing.max_tiles = p.max_tiles;
    routing.tile_rows = mi4_hip_tile_rows(s.config);
    routing.route_scratch = (int *)(base + p.at_route);

    mi4_slot_check check;
    check.topk_ids = args->topk_ids;
    check.topk_weights = args->topk_weights;
    check.expert_map = w->identity_map ? nullptr : w->expert_map;
    check.num_experts = w->num_experts;
    check.topk = args->topk;
    check.record = record;
    check.sticky = sticky;

    mi4_hip_gemm_args g;
    g.weights = w;
    g.routing = &routing;
    g.x_bf16 = s.x_direct ? (const uint16_t *)args->hidden_states
                          : (const uint16_t *)(base + p.at_x);
    g.x_per_slot = s.per_slot;
    g.topk = args->topk;
    g.topk_weights = args->topk_weights;
    g.weight_on_output = args->apply_router_weight_on_input == 0;
    g.activation = args->activation;
    g.limit = args->swiglu_limit;
    g.alpha = args->swiglu_alpha;
    g.beta = args->swiglu_beta;
    g.act = (uint16_t *)(base + p.at_act);
    g.y = (float *)(base + p.at_y);
    g.use_mma = ctx->use_mma;
    g.stream = stream;
    g.multiprocessors = ctx->multiprocessors;
    g.num_slots = s.slots;
    g.combine.y = g.y;
    g.combine.check = check;
    g.combine.num_tokens = s.tokens;
    g.combine.topk = args->topk;
    g.combine.hidden = w->hidden_size;
    g.combine.out = args->output;
    g.combine.dtype = args->dtype;
    g.combine.status = routing.status;

    const bool direct_gemv = s.config == MI4_TILE_DIRECT; /* no routing, no combine */
    hipError_t e = hipSuccess;
    if (!s.x_direct) {
        *step = "input conversion";
        mi4_hip_convert_rows how;
        how.per_slot = s.per_slot;
        how.weight_on_input = args->apply_router_weight_on_input != 0;
        how.input_perm = w->input_perm;
        how.check = check;
        e = mi4_hip_launch_convert(args->hidden_states, args->dtype, s.tokens, w->hidden_size,
                                   args->topk, args->topk_weights, &how,
                                   (uint16_t *)(base + p.at_x), stream);
    }
    if (e == hipSuccess && w->int4 && mi4_hip_tile_is_int4_gemm(s.config)) {
        /* the int4 grouped GEMM reads its token rows permuted; they go where
         * gemm2 writes y later (x rows <= slots, 2 bytes < 4) */
        *step = "input permutation";
        uint16_t *permuted = (uint16_t *)(base + p.at_y);
        e = mi4_hip_launch_int4_permute(g.x_bf16, permuted, s.per_slot ? s.slots : s.tokens,
                                        w->hidden_size, stream);
        g.x_bf16 = permuted;
    }
    mi4_hip_weights expanded; /* int4 weights as BF16 for the matrix-core tiles */
    if (e == hipSuccess && mi4_hip_int4_expand_bytes(w, s.config) > 0) {
        *step = "int4 weights to bf16";
        e = mi4_hip_int4_expand(w, base + p.at_expand, stream, &expanded);
        g.weights = &expanded;
    }
    if (e == hipSuccess && !direct_gemv) {
        *step = "routing";
        e = mi4_hip_launch_route(&check, s.slots, w->num_local_experts, &routing, stream);
    }
    if (e == hipSuccess) {
        *step = "gemm13";
        e = mi4_hip_launch_gemm13(s.config, &g);
    }
    if (e == hipSuccess) {
        *step = "gemm2";
        e = mi4_hip_launch_gemm2(s.config, &g);
    }
    if (e == hipSuccess && !direct_gemv) {
        *step = "combine";
        e = mi4_hip_launch_combine(&g.combine, stream);
    }
    return e;
}

/* The caller's workspace rounded up to MI4_WORKSPACE_ALIGNMENT (the bound
 * includes that slack), or NULL after a message when it is smaller than
 * `needed`. */
char *caller_scratch(const moeint4_forward_args *args, size_t needed, char *err, size_t cap)
{
    const uintptr_t at = (uintptr_t)args->workspace, mask = MI4_WORKSPACE_ALIGNMENT - 1;
    const uintptr_t aligned = (at + mask) & ~mask;
    const size_t lost = (size_t)(aligned - at);
    if (args->workspace_bytes < lost || args->workspace_bytes - lost < needed) {
        snprintf(err, cap,
                 "workspace_bytes = %zu is less than the %zu bytes this forward needs "
                 "(moeint4_forward_workspace_size)",
                 args->workspace_bytes, needed + lost);
        return nullptr;
    }
    return (char *)aligned;
}

} // namespace

moeint4_status mi4_hip_forward(mi4_hip_context *ctx, const mi4_hip_weights *w,
                               const moeint4_forward_args *args, char *err, size_t err_cap)
{
    if (args->num_tokens == 0)
        return MOEINT4_SUCCESS;
    if (args->dtype != MOEINT4_DTYPE_F32 && args->dtype != MOEINT4_DTYPE_F16 &&
        args->dtype != MOEINT4_DTYPE_BF16) {
        snprintf(err, err_cap, "hip: dtype %d is not F32, F16 or BF16", (int)args->dtype);
        return MOEINT4_UNSUPPORTED;
    }
    const bool async = (args->flags & MOEINT4_FORWARD_ASYNC) != 0;
    const forward_shape s = shape_of(w, args);
    char *scratch = nullptr;
    if (args->workspace != nullptr) {
        scratch = caller_scratch(args, s.plan.total, err, err_cap);
        if (scratch == nullptr)
            return MOEINT4_INVALID_ARGUMENT;
    } else if (async) {
        snprintf(err, err_cap,
                 "workspace is NULL: an asynchronous forward needs a caller workspace "
                 "(moeint4_forward_workspace_size)");
        return MOEINT4_INVALID_ARGUMENT;
    }
    mi4_hip_device_scope scope(ctx->device);
    if (scope.status() != hipSuccess)
        return mi4_hip_failure(err, err_cap, "selecting the device", scope.status());
    const char *step = "enqueue";
    if (async) {
        hipError_t e = enqueue(ctx, w, args, s, scratch, w->error_record, 1, &step);
        return e == hipSuccess ? MOEINT4_SUCCESS : mi4_hip_failure(err, err_cap, step, e);
    }

    /* Synchronous: the pool gives the scratch (unless the caller did) and
     * this forward's own record. */
    mi4_hip_workspace *ws = nullptr;
    moeint4_status st =
        mi4_hip_workspace_acquire(ctx, scratch ? 0 : s.plan.total, &ws, err, err_cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    volatile int *record = ws->host_record;
    record[0] = MI4_RECORD_NONE;
    hipError_t e = enqueue(ctx, w, args, s, scratch ? scratch : (char *)ws->device,
                           ws->host_record_device, 0, &step);
    /* Also after a failed launch: kernels already enqueued may still write
     * into the workspace, which must not go back to the pool before. */
    const hipError_t synced = hipStreamSynchronize((hipStream_t)args->stream);
    if (e == hipSuccess && synced != hipSuccess) {
        e = synced;
        step = "stream synchronize";
    }
    if (e != hipSuccess)
        st = mi4_hip_failure(err, err_cap, step, e);
    else if (record[0] != MI4_RECORD_NONE)
        st = record_failure(record, w->num_experts, err, err_cap);
    if (synced == hipSuccess)
        mi4_hip_workspace_return(ctx, ws);
    else
        mi4_hip_workspace_free(ws); /* not reusable: hipFree waits for the device */
    return st;
}

moeint4_status mi4_hip_forward_check(mi4_hip_context *ctx, const mi4_hip_weights *w,
                                     void *stream, char *err, size_t err_cap)
{
    mi4_hip_device_scope scope(ctx->device);
    if (scope.status() != hipSuccess)
        return mi4_hip_failure(err, err_cap, "selecting the device", scope.status());
    hipError_t e = hipStreamSynchronize((hipStream_t)stream);
    if (e != hipSuccess)
        return mi4_hip_failure(err, err_cap, "stream synchronize", e);
    int record[MI4_RECORD_WORDS];
    e = hipMemcpy(record, w->error_record, sizeof record, hipMemcpyDeviceToHost);
    if (e != hipSuccess)
        return mi4_hip_failure(err, err_cap, "reading the bad-slot record", e);
    if (record[0] == MI4_RECORD_NONE)
        return MOEINT4_SUCCESS;
    e = hipMemset(w->error_record, 0, sizeof record);
    if (e != hipSuccess)
        return mi4_hip_failure(err, err_cap, "clearing the bad-slot record", e);
    return record_failure(record, w->num_experts, err, err_cap);
}
