/* The CPU forward pass. Per chunk of tokens, one pool job:
 *   plan    (caller)   route slots to local experts: pairs sorted by expert;
 *                      the workers are woken first, so they start while it runs
 *   phase 1 (threads)  input rows of every token in the kernels' form (dtype
 *                      converted once), rows shared out through a counter
 *   phase 2 (threads)  w13 tiles x the expert's tokens, gate and up tile t
 *                      together, activation fused: items = (expert, tiles);
 *                      a router weight on the input scales W13 x (linear).
 *                      Whoever finishes an expert's last item sums its
 *                      activations per group and marks the expert ready.
 *   phase 3 (threads)  w2 fused with the router weight and the top-k sum:
 *                      items = output column tiles over every expert, each
 *                      expert taken as soon as it is ready (no wait for the
 *                      whole of phase 2), so each output value is summed by
 *                      one thread in a fixed order (same bits for any thread
 *                      count). Decode (few pairs) runs it by expert instead,
 *                      like phase 2 (items = (expert, tiles), two far-apart
 *                      tile streams), keeping each pair's w2 rows; the caller
 *                      then sums each token's rows in the same fixed order.
 * Work items are shared out dynamically, so both cores stream weights even
 * at M = 1 with only topk experts, and a phase ends when its work is done,
 * whoever did it (cpu_pool.h: a worker that wakes late is not waited for).
 * Each thread owns a contiguous share of a phase's items and takes them in
 * address order before it helps with the others' (cpu_work.h), so its
 * prefetches run on into its own next item. The scratch block is kept by the
 * context between forwards. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_scalar_io.h"
#include "backends/cpu/cpu_work.h"
#include "base/alloc.h"
#include "base/error.h"

/* Tokens per pass: bounds the scratch (pairs x K floats) for huge M. */
#define MI4_CPU_TOKEN_CHUNK 2048
#define MI4_CPU_ACTIVATION_FLOATS ((size_t)16 << 20)
#define MI4_CPU_MAX_OUT_TILES 64
/* Scratch blocks up to this size are kept by the context for the next
 * forward (decode sizes); larger ones are allocated per call. */
#define MI4_CPU_KEPT_SCRATCH_BYTES ((size_t)32 << 20)
/* Phase 3 runs by expert (phase3_by_expert) while every pair's w2 rows fit
 * in this many floats (1 MiB: Qwen3 up to M = 16, Mixtral up to M = 32). */
#define MI4_CPU_W2_BY_EXPERT_FLOATS ((size_t)256 << 10)

typedef struct phase2_item {
    int active; /* index into active_expert */
    int tile_begin, tile_end;
} phase2_item;

typedef struct forward_plan {
    const mi4_cpu_weights *w;
    const mi4_cpu_kernels *kernels;
    const moeint4_forward_args *args;
    mi4_cpu_activation act;
    int64_t token_begin;
    int token_count;
    int num_pairs;
    int num_active;
    int max_expert_tokens;
    const int *active_expert;     /* local expert ids, ascending */
    const int *active_start;      /* [num_active + 1] pair offsets */
    const int *pair_token;        /* token index within the chunk */
    const float *pair_in_factor;  /* router weight on the input, or 1 */
    const float *pair_out_factor; /* router weight on the output, or 1 */
    float *x;                     /* [rows][x_stride] input rows, kernels' form */
    /* Phase 1's rows: the chunk's tokens; or one row per pair (pair_rows):
     * for act-order weights gathered by its expert's input_perm into
     * `gathered`, else its token's row (row_token[pair]). */
    const char *input_rows;
    int input_row_count;
    int pair_rows;
    const int *row_token; /* NULL: row m is input row m */
    char *gathered;
    size_t x_stride;
    float *xsum; /* [tokens][geo13.num_groups] */
    float *a;    /* [pairs][a_stride] activation rows, kernels' form */
    size_t a_stride;
    float *a_tile_sum;  /* [pairs][geo2.in_blocks] */
    float *a_group_sum; /* [pairs][geo2.num_groups] */
    /* per pair: its token's input row and sums, its activation row and sums */
    const float **pair_x, **pair_xsum, **pair_a, **pair_a_sum;
    int on_input; /* router weight on the input */
    const phase2_item *items;
    int out_tiles_per_item;
    int num_out_items;
    float *thread_scratch; /* per thread: phase 2/3 buffers */
    size_t thread_scratch_floats;
    int max_pairs;
    atomic_int next_row; /* phase 1 rows taken / converted */
    atomic_int rows_done;
    mi4_cpu_work_share *item_shares;     /* [threads] phase 2 items, per thread */
    atomic_int *expert_items_left;       /* [num_active] phase 2 items not yet done */
    atomic_int *expert_ready;            /* [num_active] 1: activations and sums written */
    mi4_cpu_work_share *out_item_shares; /* [threads] phase 3 items, per thread */
    int threads;
    /* Decode (few pairs): phase 3 by expert instead (phase3_by_expert):
     * items = (expert, tiles [tile_begin, tile_end) of w2's first half, each
     * run with the tile half_tiles further on), y rows to pair_out. */
    int w2_by_expert;
    const phase2_item *w2_items;
    int w2_half_tiles;
    float *pair_out; /* [pairs][pair_out_stride] w2 x activations, per pair */
    size_t pair_out_stride;
    float *out_row; /* [hidden_size] combine_pairs' sums */
} forward_plan;

