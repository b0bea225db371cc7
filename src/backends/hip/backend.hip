/* The HIP backend's plugin table: device handling, prepare (upload +
 * dequantize to bf16), forward (route -> gemm13 -> gemm2 -> combine on the
 * caller's stream) and the memory helpers. libmoeint4-hip.so exports only
 * moeint4_plugin_backend(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "moeint4_backend.h"
#include "hip_internal.h"

moeint4_status mi4_hip_device_alloc(void **ptr, size_t bytes, const char *what, char *err,
                                    size_t cap)
{
    hipError_t e = hipMalloc(ptr, bytes);
    if (e == hipSuccess)
        return MOEINT4_SUCCESS;
    /* A failed allocation is also the runtime's "last error", which the
     * next kernel launch check would report as its own failure: clear it. */
    (void)hipGetLastError();
    *ptr = nullptr;
    snprintf(err, cap, "hip: cannot allocate %zu device bytes for %s: %s", bytes, what,
             hipGetErrorString(e));
    return e == hipErrorMemoryAllocation ? MOEINT4_OUT_OF_MEMORY : MOEINT4_DEVICE_ERROR;
}

namespace {

/* Makes `device` current for the scope and restores the caller's device, so
 * a framework's notion of the current device is left as it was. */
class device_scope {
  public:
    explicit device_scope(int device)
    {
        if (hipGetDevice(&saved_) != hipSuccess)
            saved_ = -1;
        status_ = hipSetDevice(device);
    }
    ~device_scope()
    {
        if (saved_ >= 0)
            (void)hipSetDevice(saved_);
    }
    hipError_t status() const { return status_; }

