/* The CPU backend's table: always present, last in every priority list. */
#include "registry/builtin.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu_internal.h"
#include "base/alloc.h"
#include "moeint4_backend.h"
#include "base/error.h"
#include "layout/act_order.h"
#include "layout/layout.h"

static int cpu_probe(void *user_data, int device_index, char *reason, size_t reason_cap)
{
    (void)user_data;
    (void)device_index;
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    return 1;
}

static int cpu_supports(void *user_data, const moeint4_problem *problem, char *reason,
                        size_t reason_cap)
{
    (void)user_data;
    if (!mi4_layout_is_format(problem->format)) {
        mi4_fail_into(reason, reason_cap, MOEINT4_UNSUPPORTED, "cpu: unknown format %d",
                      (int)problem->format);
        return 0;
    }
    if (!mi4_layout_is_group_size(problem->group_size)) {
        mi4_fail_into(reason, reason_cap, MOEINT4_UNSUPPORTED,
                      "cpu: group size %d is not " MI4_LAYOUT_GROUP_SIZES_TEXT,
                      problem->group_size);
        return 0;
    }
    if (reason && reason_cap > 0)
        reason[0] = '\0';
    return 1;
}

moeint4_status mi4_cpu_context_create_with(int num_threads, const mi4_cpu_kernels *kernels,
                                           mi4_cpu_context **out)
{
    if (num_threads <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        num_threads = online > 0 ? (int)online : 1;
    }
    mi4_cpu_context *ctx = mi4_calloc(1, sizeof *ctx);
    if (!ctx)
        return MOEINT4_OUT_OF_MEMORY;
    ctx->kernels = kernels ? kernels : mi4_cpu_kernels_select();
    ctx->num_threads = num_threads;
    ctx->pool = mi4_cpu_pool_create(num_threads);
    if (!ctx->pool) {
        mi4_free(ctx);
        return MOEINT4_OUT_OF_MEMORY;
    }
    *out = ctx;
    return MOEINT4_SUCCESS;
}

void mi4_cpu_context_destroy(mi4_cpu_context *ctx)
{
    if (!ctx)
        return;
    mi4_cpu_pool_destroy(ctx->pool);
    mi4_free(ctx->scratch);
    mi4_free(ctx);
}

static moeint4_status cpu_context_create(void *user_data, const moeint4_context_options *options,
                                         void **backend_context, char *err, size_t err_cap)
{
    (void)user_data;
    mi4_cpu_context *ctx = NULL;
    int threads = options ? options->num_threads : 0;
    moeint4_status status = mi4_cpu_context_create_with(threads, NULL, &ctx);
    if (status != MOEINT4_SUCCESS)
        return mi4_fail_into(err, err_cap, status, "cpu: cannot start a pool of %d threads",
                             threads);
    *backend_context = ctx;
    return MOEINT4_SUCCESS;
}

static void cpu_context_destroy(void *user_data, void *backend_context)
{
    (void)user_data;
    mi4_cpu_context_destroy(backend_context);
}

/* ---- prepare: unpack each expert (layout module) and repack it ---- */

typedef struct prepare_job {
    const moeint4_weights_desc *desc;
    mi4_cpu_weights *w;
    atomic_int next_expert;
    atomic_int failed;
} prepare_job;

static void repack_expert(const moeint4_weights_desc *desc, mi4_cpu_weights *w, int e,
                          uint8_t *codes, uint8_t *zeros, float *scales)
{
    moeint4_dtype dtype = w->scales_bf16 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16;
    int k = w->hidden_size, n = w->intermediate_size;
    moeint4_quant_matrix w13 = moeint4_desc_w13(desc);
    mi4_layout_unpack_expert(&w13, e, codes, zeros, scales);
    uint8_t *dst13 = w->w13 + (size_t)e * w->w13_expert_bytes;
    size_t half = mi4_cpu_pack_bytes(&w->geo13);
    mi4_cpu_repack(&w->geo13, codes, (size_t)k, zeros, scales, (size_t)2 * n, dtype, dst13);
    mi4_cpu_repack(&w->geo13, codes + (size_t)n * k, (size_t)k, zeros + n, scales + n,
                   (size_t)2 * n, dtype, dst13 + half);
    moeint4_quant_matrix w2 = moeint4_desc_w2(desc);
    mi4_layout_unpack_expert(&w2, e, codes, zeros, scales);
    mi4_cpu_repack(&w->geo2, codes, (size_t)n, zeros, scales, (size_t)k, dtype,
                   w->w2 + (size_t)e * w->w2_expert_bytes);
}