static size_t round_up_floats(size_t count) { return (count + 15) / 16 * 16; }

/* Floats between consecutive rows of `blocks` blocks in the kernels' form:
 * whole lines, plus one more, so that rows a multiple of 4 KB long do not
 * all fall in one L1 set (the AMX table reads 16 rows at once: 5% at Qwen3
 * M = 512). */
static size_t row_stride(const mi4_cpu_kernels *kernels, int blocks)
{
    return round_up_floats(mi4_cpu_row_floats(kernels, blocks)) + 16;
}

/* Bytes per value of the activations (hidden states and output). */
static size_t elem_bytes(moeint4_dtype dtype) { return dtype == MOEINT4_DTYPE_F32 ? 4 : 2; }

static void phase1_inputs(forward_plan *plan)
{
    const mi4_cpu_weights *w = plan->w;
    const moeint4_forward_args *args = plan->args;
    size_t elem = elem_bytes(args->dtype);
    int group_columns = w->geo13.group_blocks * MI4_CPU_BLOCK_COLUMNS;
    if (group_columns > w->hidden_size)
        group_columns = w->hidden_size;
    for (;;) {
        int m = atomic_fetch_add_explicit(&plan->next_row, 1, memory_order_relaxed);
        if (m >= plan->input_row_count)
            return;
        int source = plan->row_token ? plan->row_token[m] : m;
        const char *src = plan->input_rows + (size_t)source * w->hidden_size * elem;
        plan->kernels->scale_row(args->dtype, src, w->hidden_size, 1.0f, group_columns,
                                 plan->x + (size_t)m * plan->x_stride,
                                 plan->xsum + (size_t)m * w->geo13.num_groups);
        atomic_fetch_add_explicit(&plan->rows_done, 1, memory_order_release);
    }
}

/* A tile job over the pairs of active expert `ai`: their rows in `rows` and
 * group sums in `sums` (per pair), y rows to `y`; the tile is set per run. */
static mi4_cpu_tile_job expert_job(const forward_plan *plan, const mi4_cpu_pack_geometry *geo,
                                   int ai, const float *const *rows, const float *const *sums,
                                   float *y)
{
    int first = plan->active_start[ai];
    mi4_cpu_tile_job job = {
        .geo = geo,
        .scales_bf16 = plan->w->scales_bf16,
        .x = rows + first,
        .xsum = sums + first,
        .tokens = plan->active_start[ai + 1] - first,
        .y = y,
    };
    return job;
}

/* Items (active expert, tiles [t, t + item_tiles)) over tiles [0, tiles) of
 * every active expert, expert by expert; returns how many. */
static int make_items(phase2_item *items, int num_active, int tiles, int item_tiles)
{
    int count = 0;
    for (int ai = 0; ai < num_active; ai++)
        for (int t = 0; t < tiles; t += item_tiles) {
            items[count].active = ai;
            items[count].tile_begin = t;
            items[count].tile_end = t + item_tiles < tiles ? t + item_tiles : tiles;
            count++;
        }
    return count;
}

