/* The Intel XPU backend plugin (libmoeint4-xpu.so): int4 MoE (GPTQ symmetric
 * as vLLM's XPU W4A16 path, and GPTQ asymmetric and AWQ through zero points)
 * on Intel GPUs through Level Zero or OpenCL.
 *
 * Decisions (see also README.md next to this file):
 *  - Runtime choice. Without native handles: OpenCL first while oneDNN is
 *    wanted (MOEINT4_XPU_ONEDNN_MIN_TOKENS > 0, the default), because
 *    oneDNN's GPU engine (Debian's 2.6) runs on OpenCL only; Level Zero
 *    first otherwise. MOEINT4_XPU_RUNTIME=level_zero|opencl forces one. Caller-provided
 *    native_context/native_device/native_queue are Level Zero handles
 *    (ze_context_handle_t, ze_device_handle_t, ze_command_list_handle_t)
 *    and imply the Level Zero runtime, as the header documents; with
 *    MOEINT4_XPU_RUNTIME=opencl they are OpenCL handles instead (cl_context,
 *    cl_device_id, cl_command_queue), so an OpenCL framework's SVM memory
 *    and queues are used in place.
 *  - What a device pointer is in forward() and the memory helpers:
 *      Level Zero: a USM device pointer (zeMemAllocDevice, or a framework's
 *      tensor on the same context).
 *      OpenCL: a coarse-grained SVM pointer (clSVMAlloc, from
 *      moeint4_memory_alloc). Chosen over cl_mem handles because SVM is the
 *      one kind of OpenCL memory that is an address on both PoCL (SVM
 *      capabilities coarse|fine|atomics) and Intel's driver (coarse and fine
 *      grain on every Gen9+ GPU): the core's pointer checks (NULL, overlap of
 *      output and inputs) mean something, callers may pass pointers into the
 *      middle of an allocation (sub-tensors), and the backend's own code
 *      treats both runtimes alike. cl_mem handles are opaque (no offsets, no
 *      overlap test); Intel's USM extension is absent from PoCL 3.1.
 *  - The caller's stream: Level Zero: a ze_command_list_handle_t that must
 *    be an immediate command list (we append launches and barriers, then a
 *    signalled barrier we wait on); OpenCL: a cl_command_queue created on the
 *    backend's cl_context, i.e. the caller's native_context when it handed
 *    one in, and in-order (both checked: the launches rely on the queue's
 *    order). NULL: the runtime's own in-order queue / immediate list.
 *    forward() returns when the work is complete, as the ABI promises.
 *  - Intermediates: the activation between w13 and w2 and each slot's w2
 *    output stay f32 (more accurate than vLLM's 16-bit intermediates; the
 *    output is rounded once). Scratch is sized per chunk of tokens
 *    (MOEINT4_XPU_CHUNK_TOKENS, default from a 256 MiB budget).
 *  - Test mode: MOEINT4_XPU_TEST_CPU_DEVICE=1 lets the OpenCL runtime take
 *    PoCL's CPU device; probe() then succeeds and the whole backend runs
 *    through the ordinary ABI (oneDNN then uses its CPU engine with f32).
 *    Without it only GPUs of vendor 0x8086 are accepted (PoCL reports the
 *    CPU's vendor id 0x8086 too, so the device type is checked as well).
 *  - Topk ids live in device memory, so the core cannot check them: the
 *    routing kernel flags the first out-of-range slot and forward() fails
 *    with INVALID_ARGUMENT naming it, before the output is written. Router
 *    weights are not checked for finiteness on the device.
 *  - oneDNN (OpenCL runtime only) serves experts with at least
 *    MOEINT4_XPU_ONEDNN_MIN_TOKENS slots (default 64, 0 = never): their
 *    weights are dequantized into one expert's scratch just in time (never
 *    the whole model) in the activations' dtype (bf16 stays bf16: f16's
 *    range is too small for some bf16 models); with oneDNN >= 3.5 int4
 *    weights are used directly (f16/bf16 activations, f16 scales).
 *  - Concurrency: kernel objects hold their arguments, so forward() calls on
 *    one context are serialised by the context's mutex.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moeint4_backend.h"
#include "xpu_backend.h"

/* ---- runtime choice ---- */