  private:
    int saved_;
    hipError_t status_;
};

moeint4_status device_failure(char *err, size_t cap, const char *what, hipError_t e)
{
    snprintf(err, cap, "hip: %s failed: %s", what, hipGetErrorString(e));
    return e == hipErrorMemoryAllocation ? MOEINT4_OUT_OF_MEMORY : MOEINT4_DEVICE_ERROR;
}

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

moeint4_status hip_context_create(void *user_data, const moeint4_context_options *options,
                                  void **backend_context, char *err, size_t err_cap)
{
    (void)user_data;
    int device = options ? options->device_index : 0;
    int use_mma = 1;
    moeint4_status st = read_gemm_variant(&use_mma, err, err_cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    device_scope scope(device);
    if (scope.status() != hipSuccess)
        return device_failure(err, err_cap, "selecting the device", scope.status());
    hipError_t e = mi4_hip_gemm_init();
    if (e != hipSuccess)
        return device_failure(err, err_cap, "setting the GEMM kernels' shared memory", e);
    int multiprocessors = 0;
    e = hipDeviceGetAttribute(&multiprocessors, hipDeviceAttributeMultiprocessorCount, device);
    if (e != hipSuccess)
        return device_failure(err, err_cap, "querying the multiprocessor count", e);
    mi4_hip_context *ctx = (mi4_hip_context *)calloc(1, sizeof *ctx);
    if (ctx == nullptr) {
        snprintf(err, err_cap, "hip: out of host memory for a context");
        return MOEINT4_OUT_OF_MEMORY;
    }
    ctx->device = device;
    ctx->multiprocessors = multiprocessors;
    ctx->use_mma = use_mma;
    pthread_mutex_init(&ctx->pool_lock, nullptr);
    *backend_context = ctx;
    return MOEINT4_SUCCESS;
}

void free_workspace(mi4_hip_workspace *w)
{
    (void)hipFree(w->device);
    (void)hipHostFree(w->host_status);
    free(w);
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
        free_workspace(w);
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
    (void)hipFree(w->expert_map);
    free(w);
}

moeint4_status hip_prepare(void *backend_context, const moeint4_weights_desc *desc,
                           void **backend_weights, char *err, size_t err_cap)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    device_scope scope(ctx->device);
    if (scope.status() != hipSuccess)
        return device_failure(err, err_cap, "selecting the device", scope.status());
    mi4_hip_weights *w = (mi4_hip_weights *)calloc(1, sizeof *w);
    if (w == nullptr) {
        snprintf(err, err_cap, "hip: out of host memory");
        return MOEINT4_OUT_OF_MEMORY;
    }
    w->num_experts = desc->num_experts;
    w->num_local_experts = desc->num_local_experts;
    w->hidden_size = desc->hidden_size;
    w->intermediate_size = desc->intermediate_size;
    size_t k = (size_t)desc->hidden_size, n = (size_t)desc->intermediate_size;
    size_t w13_bytes = (size_t)w->num_local_experts * 2 * n * k * 2;
    size_t w2_bytes = (size_t)w->num_local_experts * k * n * 2;
    size_t map_bytes = (size_t)w->num_experts * sizeof(int32_t);
    moeint4_status st =
        mi4_hip_device_alloc((void **)&w->w13, w13_bytes, "w13 (bf16)", err, err_cap);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_device_alloc((void **)&w->w2, w2_bytes, "w2 (bf16)", err, err_cap);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_device_alloc((void **)&w->expert_map, map_bytes, "expert_map", err,
                                  err_cap);
    if (st == MOEINT4_SUCCESS) {
        int32_t *map = (int32_t *)malloc(map_bytes);
        if (map == nullptr) {
            snprintf(err, err_cap, "hip: out of host memory");
            st = MOEINT4_OUT_OF_MEMORY;
        } else {
            for (int e = 0; e < w->num_experts; e++)
                map[e] = desc->expert_map ? desc->expert_map[e] : e;
            hipError_t e = hipMemcpy(w->expert_map, map, map_bytes, hipMemcpyHostToDevice);
            free(map);
            if (e != hipSuccess)
                st = device_failure(err, err_cap, "copying expert_map", e);
        }
    }
    if (st == MOEINT4_SUCCESS) {
        moeint4_quant_matrix w13 = moeint4_desc_w13(desc);
        st = mi4_hip_dequantize(&w13, w->w13, err, err_cap);
    }
    if (st == MOEINT4_SUCCESS) {
        moeint4_quant_matrix w2 = moeint4_desc_w2(desc);
        st = mi4_hip_dequantize(&w2, w->w2, err, err_cap);
    }
    if (st != MOEINT4_SUCCESS) {
        release_weights(w);
        return st;
    }
    w->device_bytes = w13_bytes + w2_bytes + map_bytes;
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

size_t round_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

/* Takes a workspace of at least `bytes` from the pool, or makes one. */
moeint4_status acquire_workspace(mi4_hip_context *ctx, size_t bytes, mi4_hip_workspace **out,
                                 char *err, size_t cap)
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
        hipError_t e = hipHostMalloc((void **)&w->host_status, 4 * sizeof(int), hipHostMallocMapped);
        if (e == hipSuccess)
            e = hipHostGetDevicePointer((void **)&w->host_status_device, w->host_status, 0);
        if (e != hipSuccess) {
            free_workspace(w);
            return device_failure(err, cap, "allocating mapped host memory", e);
        }
    }
    (void)hipFree(w->device);
    w->device = nullptr;
    w->bytes = 0;
    size_t grown = bytes + bytes / 4;
    moeint4_status st = mi4_hip_device_alloc(&w->device, grown, "forward workspace", err, cap);
    if (st != MOEINT4_SUCCESS) {
        free_workspace(w);
        return st;
    }
    /* the routing status words start at zero */
    const int zeros[4] = {0, 0, 0, 0};
    hipError_t e = hipMemcpy(w->device, zeros, sizeof zeros, hipMemcpyHostToDevice);
    if (e != hipSuccess) {
        free_workspace(w);
        return device_failure(err, cap, "clearing the forward workspace", e);
    }
    w->bytes = grown;
    *out = w;
    return MOEINT4_SUCCESS;
}

void return_workspace(mi4_hip_context *ctx, mi4_hip_workspace *w)
{
    pthread_mutex_lock(&ctx->pool_lock);
    w->next = ctx->free_workspaces;
    ctx->free_workspaces = w;
    pthread_mutex_unlock(&ctx->pool_lock);
}

/* Rows per expert decide the row tile; MOEINT4_HIP_TILE (a mi4_hip_tile_name)
 * forces one, for tuning. */