static void prepare_worker(void *arg, int thread, int threads)
{
    (void)thread;
    (void)threads;
    prepare_job *job = arg;
    const mi4_cpu_weights *w = job->w;
    size_t k = (size_t)w->hidden_size, n = (size_t)w->intermediate_size;
    size_t groups = (size_t)(w->geo13.num_groups > w->geo2.num_groups ? w->geo13.num_groups
                                                                      : w->geo2.num_groups);
    size_t cols = 2 * n > k ? 2 * n : k;
    uint8_t *codes = mi4_malloc(2 * n * k);
    uint8_t *zeros = mi4_malloc(groups * cols);
    float *scales = mi4_malloc(sizeof(float) * groups * cols);
    if (!codes || !zeros || !scales) {
        atomic_store(&job->failed, 1);
    } else {
        for (;;) {
            int e = atomic_fetch_add(&job->next_expert, 1);
            if (e >= w->num_local_experts || atomic_load(&job->failed))
                break;
            repack_expert(job->desc, job->w, e, codes, zeros, scales);
        }
    }
    mi4_free(codes);
    mi4_free(zeros);
    mi4_free(scales);
}

void mi4_cpu_weights_release(mi4_cpu_weights *w)
{
    if (!w)
        return;
    mi4_free(w->expert_map);
    mi4_free(w->input_perm);
    mi4_free(w->w13);
    mi4_free(w->w2);
    mi4_free(w);
}

static void *aligned_bytes(size_t bytes)
{
    return mi4_large_alloc(bytes > 0 ? bytes : MI4_CPU_TILE_ALIGN);
}

moeint4_status mi4_cpu_weights_prepare(mi4_cpu_context *ctx, const moeint4_weights_desc *desc,
                                       mi4_cpu_weights **out, char *err, size_t err_cap)
{
    mi4_cpu_weights *w = mi4_calloc(1, sizeof *w);
    if (!w)
        return mi4_fail_into(err, err_cap, MOEINT4_OUT_OF_MEMORY, "cpu: out of memory");
    w->num_experts = desc->num_experts;
    w->num_local_experts = desc->num_local_experts;
    w->hidden_size = desc->hidden_size;
    w->intermediate_size = desc->intermediate_size;
    w->scales_bf16 = moeint4_desc_scales_dtype(desc) == MOEINT4_DTYPE_BF16;
    w->geo13 =
        mi4_cpu_pack_geometry_make(desc->hidden_size, desc->intermediate_size, desc->group_size);
    w->geo2 =
        mi4_cpu_pack_geometry_make(desc->intermediate_size, desc->hidden_size, desc->group_size);
    w->w13_expert_bytes = 2 * mi4_cpu_pack_bytes(&w->geo13);
    w->w2_expert_bytes = mi4_cpu_pack_bytes(&w->geo2);
    w->expert_map = mi4_malloc(sizeof(int32_t) * (size_t)desc->num_experts);
    w->w13 = aligned_bytes(w->w13_expert_bytes * (size_t)desc->num_local_experts);
    w->w2 = aligned_bytes(w->w2_expert_bytes * (size_t)desc->num_local_experts);
    if (!w->expert_map || !w->w13 || !w->w2) {
        size_t total = (w->w13_expert_bytes + w->w2_expert_bytes) * (size_t)desc->num_local_experts;
        mi4_cpu_weights_release(w);
        return mi4_fail_into(err, err_cap, MOEINT4_OUT_OF_MEMORY,
                             "cpu: cannot allocate %zu bytes for the repacked weights", total);
    }
    for (int e = 0; e < desc->num_experts; e++)
        w->expert_map[e] = desc->expert_map ? desc->expert_map[e] : e;

    prepare_job job = { .desc = desc, .w = w };
    atomic_init(&job.next_expert, 0);
    atomic_init(&job.failed, 0);
    if (mi4_cpu_pool_try_run(ctx->pool, prepare_worker, &job) != 0)
        prepare_worker(&job, 0, 1);
    if (atomic_load(&job.failed)) {
        mi4_cpu_weights_release(w);
        return mi4_fail_into(err, err_cap, MOEINT4_OUT_OF_MEMORY,
                             "cpu: cannot allocate the unpacking scratch");
    }
    *out = w;
    return MOEINT4_SUCCESS;
}