static void phase2_item_run(forward_plan *plan, const phase2_item *item, float *y_gate, float *y_up)
{
    const mi4_cpu_weights *w = plan->w;
    const mi4_cpu_pack_geometry *geo = &w->geo13;
    int n = w->intermediate_size;
    int expert = plan->active_expert[item->active];
    int first = plan->active_start[item->active];
    int tokens = plan->active_start[item->active + 1] - first;
    const uint8_t *expert_w13 = w->w13 + (size_t)expert * w->w13_expert_bytes;
    mi4_cpu_tile_job gate =
        expert_job(plan, geo, item->active, plan->pair_x, plan->pair_xsum, y_gate);
    mi4_cpu_tile_job up = gate;
    up.y = y_up;
    for (int t = item->tile_begin; t < item->tile_end; t++) {
        gate.tile = expert_w13 + (size_t)t * geo->tile_bytes;
        up.tile = expert_w13 + (size_t)(geo->tiles + t) * geo->tile_bytes;
        mi4_cpu_run_tile_pair(plan->kernels, &gate, &up);
        if (plan->on_input)
            for (int i = 0; i < tokens; i++) {
                float factor = plan->pair_in_factor[first + i];
                for (int r = 0; r < MI4_CPU_TILE_ROWS; r++) {
                    y_gate[i * MI4_CPU_TILE_ROWS + r] *= factor;
                    y_up[i * MI4_CPU_TILE_ROWS + r] *= factor;
                }
            }
        plan->kernels->activate(&plan->act, y_gate, y_up, tokens * MI4_CPU_TILE_ROWS);
        for (int i = 0; i < tokens; i++) {
            float values[MI4_CPU_TILE_ROWS];
            for (int r = 0; r < MI4_CPU_TILE_ROWS; r++)
                values[r] =
                    t * MI4_CPU_TILE_ROWS + r < n ? y_gate[i * MI4_CPU_TILE_ROWS + r] : 0.0f;
            float *a = plan->a + (size_t)(first + i) * plan->a_stride;
            plan->a_tile_sum[(size_t)(first + i) * w->geo2.in_blocks + t] =
                plan->kernels->pack_block(values, a, t);
        }
    }
}

/* Group sums of the activations of every pair of active expert `ai`. */
static void expert_group_sums(forward_plan *plan, int ai)
{
    const mi4_cpu_pack_geometry *geo = &plan->w->geo2;
    for (int p = plan->active_start[ai]; p < plan->active_start[ai + 1]; p++) {
        const float *tile_sums = plan->a_tile_sum + (size_t)p * geo->in_blocks;
        float *sums = plan->a_group_sum + (size_t)p * geo->num_groups;
        for (int g = 0; g < geo->num_groups; g++) {
            float s = 0.0f;
            for (int b = g * geo->group_blocks;
                 b < (g + 1) * geo->group_blocks && b < geo->in_blocks; b++)
                s += tile_sums[b];
            sums[g] = s;
        }
    }
}

static void phase2_w13(forward_plan *plan, int thread, float *scratch)
{
    float *y_gate = scratch;
    float *y_up = scratch + (size_t)plan->max_expert_tokens * MI4_CPU_TILE_ROWS;
    for (;;) {
        int index = mi4_cpu_work_take(plan->item_shares, plan->threads, thread);
        if (index < 0)
            return;
        const phase2_item *item = &plan->items[index];
        phase2_item_run(plan, item, y_gate, y_up);
        /* the expert's last item: every other item's writes are visible here */
        if (atomic_fetch_sub_explicit(&plan->expert_items_left[item->active], 1,
                                      memory_order_acq_rel) == 1) {
            expert_group_sums(plan, item->active);
            atomic_store_explicit(&plan->expert_ready[item->active], 1, memory_order_release);
        }
    }
}

/* acc[token][column - column0] += router weight x the y rows of tile t. */
static void phase3_accumulate(const forward_plan *plan, int first, int tokens, const float *y,
                              float *acc, int columns, int tile_offset)
{
    for (int i = 0; i < tokens; i++) {
        float factor = plan->pair_out_factor[first + i];
        float *dst = acc + (size_t)plan->pair_token[first + i] * columns +
                     (size_t)tile_offset * MI4_CPU_TILE_ROWS;
        for (int r = 0; r < MI4_CPU_TILE_ROWS; r++)
            dst[r] += factor * y[i * MI4_CPU_TILE_ROWS + r];
    }
}

