/* The HIP backend's plugin table: probe, contexts, prepare (upload +
 * dequantize to bf16, hip_dequant.hip, or repack as int4,
 * hip_int4_weights.hip: gpu_weights), the memory helpers, and the entry
 * points of the forward (hip_forward.hip) and its workspace query
 * (hip_workspace.hip). libmoeint4-hip.so exports only
 * moeint4_plugin_backend(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/hip/hip_internal.h"
#include "moeint4_backend.h"

moeint4_status mi4_hip_device_alloc(void **ptr, size_t bytes, const char *what, char *err,
                                    size_t cap)
{
    hipError_t e = hipMalloc(ptr, bytes);
    if (e == hipSuccess)
        return MOEINT4_SUCCESS;
    /* The runtime's last error is left alone: launches check their own
     * result (mi4_launch), never the last error. */
    *ptr = nullptr;
    snprintf(err, cap, "hip: cannot allocate %zu device bytes for %s: %s", bytes, what,
             hipGetErrorString(e));
    return e == hipErrorMemoryAllocation ? MOEINT4_OUT_OF_MEMORY : MOEINT4_DEVICE_ERROR;
}

moeint4_status mi4_hip_failure(char *err, size_t cap, const char *what, hipError_t e)
{
    snprintf(err, cap, "hip: %s failed: %s", what, hipGetErrorString(e));
    return e == hipErrorMemoryAllocation ? MOEINT4_OUT_OF_MEMORY : MOEINT4_DEVICE_ERROR;
}