typedef enum runtime_choice { CHOOSE_AUTO, CHOOSE_LEVEL_ZERO, CHOOSE_OPENCL } runtime_choice;

static runtime_choice requested_runtime(void)
{
    const char *value = getenv("MOEINT4_XPU_RUNTIME");
    if (value && strcmp(value, "level_zero") == 0)
        return CHOOSE_LEVEL_ZERO;
    if (value && strcmp(value, "opencl") == 0)
        return CHOOSE_OPENCL;
    return CHOOSE_AUTO;
}

static int xpu_probe(void *user_data, int device_index, char *reason, size_t cap)
{
    (void)user_data;
    char ze_reason[400] = "", ocl_reason[200] = "";
    runtime_choice choice = requested_runtime();
    if (choice != CHOOSE_OPENCL && mi4_xpu_ze_probe(device_index, ze_reason, sizeof ze_reason))
        return 1;
    if (choice != CHOOSE_LEVEL_ZERO &&
        mi4_xpu_ocl_probe(device_index, ocl_reason, sizeof ocl_reason))
        return 1;
    if (choice == CHOOSE_AUTO)
        snprintf(reason, cap, "%s; %s", ze_reason, ocl_reason);
    else
        snprintf(reason, cap, "%s (MOEINT4_XPU_RUNTIME forces it)",
                 choice == CHOOSE_LEVEL_ZERO ? ze_reason : ocl_reason);
    return 0;
}

static int xpu_supports(void *user_data, const moeint4_problem *p, char *reason, size_t cap)
{
    (void)user_data;
    if (p->hidden_size % 8 != 0 || p->intermediate_size % 8 != 0) {
        snprintf(reason, cap, "xpu needs hidden_size and intermediate_size multiples of 8");
        return 0;
    }
    return 1;
}

/* ---- context ---- */

static int env_int(const char *name, int fallback)
{
    const char *value = getenv(name);
    char *end;
    if (!value || !*value)
        return fallback;
    long parsed = strtol(value, &end, 10);
    return (*end == '\0' && parsed >= 0 && parsed <= (1L << 30)) ? (int)parsed : fallback;
}

/* native_* handles are Level Zero handles unless MOEINT4_XPU_RUNTIME=opencl
 * makes them OpenCL ones (cl_context, cl_device_id, cl_command_queue). */
static moeint4_status create_runtime(const moeint4_context_options *o, int want_onednn,
                                     mi4_xpu_runtime **rt, char *err, size_t cap)
{
    int native = o->native_context || o->native_device || o->native_queue;
    runtime_choice choice = requested_runtime();
    /* oneDNN's GPU engine (Debian's 2.6) runs on OpenCL only: when it is
     * wanted and no Level Zero handles were handed in, OpenCL goes first, so
     * that large M reaches oneDNN on a real Intel system (the same driver
     * package provides both runtimes). */
    if (choice == CHOOSE_AUTO && !native && want_onednn) {
        char ocl_err[200] = "";
        moeint4_status st = mi4_xpu_ocl_create(o, rt, ocl_err, sizeof ocl_err);
        if (st != MOEINT4_BACKEND_UNAVAILABLE)
            return st == MOEINT4_SUCCESS ? st : mi4_xpu_fail(err, cap, st, "%s", ocl_err);
    }
    if (native && !o->native_device)
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "native_context/native_queue need native_device");
    if (native && choice == CHOOSE_OPENCL && !o->native_context)
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "native_device needs native_context (OpenCL handles)");
    char ze_err[400] = "";
    moeint4_status st = MOEINT4_BACKEND_UNAVAILABLE;
    if (choice != CHOOSE_OPENCL) {
        st = mi4_xpu_ze_create(o, rt, ze_err, sizeof ze_err);
        if (st == MOEINT4_SUCCESS || native || choice == CHOOSE_LEVEL_ZERO)
            return st == MOEINT4_SUCCESS ? st : mi4_xpu_fail(err, cap, st, "%s", ze_err);
    }
    st = mi4_xpu_ocl_create(o, rt, err, cap);
    if (st != MOEINT4_SUCCESS && ze_err[0] && st == MOEINT4_BACKEND_UNAVAILABLE) {
        char ocl_err[200];
        snprintf(ocl_err, sizeof ocl_err, "%s", err);
        mi4_xpu_fail(err, cap, st, "%s; %s", ze_err, ocl_err);
    }
    return st;
}