static void phase3_w2(forward_plan *plan, int thread, float *scratch)
{
    const mi4_cpu_weights *w = plan->w;
    const mi4_cpu_pack_geometry *geo = &w->geo2;
    const moeint4_forward_args *args = plan->args;
    size_t elem = elem_bytes(args->dtype);
    int columns = plan->out_tiles_per_item * MI4_CPU_TILE_ROWS;
    float *acc = scratch;
    float *y = scratch + (size_t)plan->token_count * columns;
    float *y_next = y + (size_t)plan->max_pairs * MI4_CPU_TILE_ROWS;
    for (;;) {
        int index = mi4_cpu_work_take(plan->out_item_shares, plan->threads, thread);
        if (index < 0)
            return;
        int tile_begin = index * plan->out_tiles_per_item;
        int tile_end = tile_begin + plan->out_tiles_per_item;
        if (tile_end > geo->tiles)
            tile_end = geo->tiles;
        memset(acc, 0, sizeof(float) * (size_t)plan->token_count * columns);
        for (int ai = 0; ai < plan->num_active; ai++) {
            int expert = plan->active_expert[ai];
            int first = plan->active_start[ai];
            int tokens = plan->active_start[ai + 1] - first;
            const uint8_t *expert_w2 = w->w2 + (size_t)expert * w->w2_expert_bytes;
            mi4_cpu_wait_count(&plan->expert_ready[ai], 1);
            mi4_cpu_tile_job job = expert_job(plan, geo, ai, plan->pair_a, plan->pair_a_sum, y);
            mi4_cpu_tile_job next = job;
            next.y = y_next;
            int t = tile_begin;
            for (; t + 1 < tile_end; t += 2) { /* tiles in pairs (tile_pair) */
                job.tile = expert_w2 + (size_t)t * geo->tile_bytes;
                next.tile = job.tile + geo->tile_bytes;
                mi4_cpu_run_tile_pair(plan->kernels, &job, &next);
                phase3_accumulate(plan, first, tokens, y, acc, columns, t - tile_begin);
                phase3_accumulate(plan, first, tokens, y_next, acc, columns, t + 1 - tile_begin);
            }
            if (t < tile_end) {
                job.tile = expert_w2 + (size_t)t * geo->tile_bytes;
                plan->kernels->tile(&job);
                phase3_accumulate(plan, first, tokens, y, acc, columns, t - tile_begin);
            }
        }
        int column0 = tile_begin * MI4_CPU_TILE_ROWS;
        int count = (tile_end - tile_begin) * MI4_CPU_TILE_ROWS;
        if (column0 + count > w->hidden_size)
            count = w->hidden_size - column0;
        for (int m = 0; m < plan->token_count; m++) {
            char *dst = (char *)args->output +
                        ((size_t)(plan->token_begin + m) * w->hidden_size + column0) * elem;
            plan->kernels->store_row(args->dtype, acc + (size_t)m * columns, count, dst);
        }
    }
}

/* Phase 3 for decode: w2 by expert, like phase 2 (two tile streams far
 * apart, tile t and t + half_tiles, one expert's items consecutive in a
 * thread's share), each pair's y rows kept whole; combine_pairs sums them
 * afterwards. Adjacent tile pairs across all experts per output slice (the
 * many-pairs path) read as one stream whose two prefetches overlap: 25 GB/s
 * on one core for w2 tiles against 36 GB/s for two independent streams
 * (Qwen3 shapes, tiles from DRAM). */
static void phase3_by_expert(forward_plan *plan, int thread, float *scratch)
{
    const mi4_cpu_weights *w = plan->w;
    const mi4_cpu_pack_geometry *geo = &w->geo2;
    float *y = scratch;
    float *y_far = y + (size_t)plan->max_pairs * MI4_CPU_TILE_ROWS;
    for (;;) {
        int index = mi4_cpu_work_take(plan->out_item_shares, plan->threads, thread);
        if (index < 0)
            return;
        const phase2_item *item = &plan->w2_items[index];
        int first = plan->active_start[item->active];
        int tokens = plan->active_start[item->active + 1] - first;
        const uint8_t *expert_w2 =
            w->w2 + (size_t)plan->active_expert[item->active] * w->w2_expert_bytes;
        mi4_cpu_wait_count(&plan->expert_ready[item->active], 1);
        mi4_cpu_tile_job job =
            expert_job(plan, geo, item->active, plan->pair_a, plan->pair_a_sum, y);
        mi4_cpu_tile_job far = job;
        far.y = y_far;
        for (int t = item->tile_begin; t < item->tile_end; t++) {
            int t_far = t + plan->w2_half_tiles;
            job.tile = expert_w2 + (size_t)t * geo->tile_bytes;
            far.tile = expert_w2 + (size_t)t_far * geo->tile_bytes;
            if (t_far < geo->tiles)
                mi4_cpu_run_tile_pair(plan->kernels, &job, &far);
            else
                plan->kernels->tile(&job);
            for (int i = 0; i < tokens; i++) {
                float *out = plan->pair_out + (size_t)(first + i) * plan->pair_out_stride;
                memcpy(out + (size_t)t * MI4_CPU_TILE_ROWS, y + i * MI4_CPU_TILE_ROWS,
                       sizeof(float) * MI4_CPU_TILE_ROWS);
                if (t_far < geo->tiles)
                    memcpy(out + (size_t)t_far * MI4_CPU_TILE_ROWS, y_far + i * MI4_CPU_TILE_ROWS,
                           sizeof(float) * MI4_CPU_TILE_ROWS);
            }
        }
    }
}