/* Act-order weights are sorted into contiguous groups first; the forward
 * gathers x by the sort order (layout/act_order.h). */
static moeint4_status cpu_prepare(void *backend_context, const moeint4_weights_desc *desc,
                                  void **backend_weights, char *err, size_t err_cap)
{
    mi4_cpu_weights *w = NULL;
    mi4_layout_sorted sorted;
    int act_order = mi4_layout_desc_has_act_order(desc);
    if (act_order) {
        moeint4_status status = mi4_layout_sort_act_order(desc, &sorted, err, err_cap);
        if (status != MOEINT4_SUCCESS)
            return status;
        desc = &sorted.desc;
    }
    moeint4_status status = mi4_cpu_weights_prepare(backend_context, desc, &w, err, err_cap);
    if (act_order) {
        if (status == MOEINT4_SUCCESS) {
            w->input_perm = sorted.input_perm;
            sorted.input_perm = NULL;
        }
        mi4_layout_sorted_free(&sorted);
    }
    if (status == MOEINT4_SUCCESS)
        *backend_weights = w;
    return status;
}

static void cpu_release(void *backend_context, void *backend_weights)
{
    (void)backend_context;
    mi4_cpu_weights_release(backend_weights);
}

static moeint4_status cpu_forward(void *backend_context, const void *backend_weights,
                                  const moeint4_forward_args *args, char *err, size_t err_cap)
{
    mi4_cpu_context *ctx = backend_context;
    return mi4_cpu_forward_with(ctx, ctx->kernels, backend_weights, args, err, err_cap);
}

static void cpu_memory_usage(void *backend_context, const void *backend_weights, size_t *host_bytes,
                             size_t *device_bytes)
{
    (void)backend_context;
    const mi4_cpu_weights *w = backend_weights;
    if (host_bytes)
        *host_bytes =
            sizeof *w + sizeof(int32_t) * (size_t)w->num_experts +
            (w->input_perm ? sizeof(int32_t) * (size_t)w->num_local_experts * (size_t)w->hidden_size
                           : 0) +
            (w->w13_expert_bytes + w->w2_expert_bytes) * (size_t)w->num_local_experts;
    if (device_bytes)
        *device_bytes = 0;
}

static const moeint4_backend_iface cpu_iface = {
    .struct_size = sizeof(moeint4_backend_iface),
    .api_version = MOEINT4_BACKEND_API_VERSION,
    .id = MOEINT4_BACKEND_CPU,
    .name = "cpu",
    .device_pointers = 0,
    .platform_priority = MOEINT4_PRIORITY_CPU,
    .user_data = NULL,
    .probe = cpu_probe,
    .supports = cpu_supports,
    .context_create = cpu_context_create,
    .context_destroy = cpu_context_destroy,
    .prepare = cpu_prepare,
    .release = cpu_release,
    .forward = cpu_forward,
    .memory_usage = cpu_memory_usage,
};

const moeint4_backend_iface *mi4_cpu_backend_iface(void) { return &cpu_iface; }