moeint4_status mi4_hip_upload(void **dst, const void *src, size_t bytes, const char *what,
                              char *err, size_t cap)
{
    moeint4_status st = mi4_hip_device_alloc(dst, bytes, what, err, cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    hipError_t e = hipMemcpy(*dst, src, bytes, hipMemcpyHostToDevice);
    return e == hipSuccess ? MOEINT4_SUCCESS : mi4_hip_failure(err, cap, what, e);
}

namespace {

typedef mi4_hip_device_scope device_scope;

int hip_probe(void *user_data, int device_index, char *reason, size_t reason_cap)
{
    (void)user_data;
    int count = 0;
    hipError_t e = hipGetDeviceCount(&count);
    if (e != hipSuccess || count == 0) {
        snprintf(reason, reason_cap, "no HIP/CUDA device: %s",
                 e != hipSuccess ? hipGetErrorString(e) : "device count is 0");
        return 0;
    }
    if (device_index < 0 || device_index >= count) {
        snprintf(reason, reason_cap, "device %d does not exist (%d device(s))", device_index,
                 count);
        return 0;
    }
    device_scope scope(device_index);
    if (scope.status() != hipSuccess) {
        snprintf(reason, reason_cap, "cannot select device %d: %s", device_index,
                 hipGetErrorString(scope.status()));
        return 0;
    }
    e = mi4_hip_check_kernel_image();
    if (e != hipSuccess) {
        snprintf(reason, reason_cap, "libmoeint4-hip.so has no code for device %d: %s",
                 device_index, hipGetErrorString(e));
        return 0;
    }
    return 1;
}

int hip_supports(void *user_data, const moeint4_problem *p, char *reason, size_t reason_cap)
{
    (void)user_data;
    if (p->hidden_size % 8 != 0 || p->intermediate_size % 8 != 0) {
        snprintf(reason, reason_cap,
                 "hip needs hidden_size and intermediate_size multiples of 8 (got %d, %d)",
                 p->hidden_size, p->intermediate_size);
        return 0;
    }
    if (p->num_local_experts > 4096) {
        snprintf(reason, reason_cap, "hip routes at most 4096 local experts (got %d)",
                 p->num_local_experts);
        return 0;
    }
    return 1;
}

/* MOEINT4_HIP_GEMM=fma|mma (default mma): which GEMM inner step to use. */
moeint4_status read_gemm_variant(int *use_mma, char *err, size_t cap)
{
    const char *v = getenv("MOEINT4_HIP_GEMM");
    *use_mma = 1;
    if (v == nullptr || *v == '\0' || strcasecmp(v, "mma") == 0)
        return MOEINT4_SUCCESS;
    if (strcasecmp(v, "fma") == 0) {
        *use_mma = 0;
        return MOEINT4_SUCCESS;
    }
    snprintf(err, cap, "MOEINT4_HIP_GEMM = \"%s\" is not one of fma, mma", v);
    return MOEINT4_INVALID_ARGUMENT;
}

/* MOEINT4_HIP_MULTIPROCESSORS=N (a bench knob, default: all of them):
 * size the persistent grids as if the device had N SMs. The hardware still
 * spreads the blocks over every SM (an H100 put a grid of 66 x 2 blocks
 * one an SM on all 132, bench/hip/sm_placement.cu), so below the SM count
 * it lowers the blocks an SM holds, not the SMs in use. */
moeint4_status read_multiprocessor_cap(int *multiprocessors, char *err, size_t cap)
{
    const char *v = getenv("MOEINT4_HIP_MULTIPROCESSORS");
    if (v == nullptr || *v == '\0')
        return MOEINT4_SUCCESS;
    char *end = nullptr;
    const long n = strtol(v, &end, 10);
    if (*end != '\0' || n < 1 || n > *multiprocessors) {
        snprintf(err, cap, "MOEINT4_HIP_MULTIPROCESSORS = \"%s\" is not a count from 1 to %d", v,
                 *multiprocessors);
        return MOEINT4_INVALID_ARGUMENT;
    }
    *multiprocessors = (int)n;
    return MOEINT4_SUCCESS;
}

moeint4_status hip_context_create(void *user_data, const moeint4_context_options *options,
                                  void **backend_context, char *err, size_t err_cap)
{
    (void)user_data;
    int device = options ? options->device_index : 0;
    int use_mma = 1;
    moeint4_status st = read_gemm_variant(&use_mma, err, err_cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    int gpu_weights = MOEINT4_GPU_WEIGHTS_INT4;
    st = mi4_hip_resolve_gpu_weights(options ? options->gpu_weights : 0, &gpu_weights, err,
                                     err_cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    device_scope scope(device);
    if (scope.status() != hipSuccess)
        return mi4_hip_failure(err, err_cap, "selecting the device", scope.status());
    hipError_t e = mi4_hip_gemm_init();
    if (e != hipSuccess)
        return mi4_hip_failure(err, err_cap, "setting the GEMM kernels' shared memory", e);
    int multiprocessors = 0;
    e = hipDeviceGetAttribute(&multiprocessors, hipDeviceAttributeMultiprocessorCount, device);
    if (e != hipSuccess)
        return mi4_hip_failure(err, err_cap, "querying the multiprocessor count", e);
    st = read_multiprocessor_cap(&multiprocessors, err, err_cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    mi4_hip_context *ctx = (mi4_hip_context *)calloc(1, sizeof *ctx);
    if (ctx == nullptr) {
        snprintf(err, err_cap, "hip: out of host memory for a context");
        return MOEINT4_OUT_OF_MEMORY;
    }
    ctx->device = device;
    ctx->multiprocessors = multiprocessors;
    ctx->use_mma = use_mma;
    ctx->gpu_weights = gpu_weights;
    pthread_mutex_init(&ctx->pool_lock, nullptr);
    *backend_context = ctx;
    return MOEINT4_SUCCESS;
}

void hip_context_destroy(void *user_data, void *backend_context)
{
    (void)user_data;
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    if (ctx == nullptr)
        return;
    device_scope scope(ctx->device);
    while (ctx->free_workspaces) {
        mi4_hip_workspace *w = ctx->free_workspaces;
        ctx->free_workspaces = w->next;
        mi4_hip_workspace_free(w);
    }
    pthread_mutex_destroy(&ctx->pool_lock);
    free(ctx);
}

void release_weights(mi4_hip_weights *w)
{
    if (w == nullptr)
        return;
    (void)hipFree(w->w13);
    (void)hipFree(w->w2);
    mi4_hip_int4_free(&w->q13);
    mi4_hip_int4_free(&w->q2);
    (void)hipFree(w->expert_map);
    (void)hipFree(w->input_perm);
    (void)hipFree(w->error_record);
    free(w);
}

moeint4_status hip_prepare(void *backend_context, const moeint4_weights_desc *desc,
                           void **backend_weights, char *err, size_t err_cap)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    device_scope scope(ctx->device);
    if (scope.status() != hipSuccess)
        return mi4_hip_failure(err, err_cap, "selecting the device", scope.status());
    mi4_hip_weights *w = (mi4_hip_weights *)calloc(1, sizeof *w);
    if (w == nullptr) {
        snprintf(err, err_cap, "hip: out of host memory");
        return MOEINT4_OUT_OF_MEMORY;
    }
    w->num_experts = desc->num_experts;
    w->num_local_experts = desc->num_local_experts;
    w->hidden_size = desc->hidden_size;
    w->intermediate_size = desc->intermediate_size;
    w->int4 = ctx->gpu_weights == MOEINT4_GPU_WEIGHTS_INT4;
    moeint4_quant_matrix w13 = moeint4_desc_w13(desc), w2 = moeint4_desc_w2(desc);
    /* The int4 layout keeps groups contiguous along IN: act-order weights
     * are held as the layout module's sorted copy, and the forward converts
     * each slot's input row in its expert's sort order (input_perm). The
     * BF16 emulation's dequantization applies g_idx itself. */
    moeint4_backend_sorted *sorted = nullptr;
    const int32_t *input_perm = nullptr;
    if (w->int4 && (moeint4_quant_matrix_has_act_order(&w13) ||
                    moeint4_quant_matrix_has_act_order(&w2))) {
        const moeint4_weights_desc *sorted_desc = nullptr;
        moeint4_status sort_st =
            moeint4_backend_sort_act_order(desc, &sorted, &sorted_desc, &input_perm, err, err_cap);
        if (sort_st != MOEINT4_SUCCESS) {
            free(w);
            return sort_st;
        }
        desc = sorted_desc;
        w13 = moeint4_desc_w13(desc);
        w2 = moeint4_desc_w2(desc);
    }
    w->int4_mma = w->int4 && ctx->use_mma && mi4_hip_int4_mma_serves(desc);
    w->int4_tile_dequant = w->int4 && mi4_hip_int4_tile_dequant_serves(desc);
    w->int4_ws_prefill = w->int4 && mi4_hip_int4_ws_prefill_wanted();
    w->int4_routed = w->int4_mma && mi4_hip_int4_routed_fits((int)desc->hidden_size,
                                                            (int)desc->intermediate_size);
    size_t k = (size_t)desc->hidden_size, n = (size_t)desc->intermediate_size;
    size_t w13_bytes = w->int4 ? 0 : (size_t)w->num_local_experts * 2 * n * k * 2;
    size_t w2_bytes = w->int4 ? 0 : (size_t)w->num_local_experts * k * n * 2;
    size_t map_bytes = (size_t)w->num_experts * sizeof(int32_t);
    moeint4_status st = MOEINT4_SUCCESS;
    if (!w->int4)
        st = mi4_hip_device_alloc((void **)&w->w13, w13_bytes, "w13 (bf16)", err, err_cap);
    if (st == MOEINT4_SUCCESS && !w->int4)
        st = mi4_hip_device_alloc((void **)&w->w2, w2_bytes, "w2 (bf16)", err, err_cap);
    if (st == MOEINT4_SUCCESS && w->int4)
        st = mi4_hip_int4_alloc(&w13, "w13", &w->q13, err, err_cap);
    if (st == MOEINT4_SUCCESS && w->int4)
        st = mi4_hip_int4_alloc(&w2, "w2", &w->q2, err, err_cap);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_device_alloc((void **)&w->expert_map, map_bytes, "expert_map", err,
                                  err_cap);
    const size_t perm_bytes =
        input_perm ? (size_t)w->num_local_experts * (size_t)w->hidden_size * sizeof(int32_t) : 0;
    if (st == MOEINT4_SUCCESS && input_perm)
        st = mi4_hip_upload((void **)&w->input_perm, input_perm, perm_bytes, "input_perm (act-order)",
                            err, err_cap);
    const size_t record_bytes = MI4_RECORD_WORDS * sizeof(int);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_device_alloc((void **)&w->error_record, record_bytes, "bad-slot record",
                                  err, err_cap);
    if (st == MOEINT4_SUCCESS) {
        hipError_t e = hipMemset(w->error_record, 0, record_bytes);
        if (e != hipSuccess)
            st = mi4_hip_failure(err, err_cap, "clearing the bad-slot record", e);
    }
    if (st == MOEINT4_SUCCESS) {
        int32_t *map = (int32_t *)malloc(map_bytes);
        if (map == nullptr) {
            snprintf(err, err_cap, "hip: out of host memory");
            st = MOEINT4_OUT_OF_MEMORY;
        } else {
            w->identity_map = 1;
            for (int e = 0; e < w->num_experts; e++) {
                map[e] = desc->expert_map ? desc->expert_map[e] : e;
                w->identity_map &= map[e] == e;
            }
            hipError_t e = hipMemcpy(w->expert_map, map, map_bytes, hipMemcpyHostToDevice);
            free(map);
            if (e != hipSuccess)
                st = mi4_hip_failure(err, err_cap, "copying expert_map", e);
        }
    }
    if (st == MOEINT4_SUCCESS)
        st = w->int4 ? mi4_hip_int4_fill(&w13, &w->q13, err, err_cap)
                     : mi4_hip_dequantize(&w13, w->w13, err, err_cap);
    if (st == MOEINT4_SUCCESS)
        st = w->int4 ? mi4_hip_int4_fill(&w2, &w->q2, err, err_cap)
                     : mi4_hip_dequantize(&w2, w->w2, err, err_cap);
    moeint4_backend_sorted_free(sorted);
    if (st != MOEINT4_SUCCESS) {
        release_weights(w);
        return st;
    }
    w->device_bytes = w13_bytes + w2_bytes + mi4_hip_int4_bytes(&w->q13) +
                      mi4_hip_int4_bytes(&w->q2) + map_bytes + perm_bytes + record_bytes;
    *backend_weights = w;
    return MOEINT4_SUCCESS;
}

void hip_release(void *backend_context, void *backend_weights)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    if (backend_weights == nullptr)
        return;
    device_scope scope(ctx ? ctx->device : 0);
    release_weights((mi4_hip_weights *)backend_weights);
}

moeint4_status hip_forward(void *backend_context, const void *backend_weights,
                           const moeint4_forward_args *args, char *err, size_t err_cap)
{
    return mi4_hip_forward((mi4_hip_context *)backend_context,
                           (const mi4_hip_weights *)backend_weights, args, err, err_cap);
}

moeint4_status hip_forward_workspace_size(void *backend_context, const void *backend_weights,
                                          int64_t max_tokens, int topk, moeint4_dtype dtype,
                                          size_t *bytes, char *err, size_t err_cap)
{
    (void)backend_context;
    (void)dtype; /* the bound assumes converted input rows, whatever the dtype */
    (void)err;
    (void)err_cap;
    *bytes = max_tokens == 0 ? 0
                             : mi4_hip_workspace_bound((const mi4_hip_weights *)backend_weights,
                                                       max_tokens, topk);
    return MOEINT4_SUCCESS;
}

moeint4_status hip_forward_check(void *backend_context, const void *backend_weights,
                                 void *stream, char *err, size_t err_cap)
{
    return mi4_hip_forward_check((mi4_hip_context *)backend_context,
                                 (const mi4_hip_weights *)backend_weights, stream, err, err_cap);
}

void hip_memory_usage(void *backend_context, const void *backend_weights, size_t *host_bytes,
                      size_t *device_bytes)
{
    (void)backend_context;
    const mi4_hip_weights *w = (const mi4_hip_weights *)backend_weights;
    if (host_bytes)
        *host_bytes = sizeof *w;
    if (device_bytes)
        *device_bytes = w ? w->device_bytes : 0;
}

moeint4_status hip_memory_alloc(void *backend_context, size_t bytes, void **ptr, char *err,
                                size_t err_cap)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    device_scope scope(ctx->device);
    return mi4_hip_device_alloc(ptr, bytes ? bytes : 1, "moeint4_memory_alloc", err, err_cap);
}

void hip_memory_free(void *backend_context, void *ptr)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    if (ptr == nullptr)
        return;
    device_scope scope(ctx->device);
    (void)hipFree(ptr);
}

moeint4_status hip_memory_copy(void *backend_context, void *dst, const void *src, size_t bytes,
                               moeint4_copy_kind kind, char *err, size_t err_cap)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    hipMemcpyKind hip_kind;
    switch (kind) {
    case MOEINT4_COPY_HOST_TO_DEVICE: hip_kind = hipMemcpyHostToDevice; break;
    case MOEINT4_COPY_DEVICE_TO_HOST: hip_kind = hipMemcpyDeviceToHost; break;
    case MOEINT4_COPY_DEVICE_TO_DEVICE: hip_kind = hipMemcpyDeviceToDevice; break;
    default:
        snprintf(err, err_cap, "kind = %d is not a moeint4_copy_kind", (int)kind);
        return MOEINT4_INVALID_ARGUMENT;
    }
    if (bytes == 0)
        return MOEINT4_SUCCESS;
    device_scope scope(ctx->device);
    hipError_t e = hipMemcpy(dst, src, bytes, hip_kind);
    return e == hipSuccess ? MOEINT4_SUCCESS : mi4_hip_failure(err, err_cap, "memory copy", e);
}