/* Output rows from the pairs' w2 rows: each token's pairs summed in pair
 * order with their router weights, the sums phase3_accumulate forms (same
 * bits as the many-pairs path), rounded once. `acc` holds hidden_size floats. */
static void combine_pairs(const forward_plan *plan, float *acc)
{
    const moeint4_forward_args *args = plan->args;
    int k = plan->w->hidden_size;
    size_t elem = elem_bytes(args->dtype);
    for (int m = 0; m < plan->token_count; m++) {
        memset(acc, 0, sizeof(float) * (size_t)k);
        for (int p = 0; p < plan->num_pairs; p++) {
            if (plan->pair_token[p] != m)
                continue;
            float factor = plan->pair_out_factor[p];
            const float *y = plan->pair_out + (size_t)p * plan->pair_out_stride;
            for (int c = 0; c < k; c++)
                acc[c] += factor * y[c];
        }
        char *dst = (char *)args->output + (size_t)(plan->token_begin + m) * (size_t)k * elem;
        plan->kernels->store_row(args->dtype, acc, k, dst);
    }
}

static void forward_job(void *arg, int thread, int threads)
{
    /* work comes in plan->threads shares; a pool that refuses runs one job,
     * whose thread 0 takes every share */
    (void)threads;
    forward_plan *plan = arg;
    float *scratch = plan->thread_scratch + (size_t)thread * plan->thread_scratch_floats;
    phase1_inputs(plan);
    mi4_cpu_wait_count(&plan->rows_done, plan->input_row_count);
    phase2_w13(plan, thread, scratch);
    if (plan->w2_by_expert)
        phase3_by_expert(plan, thread, scratch);
    else
        phase3_w2(plan, thread, scratch);
}

/* Bump allocation inside one aligned block. */
typedef struct arena {
    char *base;
    size_t used;
} arena;

static void *arena_take(arena *a, size_t bytes)
{
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (bytes + 63) / 64 * 64;
    return p;
}

/* Lays the plan's buffers out in `a` (sizes only when a->base is NULL). */
static void plan_layout(forward_plan *plan, arena *a, int max_tokens, int max_pairs, int threads,
                        int **counts, int **active, int **starts, int **tokens, float **in_f,
                        float **out_f, phase2_item **items, int max_items, phase2_item **w2_items,
                        int max_w2_items)
{
    const mi4_cpu_weights *w = plan->w;
    size_t experts = (size_t)(w->num_local_experts + 1);
    *counts = arena_take(a, sizeof(int) * experts);
    *active = arena_take(a, sizeof(int) * experts);
    *starts = arena_take(a, sizeof(int) * experts);
    plan->expert_items_left = arena_take(a, sizeof(atomic_int) * experts);
    plan->expert_ready = arena_take(a, sizeof(atomic_int) * experts);
    *tokens = arena_take(a, sizeof(int) * (size_t)max_pairs);
    *in_f = arena_take(a, sizeof(float) * (size_t)max_pairs);
    *out_f = arena_take(a, sizeof(float) * (size_t)max_pairs);
    *items = arena_take(a, sizeof(phase2_item) * (size_t)max_items);
    int rows = plan->pair_rows ? max_pairs : max_tokens;
    plan->x = arena_take(a, sizeof(float) * (size_t)rows * plan->x_stride);
    plan->xsum = arena_take(a, sizeof(float) * (size_t)rows * w->geo13.num_groups);
    size_t elem = elem_bytes(plan->args->dtype);
    plan->gathered =
        w->input_perm ? arena_take(a, elem * (size_t)max_pairs * (size_t)w->hidden_size) : NULL;
    plan->pair_x = arena_take(a, sizeof(float *) * (size_t)max_pairs);
    plan->pair_xsum = arena_take(a, sizeof(float *) * (size_t)max_pairs);
    plan->pair_a = arena_take(a, sizeof(float *) * (size_t)max_pairs);
    plan->pair_a_sum = arena_take(a, sizeof(float *) * (size_t)max_pairs);
    plan->a = arena_take(a, sizeof(float) * (size_t)max_pairs * plan->a_stride);
    plan->a_tile_sum = arena_take(a, sizeof(float) * (size_t)max_pairs * w->geo2.in_blocks);
    plan->a_group_sum = arena_take(a, sizeof(float) * (size_t)max_pairs * w->geo2.num_groups);
    *w2_items = arena_take(a, sizeof(phase2_item) * (size_t)max_w2_items);
    if (plan->w2_by_expert) {
        plan->pair_out = arena_take(a, sizeof(float) * (size_t)max_pairs * plan->pair_out_stride);
        plan->out_row = arena_take(a, sizeof(float) * (size_t)w->hidden_size);
    }
    plan->item_shares = arena_take(a, sizeof(mi4_cpu_work_share) * (size_t)threads);
    plan->out_item_shares = arena_take(a, sizeof(mi4_cpu_work_share) * (size_t)threads);
    plan->thread_scratch =
        arena_take(a, sizeof(float) * (size_t)threads * plan->thread_scratch_floats);
}