mi4_hip_tile_config choose_tile(int64_t tokens, int64_t slots, const mi4_hip_weights *w)
{
    const char *forced = getenv("MOEINT4_HIP_TILE");
    for (int c = 0; forced && c < MI4_TILE_COUNT; c++)
        if (strcmp(forced, mi4_hip_tile_name((mi4_hip_tile_config)c)) == 0)
            return c == MI4_TILE_DIRECT && slots > MI4_DIRECT_MAX_SLOTS
                       ? MI4_TILE_GEMV
                       : (mi4_hip_tile_config)c;
    /* Measured on the H200 (bench/results/hip-*.md): the direct GEMVs (no
     * routing, no combine) while there are no more slots than local experts
     * (one token, or Qwen3's 128 experts up to 8 tokens); past that, on
     * sm_90a builds, the persistent wgmma tiles, 64 x 256 while experts see
     * fewer than 64 rows (less padding), else 128 x 256 (faster than the
     * GEMV from two rows per expert up). Elsewhere (AMD, other NVIDIA
     * targets): the routed register-streaming GEMV while experts see about
     * two rows, then 16- and 64-row tiles, then the 128-row tiles. */
    if (slots <= 64 && (tokens == 1 || slots <= w->num_local_experts))
        return MI4_TILE_DIRECT;
    int64_t rows_per_expert = slots / (w->num_local_experts > 0 ? w->num_local_experts : 1);
    if (mi4_hip_wgmma_built())
        return rows_per_expert < 64 ? MI4_TILE_WGMMA_64 : MI4_TILE_WGMMA_256;
    if (rows_per_expert <= 2)
        return MI4_TILE_GEMV;
    if (rows_per_expert <= 8)
        return MI4_TILE_16;
    return rows_per_expert <= 48 ? MI4_TILE_64 : MI4_TILE_WGMMA_256;
}

moeint4_status run_forward(mi4_hip_context *ctx, const mi4_hip_weights *w,
                           const moeint4_forward_args *args, char *err, size_t cap)
{
    const int64_t m = args->num_tokens, slots = m * args->topk;
    const size_t k = (size_t)w->hidden_size, n = (size_t)w->intermediate_size;
    hipStream_t stream = (hipStream_t)args->stream;
    mi4_hip_tile_config config = choose_tile(m, slots, w);
    int bm = mi4_hip_tile_rows(config);
    int64_t touched = slots < w->num_local_experts ? slots : w->num_local_experts;
    int64_t max_tiles = (slots + touched * (bm - 1)) / bm;
    int per_slot = args->apply_router_weight_on_input != 0;
    bool direct = args->dtype == MOEINT4_DTYPE_BF16 && !per_slot &&
                  ((uintptr_t)args->hidden_states % 16) == 0;
    size_t x_rows = (size_t)(per_slot ? slots : m);

    size_t at_tile = round_up(4 * sizeof(int));
    size_t at_sorted = at_tile + round_up((size_t)max_tiles * sizeof(int));
    size_t at_x = at_sorted + round_up((size_t)max_tiles * bm * sizeof(int));
    size_t at_act = at_x + (direct ? 0 : round_up(x_rows * k * 2));
    size_t at_y = at_act + round_up((size_t)max_tiles * bm * n * 2);
    size_t at_route = at_y + round_up((size_t)slots * k * 4);
    size_t total = at_route + round_up(mi4_hip_route_scratch_bytes(slots, w->num_local_experts));

    /* an error the caller's own work left behind is not ours to report */
    (void)hipGetLastError();
    mi4_hip_workspace *ws = nullptr;
    moeint4_status st = acquire_workspace(ctx, total, &ws, err, cap);
    if (st != MOEINT4_SUCCESS)
        return st;
    char *base = (char *)ws->device;
    mi4_hip_routing routing;
    routing.status = (int *)base;
    routing.tile_expert = (int *)(base + at_tile);
    routing.sorted_slot = (int *)(base + at_sorted);
    routing.max_tiles = (int)max_tiles;
    routing.tile_rows = bm;
    routing.route_scratch = (int *)(base + at_route);

    mi4_hip_gemm_args g;
    g.weights = w;
    g.routing = &routing;
    g.x_bf16 = direct ? (const uint16_t *)args->hidden_states : (const uint16_t *)(base + at_x);
    g.x_per_slot = per_slot;
    g.topk = args->topk;
    g.topk_weights = args->topk_weights;
    g.weight_on_output = !per_slot;
    g.activation = args->activation;
    g.limit = args->swiglu_limit;
    g.alpha = args->swiglu_alpha;
    g.beta = args->swiglu_beta;
    g.act = (uint16_t *)(base + at_act);
    g.y = (float *)(base + at_y);
    g.use_mma = ctx->use_mma;
    g.stream = stream;
    g.multiprocessors = ctx->multiprocessors;
    g.topk_ids = args->topk_ids;
    g.num_slots = slots;
    g.combine.y = g.y;
    g.combine.topk_ids = args->topk_ids;
    g.combine.expert_map = w->expert_map;
    g.combine.num_tokens = m;
    g.combine.topk = args->topk;
    g.combine.hidden = (int)k;
    g.combine.out = args->output;
    g.combine.dtype = args->dtype;
    g.combine.status = routing.status;
    g.combine.host_status = ws->host_status_device;

    ws->host_status[0] = 0;
    ws->host_status[1] = -1;
    hipError_t e = hipSuccess;
    const char *step = "routing";
    if (!direct) {
        step = "input conversion";
        e = mi4_hip_launch_convert(args->hidden_states, args->dtype, m, (int)k, args->topk,
                                   args->topk_weights, per_slot, (uint16_t *)(base + at_x),
                                   stream);
    }
    const bool direct_gemv = config == MI4_TILE_DIRECT; /* no routing, no combine */
    if (e == hipSuccess && !direct_gemv) {
        step = "routing";
        e = mi4_hip_launch_route(args->topk_ids, slots, w, &routing, stream);
    }
    if (e == hipSuccess) {
        step = "gemm13";
        e = mi4_hip_launch_gemm13(config, &g);
    }
    if (e == hipSuccess) {
        step = "gemm2";
        e = mi4_hip_launch_gemm2(config, &g);
    }
    if (e == hipSuccess && !direct_gemv) {
        step = "combine";
        e = mi4_hip_launch_combine(&g.combine, stream);
    }
    if (e == hipSuccess) {
        step = "stream synchronize";
        e = hipStreamSynchronize(stream);
    }
    if (e != hipSuccess) {
        st = device_failure(err, cap, step, e);
    } else if (ws->host_status[0] != 0) {
        int slot = ws->host_status[1], id = 0;
        (void)hipMemcpy(&id, args->topk_ids + slot, sizeof id, hipMemcpyDeviceToHost);
        snprintf(err, cap, "topk_ids[%lld][%d] = %d is outside [0, %d)",
                 (long long)(slot / args->topk), slot % args->topk, id, w->num_experts);
        st = MOEINT4_INVALID_ARGUMENT;
    }
    return_workspace(ctx, ws);
    return st;
}