/* oneDNN is optional: when it cannot start, the int4 kernels serve every
 * expert and forward() stays correct. */
static void create_dnnl(mi4_xpu_context *ctx)
{
    void *device, *context, *queue;
    char ignored[128];
    if (ctx->rt->kind != MI4_XPU_OPENCL || ctx->onednn_min_tokens <= 0)
        return;
    if (ctx->rt->is_test_cpu_device) {
        mi4_xpu_dnnl_create_cpu(&ctx->dnnl, ignored, sizeof ignored);
        return;
    }
    mi4_xpu_ocl_handles(ctx->rt, &device, &context, &queue);
    mi4_xpu_dnnl_create_ocl(device, context, queue, &ctx->dnnl, ignored, sizeof ignored);
}

static moeint4_status xpu_context_create(void *user_data, const moeint4_context_options *options,
                                         void **backend_context, char *err, size_t cap)
{
    (void)user_data;
    moeint4_context_options defaults = { 0 };
    defaults.struct_size = sizeof defaults;
    const moeint4_context_options *o = options ? options : &defaults;
    mi4_xpu_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY, "xpu: out of host memory");
    ctx->onednn_min_tokens =
        env_int("MOEINT4_XPU_ONEDNN_MIN_TOKENS", MI4_XPU_DEFAULT_ONEDNN_MIN_TOKENS);
    moeint4_status st = create_runtime(o, ctx->onednn_min_tokens > 0, &ctx->rt, err, cap);
    if (st != MOEINT4_SUCCESS) {
        free(ctx);
        return st;
    }
    pthread_mutex_init(&ctx->lock, NULL);
    ctx->chunk_tokens = env_int("MOEINT4_XPU_CHUNK_TOKENS", 0);
    ctx->reserve_tokens = env_int("MOEINT4_XPU_RESERVE_TOKENS", MI4_XPU_DEFAULT_RESERVE_TOKENS);
    ctx->gemm_team = env_int("MOEINT4_XPU_GEMM_TEAM", 0);
    ctx->gemv = env_int("MOEINT4_XPU_GEMV", 1) != 0;
    ctx->gemv_walk = env_int("MOEINT4_XPU_GEMV_WALK", 0);
    ctx->gemv_lanes = env_int("MOEINT4_XPU_GEMV_LANES", 0);
    ctx->gemv_rows = env_int("MOEINT4_XPU_GEMV_ROWS", MI4_XPU_DEFAULT_GEMV_ROWS);
    create_dnnl(ctx);
    *backend_context = ctx;
    return MOEINT4_SUCCESS;
}

static void xpu_context_destroy(void *user_data, void *backend_context)
{
    (void)user_data;
    mi4_xpu_context *ctx = backend_context;
    if (!ctx)
        return;
    mi4_xpu_dnnl_destroy(ctx->dnnl);
    mi4_xpu_scratch_free(ctx);
    ctx->rt->ops->destroy(ctx->rt);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---- weights ---- */

static void xpu_release(void *backend_context, void *backend_weights)
{
    mi4_xpu_context *ctx = backend_context;
    mi4_xpu_weights *w = backend_weights;
    if (!w)
        return;
    void *buffers[] = { w->expert_map, w->w13_packed, w->w13_scales, w->w13_zeros, w->w2_packed,
                        w->w2_scales,  w->w2_zeros,   w->input_perm, w->errors };
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; ++i)
        ctx->rt->ops->free(ctx->rt, buffers[i]);
    free(w);
}

static moeint4_status upload(mi4_xpu_context *ctx, mi4_xpu_weights *w, const void *host,
                             size_t bytes, void **device, char *err, size_t cap)
{
    moeint4_status st = ctx->rt->ops->alloc(ctx->rt, bytes, device, err, cap);
    if (st == MOEINT4_SUCCESS)
        st = ctx->rt->ops->copy(ctx->rt, NULL, *device, host, bytes, err, cap);
    w->device_bytes += bytes;
    return st;
}

/* One projection: the layout module's XPU conversion on the host (the
 * backend entry that skips the checks prepare has already made), then up.
 * Zero points (a byte per scale) only for formats that have them. */