/* The context's kept scratch when it is free and large enough (grown when
 * it is not), else a block of this call's own; NULL when out of memory. */
static void *scratch_take(mi4_cpu_context *ctx, size_t bytes, int *kept)
{
    *kept = 0;
    if (bytes <= MI4_CPU_KEPT_SCRATCH_BYTES && !atomic_exchange(&ctx->scratch_busy, 1)) {
        if (ctx->scratch_bytes < bytes) {
            mi4_free(ctx->scratch);
            ctx->scratch_bytes = 0;
            ctx->scratch = mi4_large_alloc(bytes);
            if (ctx->scratch)
                ctx->scratch_bytes = bytes;
        }
        if (ctx->scratch) {
            *kept = 1;
            return ctx->scratch;
        }
        atomic_store(&ctx->scratch_busy, 0);
    }
    return mi4_large_alloc(bytes);
}

static void scratch_give_back(mi4_cpu_context *ctx, void *block, int kept)
{
    if (kept)
        atomic_store(&ctx->scratch_busy, 0);
    else
        mi4_free(block);
}

/* Act-order: pair p's input row is its token's x in its expert's sorted order. */
static void gather_act_order_rows(forward_plan *plan, size_t elem)
{
    const mi4_cpu_weights *w = plan->w;
    size_t k = (size_t)w->hidden_size;
    const char *tokens =
        (const char *)plan->args->hidden_states + (size_t)plan->token_begin * k * elem;
    for (int ai = 0; ai < plan->num_active; ai++) {
        const int32_t *perm = w->input_perm + (size_t)plan->active_expert[ai] * k;
        for (int p = plan->active_start[ai]; p < plan->active_start[ai + 1]; p++) {
            const char *src = tokens + (size_t)plan->pair_token[p] * k * elem;
            char *dst = plan->gathered + (size_t)p * k * elem;
            if (elem == 4)
                for (size_t i = 0; i < k; i++)
                    memcpy(dst + 4 * i, src + 4 * (size_t)perm[i], 4);
            else
                for (size_t i = 0; i < k; i++)
                    memcpy(dst + 2 * i, src + 2 * (size_t)perm[i], 2);
        }
    }
}

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

