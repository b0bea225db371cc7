/* A forward's device scratch: where its pieces lie (the plan), the bound a
 * caller workspace must meet, and the per-context pool that synchronous
 * forwards without a caller workspace draw from. */
#include <stdio.h>
#include <stdlib.h>

#include "backends/hip/hip_internal.h"

namespace {

constexpr size_t ALIGNMENT = MI4_WORKSPACE_ALIGNMENT;

size_t round_up(size_t bytes) { return (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT; }

} // namespace

mi4_hip_workspace_plan mi4_hip_plan_workspace(const mi4_hip_weights *w, int64_t slots,
                                              int64_t x_rows, int convert_x,
                                              mi4_hip_tile_config config)
{
    const int tile_rows = mi4_hip_tile_rows(config);
    const size_t k = (size_t)w->hidden_size, n = (size_t)w->intermediate_size;
    const int64_t bm = tile_rows;
    const int64_t touched = slots < w->num_local_experts ? slots : w->num_local_experts;
    const int64_t max_tiles = (slots + touched * (bm - 1)) / bm;
    mi4_hip_workspace_plan p;
    p.max_tiles = (int)max_tiles;
    p.at_tile = round_up(MI4_RECORD_WORDS * sizeof(int)); /* routing status words first */
    p.at_sorted = p.at_tile + round_up((size_t)max_tiles * sizeof(int));
    p.at_x = p.at_sorted + round_up((size_t)(max_tiles * bm) * sizeof(int));
    p.at_act = p.at_x + (convert_x ? round_up((size_t)x_rows * k * 2) : 0);
    p.at_y = p.at_act + round_up((size_t)(max_tiles * bm) * n * 2);
    p.at_route = p.at_y + round_up((size_t)slots * k * 4);
    p.at_expand =
        p.at_route + round_up(mi4_hip_route_scratch_bytes(slots, w->num_local_experts));
    p.total = p.at_expand + mi4_hip_int4_expand_bytes(w, config);
    return p;
}

size_t mi4_hip_workspace_bound(const mi4_hip_weights *w, int64_t max_tokens, int topk)
{
    /* Every piece grows with the slots for a fixed tile, so the largest plan
     * over the tiles at max_tokens bounds every smaller forward; the worst
     * input case converts a row per slot. */
    const int64_t slots = max_tokens * topk;
    size_t bound = 0;
    /* int4 weights: the BF16 copies only when a forward this large (or a
     * forced tile) takes a matrix-core tile; the tile grows with the batch. */
    const bool expands = mi4_hip_int4_expand_bytes(w, mi4_hip_choose_tile(max_tokens, slots, w)) > 0;
    for (int c = 0; c < MI4_TILE_COUNT; c++) {
        if (w->int4 && !expands && mi4_hip_int4_expand_bytes(w, (mi4_hip_tile_config)c) > 0)
            continue;
        size_t total = mi4_hip_plan_workspace(w, slots, slots, 1, (mi4_hip_tile_config)c).total;
        bound = total > bound ? total : bound;
    }
    return bound + ALIGNMENT; /* an unaligned caller pointer is rounded up */
}

void mi4_hip_workspace_free(mi4_hip_workspace *w)
{
    (void)hipFree(w->device);
    (void)hipHostFree(w->host_record);
    free(w);
}

moeint4_status mi4_hip_workspace_acquire(mi4_hip_context *ctx, size_t bytes,
                                         mi4_hip_workspace **out, char *err, size_t cap)
{
    pthread_mutex_lock(&ctx->pool_lock);
    mi4_hip_workspace *w = ctx->free_workspaces;
    if (w)
        ctx->free_workspaces = w->next;
    pthread_mutex_unlock(&ctx->pool_lock);
    if (w && w->bytes >= bytes) {
        *out = w;
        return MOEINT4_SUCCESS;
    }
    if (w == nullptr) {
        w = (mi4_hip_workspace *)calloc(1, sizeof *w);
        if (w == nullptr) {
            snprintf(err, cap, "hip: out of host memory");
            return MOEINT4_OUT_OF_MEMORY;
        }
        hipError_t e = hipHostMalloc((void **)&w->host_record, MI4_RECORD_WORDS * sizeof(int),
                                     hipHostMallocMapped);
        if (e == hipSuccess)
            e = hipHostGetDevicePointer((void **)&w->host_record_device, w->host_record, 0);
        if (e != hipSuccess) {
            mi4_hip_workspace_free(w);
            return mi4_hip_failure(err, cap, "allocating mapped host memory", e);
        }
    }
    (void)hipFree(w->device);
    w->device = nullptr;
    w->bytes = 0;
    if (bytes > 0) {
        size_t grown = bytes + bytes / 4;
        moeint4_status st =
            mi4_hip_device_alloc(&w->device, grown, "forward workspace", err, cap);
        if (st != MOEINT4_SUCCESS) {
            mi4_hip_workspace_free(w);
            return st;
        }
        w->bytes = grown;
    }
    *out = w;
    return MOEINT4_SUCCESS;
}

void mi4_hip_workspace_return(mi4_hip_context *ctx, mi4_hip_workspace *w)
{
    pthread_mutex_lock(&ctx->pool_lock);
    w->next = ctx->free_workspaces;
    ctx->free_workspaces = w;
    pthread_mutex_unlock(&ctx->pool_lock);
}