static moeint4_status upload_projection(mi4_xpu_context *ctx, mi4_xpu_weights *w,
                                        const moeint4_quant_matrix *m, const char *name,
                                        uint8_t **packed, uint16_t **scales, uint8_t **zeros,
                                        char *err, size_t cap)
{
    size_t rows = (size_t)m->num_experts * (size_t)m->out_features;
    size_t packed_bytes = rows * (size_t)(m->in_features / 2);
    size_t zero_bytes = rows * (size_t)moeint4_num_groups(m->in_features, m->group_size);
    size_t scale_bytes = zero_bytes * 2;
    int has_zeros = m->format != MOEINT4_FORMAT_GPTQ_SYM;
    uint8_t *host_packed = malloc(packed_bytes ? packed_bytes : 1);
    uint16_t *host_scales = malloc(scale_bytes ? scale_bytes : 1);
    uint8_t *host_zeros = has_zeros ? malloc(zero_bytes ? zero_bytes : 1) : NULL;
    moeint4_status st = MOEINT4_OUT_OF_MEMORY;
    if (!host_packed || !host_scales || (has_zeros && !host_zeros)) {
        mi4_xpu_fail(err, cap, st, "xpu: no host memory to convert %s", name);
    } else {
        moeint4_backend_layout_to_xpu(m, host_packed, host_scales, host_zeros);
        st = upload(ctx, w, host_packed, packed_bytes, (void **)packed, err, cap);
        if (st == MOEINT4_SUCCESS)
            st = upload(ctx, w, host_scales, scale_bytes, (void **)scales, err, cap);
        if (st == MOEINT4_SUCCESS && has_zeros)
            st = upload(ctx, w, host_zeros, zero_bytes, (void **)zeros, err, cap);
    }
    free(host_packed);
    free(host_scales);
    free(host_zeros);
    return st;
}

static moeint4_status xpu_prepare(void *backend_context, const moeint4_weights_desc *desc,
                                  void **backend_weights, char *err, size_t cap)
{
    mi4_xpu_context *ctx = backend_context;
    mi4_xpu_weights *w = calloc(1, sizeof *w);
    int32_t *map = malloc((size_t)desc->num_experts * sizeof(int32_t));
    if (!w || !map) {
        free(w);
        free(map);
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY, "xpu: out of host memory");
    }
    w->num_experts = desc->num_experts;
    w->num_local = desc->num_local_experts;
    w->hidden = desc->hidden_size;
    w->intermediate = desc->intermediate_size;
    w->group13 = moeint4_effective_group_size(desc->hidden_size, desc->group_size);
    w->group2 = moeint4_effective_group_size(desc->intermediate_size, desc->group_size);
    w->scales_bf16 = moeint4_desc_scales_dtype(desc) == MOEINT4_DTYPE_BF16;
    for (int e = 0; e < desc->num_experts; ++e)
        map[e] = desc->expert_map ? desc->expert_map[e] : e;
    /* act-order: the layout module's sorted copy, and its input permutation
     * for the forward's gather (mi4_gather_input); else desc as it is */
    moeint4_backend_sorted *sorted = NULL;
    const moeint4_weights_desc *held = NULL;
    const int32_t *input_perm = NULL;
    moeint4_status sort_st =
        moeint4_backend_sort_act_order(desc, &sorted, &held, &input_perm, err, cap);
    if (sort_st != MOEINT4_SUCCESS) {
        free(w);
        free(map);
        return sort_st;
    }
    moeint4_quant_matrix w13 = moeint4_desc_w13(held), w2 = moeint4_desc_w2(held);
    /* copies share the queue (and Level Zero's completion event) with forward() */
    pthread_mutex_lock(&ctx->lock);
    moeint4_status st = upload(ctx, w, map, (size_t)desc->num_experts * sizeof(int32_t),
                               (void **)&w->expert_map, err, cap);
    if (st == MOEINT4_SUCCESS)
        st = upload_projection(ctx, w, &w13, "w13", &w->w13_packed, &w->w13_scales, &w->w13_zeros,
                               err, cap);
    if (st == MOEINT4_SUCCESS)
        st = upload_projection(ctx, w, &w2, "w2", &w->w2_packed, &w->w2_scales, &w->w2_zeros, err,
                               cap);
    if (st == MOEINT4_SUCCESS && input_perm)
        st = upload(ctx, w, input_perm,
                    (size_t)desc->num_local_experts * (size_t)desc->hidden_size * sizeof(int32_t),
                    (void **)&w->input_perm, err, cap);
    /* error records: the synchronous one clear, the sticky one empty */
    const int32_t records[6] = { INT32_MAX, INT32_MAX, 0, 0, 0, 0 };
    if (st == MOEINT4_SUCCESS)
        st = upload(ctx, w, records, sizeof records, (void **)&w->errors, err, cap);
    /* forwards of up to reserve_tokens tokens (top-8) allocate nothing */
    if (st == MOEINT4_SUCCESS)
        st = mi4_xpu_reserve(ctx, &ctx->scratch.chunk, &ctx->scratch.chunk_bytes,
                             mi4_xpu_chunk_scratch(w, ctx->reserve_tokens, 8, NULL, NULL), NULL,
                             err, cap);
    pthread_mutex_unlock(&ctx->lock);
    moeint4_backend_sorted_free(sorted);
    free(map);
    if (st != MOEINT4_SUCCESS) {
        xpu_release(ctx, w);
        return st;
    }
    *backend_weights = w;
    return MOEINT4_SUCCESS;
}