moeint4_status mi4_cpu_forward_with(mi4_cpu_context *ctx, const mi4_cpu_kernels *kernels,
                                    const mi4_cpu_weights *w, const moeint4_forward_args *args,
                                    char *err, size_t err_cap)
{
    if (args->num_tokens <= 0)
        return MOEINT4_SUCCESS;
    /* sleeping workers start waking now, while the caller plans */
    mi4_cpu_pool_wake(ctx->pool);
    const int tile_shapes = w->geo13.in_blocks % MI4_CPU_SLICE_BLOCKS == 0 &&
                            w->geo13.group_blocks % MI4_CPU_SLICE_BLOCKS == 0 &&
                            w->geo2.in_blocks % MI4_CPU_SLICE_BLOCKS == 0 &&
                            w->geo2.group_blocks % MI4_CPU_SLICE_BLOCKS == 0;
    kernels = mi4_cpu_kernels_for_dtype(kernels, args->dtype, args->num_tokens * args->topk,
                                        w->num_local_experts, tile_shapes);
    int threads = ctx->num_threads;
    int topk = args->topk;
    /* tokens per pass: at most MI4_CPU_TOKEN_CHUNK, and few enough that the
     * activations of every pair (and its input row, with pair rows) stay
     * under MI4_CPU_ACTIVATION_FLOATS */
    int pair_rows = w->input_perm != NULL || (kernels->pair_rows_min_tokens > 0 &&
                                              args->num_tokens >= kernels->pair_rows_min_tokens);
    size_t x_stride = row_stride(kernels, w->geo13.in_blocks);
    size_t a_floats_per_token =
        (size_t)topk * (row_stride(kernels, w->geo2.in_blocks) + (pair_rows ? x_stride : 0));
    int chunk =
        clamp_int((int)(MI4_CPU_ACTIVATION_FLOATS / a_floats_per_token), 16, MI4_CPU_TOKEN_CHUNK);
    if (args->num_tokens < chunk)
        chunk = (int)args->num_tokens;
    int max_pairs = chunk * topk;
    int tiles13 = w->geo13.tiles;
    /* About 32 phase-2 items per thread when few experts are hit (M = 1:
     * dynamic scheduling evens the cores out); whole experts when many are
     * hit, so an expert's input rows are read from memory once. */
    int hit_bound = w->num_local_experts < max_pairs ? w->num_local_experts : max_pairs;
    int item_tiles = clamp_int(tiles13 * hit_bound / (32 * threads), 1, tiles13);
    int items_per_expert = (tiles13 + item_tiles - 1) / item_tiles;
    int max_items = hit_bound * items_per_expert;
    /* Phase 3 items re-read every pair's activations: few wide items when
     * there are many pairs (the activations outgrow the caches), many narrow
     * ones for decode. */
    int many_pairs = max_pairs >= 4 * hit_bound;
    int out_tiles =
        clamp_int(w->geo2.tiles / ((many_pairs ? 4 : 8) * threads), 1, MI4_CPU_MAX_OUT_TILES);
    /* Decode: w2 by expert, items over the first half of its tiles (about
     * 32 per thread, as phase 2's) */
    int tiles2 = w->geo2.tiles, half2 = (w->geo2.tiles + 1) / 2;
    int w2_by_expert =
        (size_t)max_pairs * (size_t)tiles2 * MI4_CPU_TILE_ROWS <= MI4_CPU_W2_BY_EXPERT_FLOATS;
    int w2_item_tiles = clamp_int(half2 * hit_bound / (32 * threads), 1, half2);
    int max_w2_items = w2_by_expert ? hit_bound * ((half2 + w2_item_tiles - 1) / w2_item_tiles) : 0;

    forward_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.w = w;
    plan.kernels = kernels;
    plan.args = args;
    plan.threads = threads;
    plan.act.kind = args->activation;
    plan.act.limit = args->swiglu_limit;
    plan.act.alpha = args->swiglu_alpha;
    plan.act.beta = args->swiglu_beta;
    plan.x_stride = x_stride;
    plan.pair_rows = pair_rows;
    plan.a_stride = row_stride(kernels, w->geo2.in_blocks);
    plan.out_tiles_per_item = out_tiles;
    plan.w2_by_expert = w2_by_expert;
    plan.w2_half_tiles = half2;
    plan.pair_out_stride = round_up_floats((size_t)tiles2 * MI4_CPU_TILE_ROWS);
    plan.num_out_items = (w->geo2.tiles + out_tiles - 1) / out_tiles;
    /* y13 gate + up, or acc + y of two tiles in phase 3: sized for a whole chunk.
     * One expert's rows (y) number up to max_pairs, not chunk: a token may
     * list the same expert in several of its top-k slots. */
    size_t phase2_floats = 2 * (size_t)max_pairs * MI4_CPU_TILE_ROWS;
    size_t phase3_floats =
        (size_t)chunk * out_tiles * MI4_CPU_TILE_ROWS + 2 * (size_t)max_pairs * MI4_CPU_TILE_ROWS;
    plan.max_pairs = max_pairs;
    plan.thread_scratch_floats =
        round_up_floats(phase2_floats > phase3_floats ? phase2_floats : phase3_floats);

    int *counts, *active, *starts, *pair_token;
    float *in_factor, *out_factor;
    phase2_item *items, *w2_items;
    arena sizing = { NULL, 0 };
    plan_layout(&plan, &sizing, chunk, max_pairs, threads, &counts, &active, &starts, &pair_token,
                &in_factor, &out_factor, &items, max_items, &w2_items, max_w2_items);
    int kept;
    arena block = { scratch_take(ctx, sizing.used, &kept), 0 };
    if (!block.base)
        return mi4_fail_into(err, err_cap, MOEINT4_OUT_OF_MEMORY,
                             "cpu forward: cannot allocate %zu bytes of scratch", sizing.used);
    plan_layout(&plan, &block, chunk, max_pairs, threads, &counts, &active, &starts, &pair_token,
                &in_factor, &out_factor, &items, max_items, &w2_items, max_w2_items);

    int on_input = args->apply_router_weight_on_input;
    for (int64_t begin = 0; begin < args->num_tokens; begin += chunk) {
        int count = args->num_tokens - begin < chunk ? (int)(args->num_tokens - begin) : chunk;
        /* counting sort of the (token, slot) pairs by local expert, stable */
        memset(counts, 0, sizeof(int) * (size_t)(w->num_local_experts + 1));
        const int32_t *ids = args->topk_ids + (size_t)begin * topk;
        const float *weights = args->topk_weights + (size_t)begin * topk;
        for (int s = 0; s < count * topk; s++) {
            int local = w->expert_map[ids[s]];
            if (local >= 0)
                counts[local + 1]++;
        }
        int num_active = 0, max_tokens = 0;
        for (int e = 0; e < w->num_local_experts; e++) {
            if (counts[e + 1] > 0) {
                active[num_active] = e;
                starts[num_active] = counts[e];
                atomic_init(&plan.expert_items_left[num_active], items_per_expert);
                atomic_init(&plan.expert_ready[num_active], 0);
                num_active++;
                if (counts[e + 1] > max_tokens)
                    max_tokens = counts[e + 1];
            }
            counts[e + 1] += counts[e];
        }
        int num_pairs = counts[w->num_local_experts];
        starts[num_active] = num_pairs;
        for (int s = 0; s < count * topk; s++) {
            int local = w->expert_map[ids[s]];
            if (local < 0)
                continue;
            int p = counts[local]++;
            pair_token[p] = s / topk;
            int row = plan.pair_rows ? p : s / topk;
            plan.pair_x[p] = plan.x + (size_t)row * plan.x_stride;
            plan.pair_xsum[p] = plan.xsum + (size_t)row * w->geo13.num_groups;
            plan.pair_a[p] = plan.a + (size_t)p * plan.a_stride;
            plan.pair_a_sum[p] = plan.a_group_sum + (size_t)p * w->geo2.num_groups;
            in_factor[p] = on_input ? weights[s] : 1.0f;
            out_factor[p] = on_input ? 1.0f : weights[s];
        }
        int num_items = make_items(items, num_active, tiles13, item_tiles);
        plan.token_begin = begin;
        plan.token_count = count;
        plan.num_pairs = num_pairs;
        plan.num_active = num_active;
        plan.max_expert_tokens = max_tokens;
        plan.active_expert = active;
        plan.active_start = starts;
        plan.pair_token = pair_token;
        plan.pair_in_factor = in_factor;
        plan.pair_out_factor = out_factor;
        plan.items = items;
        plan.on_input = on_input;
        atomic_store(&plan.next_row, 0);
        atomic_store(&plan.rows_done, 0);
        mi4_cpu_work_split(plan.item_shares, threads, num_items);
        int num_w2_items =
            w2_by_expert ? make_items(w2_items, num_active, half2, w2_item_tiles) : 0;
        plan.w2_items = w2_items;
        mi4_cpu_work_split(plan.out_item_shares, threads,
                           w2_by_expert ? num_w2_items : plan.num_out_items);
        size_t elem = elem_bytes(args->dtype);
        plan.input_rows = (const char *)args->hidden_states + (size_t)begin * w->hidden_size * elem;
        plan.input_row_count = count;
        plan.row_token = NULL;
        if (w->input_perm) { /* act-order: by the caller, before the job */
            gather_act_order_rows(&plan, elem);
            plan.input_rows = plan.gathered;
            plan.input_row_count = num_pairs;
        } else if (plan.pair_rows) {
            plan.row_token = pair_token;
            plan.input_row_count = num_pairs;
        }
        if (threads <= 1 || mi4_cpu_pool_try_run(ctx->pool, forward_job, &plan) != 0)
            forward_job(&plan, 0, 1);
        if (w2_by_expert)
            combine_pairs(&plan, plan.out_row);
    }
    scratch_give_back(ctx, block.base, kept);
    return MOEINT4_SUCCESS;
}