/* Extras exist only in test builds (hip_test_extras.hip). */
void *hip_get_proc_address(void *user_data, const char *name)
{
    (void)user_data;
#if defined(MOEINT4_HIP_TEST_EXTRAS)
    return mi4_hip_test_extra(name);
#else
    (void)name;
    return nullptr;
#endif
}

moeint4_backend_iface make_iface()
{
    moeint4_backend_iface t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.api_version = MOEINT4_BACKEND_API_VERSION;
    t.id = MOEINT4_BACKEND_HIP;
    t.name = "hip";
    t.device_pointers = 1;
    t.platform_priority = MOEINT4_PRIORITY_HIP;
    t.user_data = nullptr;
    t.probe = hip_probe;
    t.supports = hip_supports;
    t.context_create = hip_context_create;
    t.context_destroy = hip_context_destroy;
    t.prepare = hip_prepare;
    t.release = hip_release;
    t.forward = hip_forward;
    t.memory_usage = hip_memory_usage;
    t.memory_alloc = hip_memory_alloc;
    t.memory_free = hip_memory_free;
    t.memory_copy = hip_memory_copy;
    t.get_proc_address = hip_get_proc_address;
    t.forward_workspace_size = hip_forward_workspace_size;
    t.forward_check = hip_forward_check;
    return t;
}

const moeint4_backend_iface hip_iface = make_iface();

} // namespace

extern "C" __attribute__((visibility("default"))) const moeint4_backend_iface *
moeint4_plugin_backend(uint32_t core_api_version)
{
    if (core_api_version != MOEINT4_BACKEND_API_VERSION)
        return nullptr;
    return &hip_iface;
}