static void xpu_memory_usage(void *backend_context, const void *backend_weights, size_t *host_bytes,
                             size_t *device_bytes)
{
    (void)backend_context;
    const mi4_xpu_weights *w = backend_weights;
    if (host_bytes)
        *host_bytes = sizeof *w;
    if (device_bytes)
        *device_bytes = w->device_bytes;
}

static moeint4_status xpu_workspace_size(void *backend_context, const void *backend_weights,
                                         int64_t max_tokens, int topk, moeint4_dtype dtype,
                                         size_t *bytes, char *err, size_t cap)
{
    (void)err, (void)cap;
    *bytes = mi4_xpu_workspace_bytes(backend_context, backend_weights, max_tokens, topk, dtype);
    return MOEINT4_SUCCESS;
}

/* ---- memory helpers ---- */

static moeint4_status xpu_memory_alloc(void *backend_context, size_t bytes, void **ptr, char *err,
                                       size_t cap)
{
    mi4_xpu_context *ctx = backend_context;
    return ctx->rt->ops->alloc(ctx->rt, bytes, ptr, err, cap);
}

static void xpu_memory_free(void *backend_context, void *ptr)
{
    mi4_xpu_context *ctx = backend_context;
    ctx->rt->ops->free(ctx->rt, ptr);
}

static moeint4_status xpu_memory_copy(void *backend_context, void *dst, const void *src,
                                      size_t bytes, moeint4_copy_kind kind, char *err, size_t cap)
{
    mi4_xpu_context *ctx = backend_context;
    (void)kind; /* USM and SVM copies take any direction */
    pthread_mutex_lock(&ctx->lock);
    moeint4_status st = ctx->rt->ops->copy(ctx->rt, NULL, dst, src, bytes, err, cap);
    pthread_mutex_unlock(&ctx->lock);
    return st;
}

/* ---- the table ---- */

static const moeint4_backend_iface xpu_iface = {
    .struct_size = sizeof(moeint4_backend_iface),
    .api_version = MOEINT4_BACKEND_API_VERSION,
    .id = MOEINT4_BACKEND_XPU,
    .name = "xpu",
    .device_pointers = 1,
    .platform_priority = MOEINT4_PRIORITY_XPU,
    .user_data = NULL,
    .probe = xpu_probe,
    .supports = xpu_supports,
    .context_create = xpu_context_create,
    .context_destroy = xpu_context_destroy,
    .prepare = xpu_prepare,
    .release = xpu_release,
    .forward = mi4_xpu_forward,
    .memory_usage = xpu_memory_usage,
    .memory_alloc = xpu_memory_alloc,
    .memory_free = xpu_memory_free,
    .memory_copy = xpu_memory_copy,
    .get_proc_address = NULL,
    .forward_workspace_size = xpu_workspace_size,
    .forward_check = mi4_xpu_forward_check,
};

__attribute__((visibility("default"))) const moeint4_backend_iface *
moeint4_plugin_backend(uint32_t core_api_version)
{
    return core_api_version == MOEINT4_BACKEND_API_VERSION ? &xpu_iface : NULL;
}