moeint4_status hip_forward(void *backend_context, const void *backend_weights,
                           const moeint4_forward_args *args, char *err, size_t err_cap)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    const mi4_hip_weights *w = (const mi4_hip_weights *)backend_weights;
    if (args->num_tokens == 0)
        return MOEINT4_SUCCESS;
    if (args->dtype != MOEINT4_DTYPE_F32 && args->dtype != MOEINT4_DTYPE_F16 &&
        args->dtype != MOEINT4_DTYPE_BF16) {
        snprintf(err, err_cap, "hip: dtype %d is not F32, F16 or BF16", (int)args->dtype);
        return MOEINT4_UNSUPPORTED;
    }
    device_scope scope(ctx->device);
    if (scope.status() != hipSuccess)
        return device_failure(err, err_cap, "selecting the device", scope.status());
    return run_forward(ctx, w, args, err, err_cap);
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
    return e == hipSuccess ? MOEINT4_SUCCESS : device_failure(err, err_cap, "memory copy", e);
}

/* Extra for tests and tools: copies the prepared bf16 weights to host
 * buffers (w13 [E_l][2N][K], w2 [E_l][K][N]); either may be NULL. */
moeint4_status hip_download_weights(void *backend_context, const void *backend_weights,
                                    uint16_t *w13, uint16_t *w2)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    const mi4_hip_weights *w = (const mi4_hip_weights *)backend_weights;
    device_scope scope(ctx->device);
    size_t k = (size_t)w->hidden_size, n = (size_t)w->intermediate_size;
    size_t bytes = (size_t)w->num_local_experts * 2 * n * k * 2;
    hipError_t e = hipSuccess;
    if (w13)
        e = hipMemcpy(w13, w->w13, bytes, hipMemcpyDeviceToHost);
    if (e == hipSuccess && w2)
        e = hipMemcpy(w2, w->w2, bytes / 2, hipMemcpyDeviceToHost);
    return e == hipSuccess ? MOEINT4_SUCCESS : MOEINT4_DEVICE_ERROR;
}

/* Extra: 1 when contexts created now use matrix cores (MOEINT4_HIP_GEMM). */
int hip_context_uses_mma(void *backend_context)
{
    return ((mi4_hip_context *)backend_context)->use_mma;
}

void *hip_get_proc_address(void *user_data, const char *name)
{
    (void)user_data;
    if (strcmp(name, "hip_download_weights") == 0)
        return (void *)hip_download_weights;
    if (strcmp(name, "hip_context_uses_mma") == 0)
        return (void *)hip_context_uses_mma;
    return nullptr;
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
