/*
 * libmoeint4 — int4 Mixture-of-Experts layers (W4A16) for inference engines.
 *
 * The stable C ABI. Everything here is prefixed moeint4_ / MOEINT4_.
 *
 * Conventions that hold for every function unless its comment says otherwise:
 *  - Every function returns a moeint4_status. On failure, moeint4_last_error()
 *    (thread-local) says in words what was wrong, naming the field.
 *  - No function aborts, exits or prints on bad input.
 *  - Inputs are never modified. Outputs are untouched when a call fails.
 *  - Structs passed by pointer start with `struct_size`: set it to
 *    sizeof(the struct) as your header saw it. Zero-initialise the struct
 *    first. The library accepts any size from the struct's first published
 *    size (its MOEINT4_*_MIN_SIZE below) upwards: fields past the caller's
 *    size take their documented defaults (0 / NULL unless the field says
 *    otherwise), and a tail past what this library knows is ignored. A
 *    smaller size is INVALID_ARGUMENT naming `<arg>->struct_size`
 *    (VERSION_MISMATCH for a backend table). Rules for growing a struct:
 *    fields are only appended; an appended field starts at or after the
 *    previous sizeof (explicit padding first if the struct ended in tail
 *    padding), so an older caller's struct_size never covers part of it;
 *    its comment gives its default (0 / NULL unless said otherwise), which
 *    the library applies to callers whose size ends before it; the
 *    _MIN_SIZE macros never change.
 *    Structs the library fills (moeint4_backend_info, moeint4_precision)
 *    are written up to the caller's struct_size only.
 *  - Numeric values of enums are pinned forever; new values are appended.
 *  - Free/release functions accept NULL and do nothing.
 *
 * Backend authors: include/moeint4_backend.h (the backend table, plugins,
 * registration); nothing here depends on it.
 *
 * Threading: the library is thread-safe. A context may be used by several
 * threads at once; a prepared weights handle is immutable and may be used by
 * many threads at once for forward(). Destroying a context or releasing a
 * weights handle while another thread uses it is the caller's error.
 *
 * Copyright 2026 the libmoeint4 authors. SPDX-License-Identifier: Apache-2.0
 */
#ifndef MOEINT4_H
#define MOEINT4_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MOEINT4_BUILDING_LIBRARY) && defined(__GNUC__)
#define MOEINT4_API __attribute__((visibility("default")))
#else
#define MOEINT4_API
#endif

/* The end of field `last` of struct `type`: the struct's first published
 * size when `last` was its last field (tail padding not counted). */
#define MOEINT4_SIZE_THROUGH(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define MOEINT4_VERSION_MAJOR 0
#define MOEINT4_VERSION_MINOR 1
#define MOEINT4_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, comparable with moeint4_version(). */
#define MOEINT4_VERSION_NUMBER \
    (MOEINT4_VERSION_MAJOR * 10000 + MOEINT4_VERSION_MINOR * 100 + MOEINT4_VERSION_PATCH)

/* The version of the library loaded at run time (compare with
 * MOEINT4_VERSION_NUMBER to detect a header/library mismatch). */
MOEINT4_API unsigned moeint4_version(void);
/* "MAJOR.MINOR.PATCH"; static storage, never NULL. */
MOEINT4_API const char *moeint4_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status and errors                                                         */
/* ------------------------------------------------------------------------ */

typedef enum moeint4_status {
    MOEINT4_SUCCESS = 0,
    /* A pointer, size, enum value or data value is invalid (message names it). */
    MOEINT4_INVALID_ARGUMENT = 1,
    /* Valid request that this backend / build cannot serve (act-order g_idx,
     * a dtype the backend lacks, ...). */
    MOEINT4_UNSUPPORTED = 2,
    /* Host or device memory could not be allocated. */
    MOEINT4_OUT_OF_MEMORY = 3,
    /* The requested backend is not compiled in, its plugin is missing, or its
     * hardware/runtime is not present on this machine. */
    MOEINT4_BACKEND_UNAVAILABLE = 4,
    /* The device runtime reported an error. */
    MOEINT4_DEVICE_ERROR = 5,
    /* A backend plugin's table has an incompatible api_version or
     * struct_size (a caller's struct_size below the minimum is
     * INVALID_ARGUMENT). */
    MOEINT4_VERSION_MISMATCH = 6,
    /* A bug in libmoeint4; please report it with moeint4_last_error(). */
    MOEINT4_INTERNAL_ERROR = 7,
} moeint4_status;

/* Name of a status ("MOEINT4_INVALID_ARGUMENT"); static storage, never NULL
 * ("MOEINT4_UNKNOWN_STATUS" for values outside the enum). */
MOEINT4_API const char *moeint4_status_string(moeint4_status status);

/* What the last failing call on this thread said was wrong, in words
 * (e.g. "topk_ids[3][1] = 130 is outside [0, 128)"). "" when the last call
 * succeeded. Thread-local storage, valid until the next libmoeint4 call on
 * this thread (moeint4_status_string, moeint4_last_error and the version
 * functions leave it as it is, so they may be called in any order to report
 * a failure). Never NULL. */
MOEINT4_API const char *moeint4_last_error(void);

/* ------------------------------------------------------------------------ */
/* Enums                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum moeint4_backend {
    MOEINT4_BACKEND_AUTO = 0, /* let the oracle choose */
    MOEINT4_BACKEND_CPU = 1,
    MOEINT4_BACKEND_XPU = 2, /* Intel GPU: Level Zero / OpenCL (libmoeint4-xpu.so) */
    MOEINT4_BACKEND_HIP = 3, /* int4 or BF16 device weights (gpu_weights; libmoeint4-hip.so) */
    /* moeint4_register_backend() hands out ids from here upwards. */
    MOEINT4_BACKEND_FIRST_CUSTOM = 16,
} moeint4_backend;

typedef enum moeint4_dtype {
    MOEINT4_DTYPE_F32 = 1,
    MOEINT4_DTYPE_F16 = 2,
    MOEINT4_DTYPE_BF16 = 3,
} moeint4_dtype;

typedef enum moeint4_format {
    /* GPTQ symmetric (uint4b8, value = q - 8). qweight [E, IN/8, OUT] int32
     * packed along IN, lowest nibble first; scales [E, G, OUT]; no qzeros. */
    MOEINT4_FORMAT_GPTQ_SYM = 1,
    /* GPTQ asymmetric: as GPTQ_SYM plus qzeros [E, G, OUT/8] int32 packed
     * along OUT, lowest nibble first. value = q - (zero + zero_offset). */
    MOEINT4_FORMAT_GPTQ_ASYM = 2,
    /* AWQ: qweight [E, IN, OUT/8] int32 packed along OUT in AWQ's nibble order
     * (nibble i of a word holds column 8*w + {0,2,4,6,1,3,5,7}[i]); qzeros
     * [E, G, OUT/8] in the same order; scales [E, G, OUT]. value = q - zero. */
    MOEINT4_FORMAT_AWQ = 3,
} moeint4_format;

/* How the 2N gate/up rows of w13 become N values: gate = rows [0, N),
 * up = rows [N, 2N) (gate first). */
typedef enum moeint4_activation {
    /* silu(gate) * up */
    MOEINT4_ACTIVATION_SILU = 0,
    /* gelu(gate) * up, exact (erf) GELU */
    MOEINT4_ACTIVATION_GELU = 1,
    /* Clamped SwiGLU (GPT-OSS style):
     *   g = min(gate, limit); u = clamp(up, -limit, limit);
     *   out = (u + beta) * g * sigmoid(alpha * g)
     * limit > 0 and finite, alpha finite, beta finite. */
    MOEINT4_ACTIVATION_SWIGLU_CLAMP = 2,
} moeint4_activation;

/* ------------------------------------------------------------------------ */
/* Backends                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct moeint4_backend_info {
    size_t struct_size;
    moeint4_backend id;
    char name[32];        /* "cpu", "xpu", "hip", or a custom backend's name */
    int compiled;         /* 1: built in, or its plugin was found and loaded */
    int available;        /* 1: its hardware/runtime is present (probe ok) */
    char reason[256];     /* why not compiled/available; "" when available */
    /* 1: forward() takes device pointers (from moeint4_memory_alloc or a
     * framework's tensors); 0: host pointers. */
    int device_pointers;
} moeint4_backend_info;
#define MOEINT4_BACKEND_INFO_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_backend_info, device_pointers)

/* Ids of every known backend (built in, plugin or registered, available or
 * not), in the oracle's priority order for this machine. Writes at most
 * `capacity` ids to `ids` (may be NULL when capacity is 0) and the total
 * number to *count. */
MOEINT4_API moeint4_status moeint4_backend_list(moeint4_backend *ids, int capacity, int *count);

/* Fills `info` for backend `id` (probing device 0). Unknown id:
 * MOEINT4_INVALID_ARGUMENT. A known but absent backend succeeds with
 * compiled = 0 or available = 0 and a reason. */
MOEINT4_API moeint4_status moeint4_backend_query(moeint4_backend id, moeint4_backend_info *info);

/* What a backend's forward() computes in, for activations of one dtype.
 * Each field is the dtype a quantity is held in on the way (F32: not
 * rounded below f32; the caller's dtype for `inputs`: used as given). The
 * output is rounded once from the f32 accumulator to the caller's dtype.
 * Where a backend has several paths, the coarsest is stated. */
typedef struct moeint4_precision {
    size_t struct_size;
    int stated;                  /* 1: stated; 0: not stated (a third-party backend), fields 0 */
    moeint4_dtype inputs;        /* hidden_states as the first projection reads them */
    moeint4_dtype weights;       /* dequantized weights (q - zero) * scale (F32: exact) */
    moeint4_dtype intermediate;  /* act(gate, up), the input of the second projection */
    moeint4_dtype accumulation;  /* the dot products */
} moeint4_precision;
#define MOEINT4_PRECISION_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_precision, accumulation)

/* The precision of backend `id` for activations of `dtype` (the table in
 * docs/ARCHITECTURE.md, "Precision"). Unknown id or dtype, or struct_size
 * below the minimum: INVALID_ARGUMENT. A known backend without a stated
 * precision succeeds with stated = 0. */
MOEINT4_API moeint4_status moeint4_backend_precision(moeint4_backend id, moeint4_dtype dtype,
                                                     moeint4_precision *precision);

/* Parses "auto", "cpu", "xpu", "hip" or a registered name (case-insensitive). */
MOEINT4_API moeint4_status moeint4_backend_from_name(const char *name, moeint4_backend *id);

/* ------------------------------------------------------------------------ */
/* Context                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct moeint4_context moeint4_context;
typedef struct moeint4_weights moeint4_weights;

/* Most CPU worker threads a context may ask for. */
#define MOEINT4_MAX_THREADS 1024

typedef struct moeint4_context_options {
    size_t struct_size;
    /* AUTO (MOEINT4_BACKEND env var overrides AUTO): the context binds to one
     * backend at its first moeint4_weights_prepare: the oracle's choice for
     * that problem. From then on its weights and its memory helpers all use
     * that backend; a later problem the bound backend cannot serve fails
     * with UNSUPPORTED saying so (use another context), so memory from
     * moeint4_memory_alloc always suits every forward on the context. A
     * memory helper called before any prepare binds it to the first
     * available backend in priority order. Any other value forces that
     * backend from the start: if it cannot serve a problem, the call fails
     * with a reason, never a silent fallback. */
    moeint4_backend backend;
    int device_index;     /* GPU ordinal; ignored by the CPU backend */
    /* CPU worker threads, 0 to MOEINT4_MAX_THREADS; 0 = one per online core. */
    int num_threads;
    /* Native handles a framework may hand in so its memory is used in place
     * (XPU Level Zero: ze_context_handle_t, ze_device_handle_t,
     * ze_command_list_handle_t). NULL = the backend creates its own. */
    void *native_context;
    void *native_device;
    void *native_queue;
    /* ---- appended (a smaller struct_size reads as the default, AUTO) ---- */
    /* How a GPU backend holds prepared weights (moeint4_gpu_weights; the
     * HIP backend; the CPU and XPU backends keep their int4 layouts either
     * way). AUTO: MOEINT4_HIP_WEIGHTS=bf16|int4 when set, else INT4. */
    int gpu_weights;
} moeint4_context_options;
#define MOEINT4_CONTEXT_OPTIONS_MIN_SIZE \
    MOEINT4_SIZE_THROUGH(moeint4_context_options, native_queue)

/* Device weights of a GPU backend (moeint4_context_options.gpu_weights).
 *   INT4: codes, scales and zero points stay int4 on the device (about the
 *     checkpoint's bytes); kernels dequantize in registers, weights exact
 *     in f32 ((q - zero) * scale).
 *   BF16: the experts dequantized once at prepare to BF16 (4x the int4
 *     bytes; each weight rounded once to BF16). */
typedef enum moeint4_gpu_weights {
    MOEINT4_GPU_WEIGHTS_AUTO = 0, /* INT4 unless MOEINT4_HIP_WEIGHTS asks for bf16 */
    MOEINT4_GPU_WEIGHTS_BF16 = 1,
    MOEINT4_GPU_WEIGHTS_INT4 = 2,
} moeint4_gpu_weights;

/* Creates a context. `options` may be NULL (AUTO, device 0, all cores).
 * *ctx is set only on success. The state of the forced backend (for AUTO:
 * of the first available backend) is made here, so its environment knobs
 * (MOEINT4_CPU_KERNEL, MOEINT4_CPU_IDLE_MS, ...; README "Choosing a
 * backend") are read now; a backend an AUTO context binds to later reads
 * them at that first prepare. Errors: INVALID_ARGUMENT (NULL ctx, bad enum,
 * negative index, num_threads out of range), BACKEND_UNAVAILABLE (a forced
 * backend is absent: the message says why), OUT_OF_MEMORY, DEVICE_ERROR. */
MOEINT4_API moeint4_status moeint4_context_create(const moeint4_context_options *options,
                                                  moeint4_context **ctx);
/* Destroys a context. NULL is a no-op. All weights prepared with it must be
 * released first (weights still alive are released by this call). */
MOEINT4_API void moeint4_context_destroy(moeint4_context *ctx);

/* ------------------------------------------------------------------------ */
/* Weights                                                                   */
/* ------------------------------------------------------------------------ */

/* One quantized projection stack as a checkpoint stores it. IN is the
 * projection's input dimension, OUT its output dimension:
 *   w13: IN = K (hidden), OUT = 2N (gate rows then up rows)
 *   w2:  IN = N,          OUT = K
 * G = IN / group_size (1 for per-channel, group_size = -1).
 * Shapes per format are documented at moeint4_format. All pointers are host
 * pointers. Sizes: E, IN, OUT > 0; IN a multiple of 8 (every format) and of
 * group_size; OUT a multiple of 8 for GPTQ_ASYM and AWQ (packed along OUT),
 * any OUT for GPTQ_SYM. Scales must be finite and > 0. */
typedef struct moeint4_quant_matrix {
    size_t struct_size;
    moeint4_format format;
    int zero_offset;           /* GPTQ_ASYM only: 1 for AutoGPTQ v1 (stored zero = zero - 1) */
    int num_experts;           /* experts stored in the arrays */
    int in_features;           /* IN */
    int out_features;          /* OUT */
    int group_size;            /* 32, 64, 128 or -1 (per-channel) */
    moeint4_dtype scales_dtype; /* F16 (checkpoint default) or BF16; 0 = F16 */
    const int32_t *qweight;
    const void *scales;        /* [E, G, OUT] */
    const int32_t *qzeros;     /* [E, G, OUT/8]; NULL for GPTQ_SYM */
    /* [E, IN] or NULL. Trivial (k / group_size) or act-order (GPTQ only: any
     * map in which every group holds exactly group_size rows); conversions
     * that cannot honour act-order refuse it (UNSUPPORTED). */
    const int32_t *g_idx;
} moeint4_quant_matrix;
#define MOEINT4_QUANT_MATRIX_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_quant_matrix, g_idx)

typedef struct moeint4_weights_desc {
    size_t struct_size;
    int num_experts;           /* global E (range of topk_ids) */
    int num_local_experts;     /* experts held in the arrays below */
    /* [num_experts]: global id -> local id in [0, num_local_experts) or -1
     * (expert lives elsewhere). NULL: identity, num_local_experts must equal
     * num_experts. Local ids must not repeat, and every local id in
     * [0, num_local_experts) must appear (else the map and the arrays
     * disagree: INVALID_ARGUMENT). Copied at prepare time. */
    const int32_t *expert_map;
    int hidden_size;           /* K */
    int intermediate_size;     /* N */
    int group_size;            /* 32, 64, 128 or -1 (per-channel); same for w13 and w2 */
    moeint4_format format;
    int zero_offset;           /* GPTQ_ASYM: 0, or 1 for AutoGPTQ v1 checkpoints */
    moeint4_dtype scales_dtype; /* 0 or F16 (default), or BF16 */
    /* w13: qweight GPTQ [E_l, K/8, 2N] | AWQ [E_l, K, 2N/8]; scales [E_l, K/g, 2N];
     *      qzeros [E_l, K/g, 2N/8] (asym formats); g_idx [E_l, K] optional. */
    const int32_t *w13_qweight;
    const void *w13_scales;
    const int32_t *w13_qzeros;
    const int32_t *w13_g_idx;
    /* w2:  qweight GPTQ [E_l, N/8, K] | AWQ [E_l, N, K/8]; scales [E_l, N/g, K];
     *      qzeros [E_l, N/g, K/8]; g_idx [E_l, N] optional. */
    const int32_t *w2_qweight;
    const void *w2_scales;
    const int32_t *w2_qzeros;
    const int32_t *w2_g_idx;
} moeint4_weights_desc;
#define MOEINT4_WEIGHTS_DESC_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_weights_desc, w2_g_idx)

/* Validates the checkpoint tensors (shapes, group size, finite positive
 * scales, zero points, expert_map, g_idx), asks the oracle (or the context's
 * forced backend) for a backend, and converts the weights into that backend's
 * layout (host pointers in; GPU backends upload). The caller's arrays may be
 * freed afterwards. *weights is set only on success.
 * An act-order g_idx (GPTQ desc_act) is served by the CPU backend; backends
 * that cannot serve it say so and the oracle moves on.
 * Errors: INVALID_ARGUMENT, UNSUPPORTED (no backend can serve the problem:
 * the message gives every backend's reason),
 * BACKEND_UNAVAILABLE, OUT_OF_MEMORY, DEVICE_ERROR. */
MOEINT4_API moeint4_status moeint4_weights_prepare(moeint4_context *ctx,
                                                   const moeint4_weights_desc *desc,
                                                   moeint4_weights **weights);
/* Releases prepared weights. NULL is a no-op. Releasing twice is undefined
 * (as free()); a released handle must not be used. */
MOEINT4_API void moeint4_weights_release(moeint4_weights *weights);

/* Which backend serves these weights. */
MOEINT4_API moeint4_status moeint4_weights_backend(const moeint4_weights *weights,
                                                   moeint4_backend *backend);
/* Bytes the prepared handle holds in host memory and in device memory (the
 * HIP backend: about the int4 checkpoint's bytes with gpu_weights INT4,
 * about 4x with BF16). Either output pointer may be NULL. */
MOEINT4_API moeint4_status moeint4_weights_memory(const moeint4_weights *weights,
                                                  size_t *host_bytes, size_t *device_bytes);

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct moeint4_forward_args {
    size_t struct_size;
    moeint4_dtype dtype;          /* of hidden_states and output */
    int64_t num_tokens;           /* M >= 0 (0: nothing to do) */
    int topk;                     /* 1 <= topk <= num_experts */
    const void *hidden_states;    /* [M, K] */
    const int32_t *topk_ids;      /* [M, topk] global expert ids in [0, num_experts) */
    const float *topk_weights;    /* [M, topk] router weights (finite) */
    void *output;                 /* [M, K]; must not overlap the inputs */
    moeint4_activation activation;
    float swiglu_limit;           /* SWIGLU_CLAMP only */
    float swiglu_alpha;
    float swiglu_beta;
    /* 0: out[m] = sum_j w[m,j] * W2 act(W13 x[m]).
     * 1: out[m] = sum_j W2 act(W13 (w[m,j] * x[m])) (router weight on the input). */
    int apply_router_weight_on_input;
    /* Device backends: the caller's stream/queue (hipStream_t, cl_command_queue,
     * ze_command_list_handle_t); NULL = the context's default. CPU: ignored. */
    void *stream;
    /* ---- appended after the first release (struct_size rules: a smaller
     * struct gets 0 / NULL for these) ---- */
    uint32_t flags;               /* MOEINT4_FORWARD_* bits; 0 = default */
    /* Caller-owned device scratch of workspace_bytes (device backends), or
     * NULL: the backend takes scratch from its own per-context pool
     * (synchronous forwards only). moeint4_forward_workspace_size gives the
     * bytes. One workspace per concurrently running stream: two forwards in
     * flight at once must not share one. CPU: ignored. */
    void *workspace;
    size_t workspace_bytes;
} moeint4_forward_args;

/* Asynchronous, graph-capturable forward (device backends): the call only
 * enqueues work on `stream` and returns, with no host synchronization, no
 * host read or write of device memory and no allocation or free, so it may
 * be captured into a CUDA/HIP graph. It needs a caller workspace. A slot
 * with a bad id (outside [0, num_experts)) or a non-finite router weight
 * cannot be a return status then: it contributes nothing (the other slots
 * are computed as usual) and the first such slot is kept in a sticky
 * device-side record of the weights that moeint4_forward_check reads and
 * clears. Limits: a captured forward has a fixed num_tokens (capture one
 * graph per batch size, with a workspace sized for the largest); the
 * CPU backend accepts the flag and runs synchronously as usual. */
#define MOEINT4_FORWARD_ASYNC 0x1u

/* moeint4_forward_args as first published (it ended at `stream`): the
 * smallest struct_size moeint4_forward accepts. */
#define MOEINT4_FORWARD_ARGS_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_forward_args, stream)

/* Runs the expert half of a MoE layer:
 *   out[m] = sum_j  topk_weights[m,j] * W2[e] . act(W13[e] . x[m]),  e = topk_ids[m,j]
 * Slots whose expert maps to -1 (not local) contribute nothing; a token with
 * no local slot gets zeros. Accumulation is in f32; the result is rounded once
 * to `dtype`. What inputs, weights and the intermediate are held in on the
 * way differs by backend: moeint4_backend_precision says.
 * Memory: CPU backend: host pointers. GPU backends: device pointers, work is
 * enqueued on `stream` and the call returns when it completes (see each
 * backend's notes in README.md).
 * Errors: INVALID_ARGUMENT (NULL pointers, sizes, enum values, topk ids out of
 * range, non-finite router weights or SwiGLU parameters; the output is then
 * untouched), UNSUPPORTED (dtype/activation the backend lacks), OUT_OF_MEMORY,
 * DEVICE_ERROR; INVALID_ARGUMENT also when `weights` were prepared with
 * another context. Thread-safe for concurrent calls on the same weights. */
MOEINT4_API moeint4_status moeint4_forward(moeint4_context *ctx, const moeint4_weights *weights,
                                           const moeint4_forward_args *args);

/* Workspace bytes a forward (synchronous or MOEINT4_FORWARD_ASYNC) with up
 * to max_tokens tokens and this topk and dtype needs on these weights; 0 on
 * backends that take no caller workspace (CPU). The bound covers every tile
 * choice, the router weight on either side and an unaligned workspace
 * pointer. Errors: INVALID_ARGUMENT (NULL weights or bytes, max_tokens < 0,
 * topk outside [1, num_experts], dtype). */
MOEINT4_API moeint4_status moeint4_forward_workspace_size(const moeint4_weights *weights,
                                                          int64_t max_tokens, int topk,
                                                          moeint4_dtype dtype, size_t *bytes);

/* Synchronizes `stream` (NULL = the context's default), then reads and
 * clears the weights' sticky device-side record of asynchronous forwards:
 * INVALID_ARGUMENT with the message the synchronous path gives
 * ("topk_ids[m][j] = X is outside [0, E)", "topk_weights[m][j] = X is not
 * finite") when a bad slot was seen since the last check, SUCCESS otherwise
 * (always on the CPU backend). Forwards still running on other streams are
 * covered only once the caller has synchronized them. DEVICE_ERROR when the
 * stream or the read fails. */
MOEINT4_API moeint4_status moeint4_forward_check(moeint4_context *ctx,
                                                 const moeint4_weights *weights, void *stream);

/* ------------------------------------------------------------------------ */
/* Device memory helpers (for callers without a framework)                  */
/* ------------------------------------------------------------------------ */

typedef enum moeint4_copy_kind {
    MOEINT4_COPY_HOST_TO_DEVICE = 1,
    MOEINT4_COPY_DEVICE_TO_HOST = 2,
    MOEINT4_COPY_DEVICE_TO_DEVICE = 3,
} moeint4_copy_kind;

/* Memory suitable for forward() pointers on `ctx`'s backend (host memory on
 * the CPU backend, 64-byte aligned). For AUTO contexts that is the backend
 * the context is bound to (its first prepared weights'); called before any
 * prepare, it binds the context to the first available backend (see
 * moeint4_context_options.backend).
 * bytes = 0: INVALID_ARGUMENT. *ptr is set only on success. Free with
 * moeint4_memory_free on the same context (NULL is a no-op). */
MOEINT4_API moeint4_status moeint4_memory_alloc(moeint4_context *ctx, size_t bytes, void **ptr);
MOEINT4_API void moeint4_memory_free(moeint4_context *ctx, void *ptr);
/* Synchronous copy. */
MOEINT4_API moeint4_status moeint4_memory_copy(moeint4_context *ctx, void *dst, const void *src,
                                               size_t bytes, moeint4_copy_kind kind);
/* The backend a context's memory helpers use (and its weights: see
 * moeint4_context_options.backend); binds an unbound AUTO context as
 * moeint4_memory_alloc does. */
MOEINT4_API moeint4_status moeint4_context_backend(const moeint4_context *ctx,
                                                   moeint4_backend *backend);

/* ------------------------------------------------------------------------ */
/* Debugging                                                                 */
/* ------------------------------------------------------------------------ */

/* Host memory blocks the library (core and CPU backend) has allocated and not
 * yet freed, process-wide, in every build: a leak check that does not depend
 * on the allocator (compare the count before and after create/release
 * cycles). GPU plugins' device memory is not counted. */
MOEINT4_API moeint4_status moeint4_debug_live_allocations(int64_t *count);

/* ------------------------------------------------------------------------ */
/* Oracle                                                                    */
/* ------------------------------------------------------------------------ */

/* What the oracle needs to know about a weights problem (no data). */
typedef struct moeint4_problem {
    size_t struct_size;
    moeint4_format format;
    int group_size;
    int num_experts;
    int num_local_experts;
    int has_expert_map;
    int hidden_size;        /* K */
    int intermediate_size;  /* N */
    int zero_offset;
    int has_g_idx;          /* a g_idx is given (trivial or act-order) */
    /* Appended (0.1 checkpoints): 1 when a g_idx is an act-order permutation
     * (not k / group_size). Backends that cannot serve it answer 0 from
     * supports(); a struct_size without this field means 0. */
    int act_order;
} moeint4_problem;
#define MOEINT4_PROBLEM_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_problem, has_g_idx)

/* The backend the oracle picks for `problem` on device `device_index`
 * (honouring MOEINT4_BACKEND when `requested` is AUTO). Fails with
 * UNSUPPORTED / BACKEND_UNAVAILABLE and every reason when none can serve it. */
MOEINT4_API moeint4_status moeint4_oracle_select(const moeint4_problem *problem,
                                                 moeint4_backend requested, int device_index,
                                                 moeint4_backend *chosen);
/* The oracle's decision table in words: one line per backend in priority
 * order with probe/supports results and the choice. Writes at most `capacity`
 * bytes (NUL-terminated, truncated if needed) and the full length (without
 * NUL) to *length when `length` is not NULL. */
MOEINT4_API moeint4_status moeint4_oracle_explain(const moeint4_problem *problem,
                                                  moeint4_backend requested, int device_index,
                                                  char *buffer, size_t capacity, size_t *length);

/* ------------------------------------------------------------------------ */
/* Layout conversions (pure host functions, bit-exact)                       */
/* ------------------------------------------------------------------------ */

/* GPTQ symmetric -> the XPU layout (vLLM's XPU W4A16 MoE):
 *   packed [E, OUT, IN/2] uint8, byte j of row o = code(2j) | code(2j+1) << 4
 *   scales [E, OUT, G] (same dtype as the source scales, transposed)
 * Codes are the stored 4-bit values (uint4b8; value = code - 8).
 * Refuses other formats (UNSUPPORTED) and an act-order g_idx (UNSUPPORTED). */
MOEINT4_API moeint4_status moeint4_layout_gptq_to_xpu(const moeint4_quant_matrix *src,
                                                      uint8_t *packed, void *scales_t);

/* Any format -> the XPU layout: packed and scales as above, and
 *   zeros [E, OUT, G] uint8: the value subtracted from each code (8 for
 *   GPTQ_SYM, stored zero + zero_offset for GPTQ_ASYM, stored zero for AWQ),
 * so value = (code - zero) * scale. zeros_t may be NULL for GPTQ_SYM only.
 * Refuses an act-order g_idx (UNSUPPORTED). */
MOEINT4_API moeint4_status moeint4_layout_to_xpu(const moeint4_quant_matrix *src,
                                                 uint8_t *packed, void *scales_t,
                                                 uint8_t *zeros_t);

/* Any format -> BF16 [E, OUT, IN] (bit patterns): value = (q - zero) * scale
 * in f32, rounded once to nearest even. An act-order g_idx is honoured (input
 * column k uses group g_idx[k]). */
MOEINT4_API moeint4_status moeint4_layout_dequantize_bf16(const moeint4_quant_matrix *src,
                                                          uint16_t *out);

/* Any format -> F32 [E, OUT, IN], exact (q - zero) * scale. */
MOEINT4_API moeint4_status moeint4_layout_dequantize_f32(const moeint4_quant_matrix *src,
                                                         float *out);

/* Validates `src` exactly as weights_prepare would (shapes, scales, zeros,
 * g_idx). Useful before an offline conversion. */
MOEINT4_API moeint4_status moeint4_layout_validate(const moeint4_quant_matrix *src);

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                               */
/* ------------------------------------------------------------------------ */

/* A quantized MoE checkpoint as Hugging Face tools write it: a directory
 * with config.json and one or more *.safetensors files
 * (model.safetensors.index.json when sharded), or one .safetensors file.
 * The quantization description is read from config.json's
 * quantization_config, quantize_config.json (AutoGPTQ) or quant_config.json
 * (AutoAWQ), in that order. Files are memory-mapped read-only. Model families
 * (config.json model_type): qwen2_moe, qwen3_moe, mixtral, deepseek_v2,
 * deepseek_v3 (docs/CHECKPOINTS.md lists names and conventions). Layer
 * numbers are the model's own, as they appear in tensor names. Every message
 * names the file and the tensor. A handle may be used by several threads. */
typedef struct moeint4_checkpoint moeint4_checkpoint;

typedef struct moeint4_checkpoint_options {
    size_t struct_size;
    /* Text of a config.json (model config, may hold quantization_config),
     * used instead of the file next to the checkpoint; NULL = read it. */
    const char *config_json;
    /* Text of a quantization description in any of the three forms above,
     * used when the checkpoint has none; NULL = none. */
    const char *quantization_json;
} moeint4_checkpoint_options;
#define MOEINT4_CHECKPOINT_OPTIONS_MIN_SIZE \
    MOEINT4_SIZE_THROUGH(moeint4_checkpoint_options, quantization_json)

/* How the stored zero points relate to the real ones. */
typedef enum moeint4_zero_convention {
    MOEINT4_ZEROS_GPTQ_V1 = 1, /* AutoGPTQ "gptq": stored zero = zero - 1 */
    MOEINT4_ZEROS_GPTQ_V2 = 2, /* GPTQModel "gptq_v2": stored as is */
    MOEINT4_ZEROS_AWQ = 3,     /* AWQ: stored as is */
} moeint4_zero_convention;

typedef struct moeint4_checkpoint_info {
    size_t struct_size;
    char model_type[32];       /* config.json model_type, e.g. "qwen3_moe" */
    char architecture[64];     /* architectures[0], e.g. "Qwen3MoeForCausalLM" */
    char quant_method[16];     /* "gptq" or "awq" */
    char quant_source[48];     /* where the description came from */
    int num_hidden_layers;     /* config */
    int num_moe_layers;        /* layers with routed experts */
    int num_files;             /* safetensors files mapped */
    size_t num_tensors;
    size_t file_bytes;         /* all files together */
    int num_warnings;          /* see moeint4_checkpoint_warnings */
} moeint4_checkpoint_info;
#define MOEINT4_CHECKPOINT_INFO_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_checkpoint_info, num_warnings)

typedef struct moeint4_checkpoint_layer_info {
    size_t struct_size;
    int layer;                 /* as in the tensor names */
    int num_experts;           /* routed experts */
    int hidden_size;           /* K */
    int intermediate_size;     /* N of one routed expert */
    int top_k;                 /* num_experts_per_tok from config.json */
    moeint4_format format;
    moeint4_zero_convention zeros;
    int zero_offset;           /* as it goes into moeint4_weights_desc */
    int group_size;            /* 32, 64, 128, or -1 per-channel (from the tensors) */
    int act_order;             /* 1: a non-trivial g_idx (read from the tensors) */
    int fused_experts;         /* 1: stored as 3-D [E, ...] tensors, used in place */
    moeint4_dtype scales_dtype;
    int shared_experts;        /* 0 none, else the shared MLP's expert count */
    int shared_intermediate_size; /* N of the shared MLP */
    int shared_quantized;      /* 1: int4 (moeint4_checkpoint_shared_desc); 0: dense */
    char shared_prefix[128];   /* e.g. "model.layers.3.mlp.shared_expert"; "" none */
    char shared_gate_name[128]; /* Qwen2-MoE shared_expert_gate weight; "" none */
    char router_name[128];     /* e.g. "model.layers.3.mlp.gate.weight" */
    char router_dtype[8];      /* its safetensors dtype: "BF16", "F16", "F32" */
    size_t expert_bytes;       /* int4 bytes of the routed experts as stored */
} moeint4_checkpoint_layer_info;
#define MOEINT4_CHECKPOINT_LAYER_INFO_MIN_SIZE \
    MOEINT4_SIZE_THROUGH(moeint4_checkpoint_layer_info, expert_bytes)

/* One tensor of the checkpoint, as stored (pointer into the mapped file). */
typedef struct moeint4_tensor_view {
    size_t struct_size;
    const char *name;          /* valid until the checkpoint is closed */
    const char *file;          /* the file's base name */
    char dtype[8];             /* safetensors dtype: "F16", "BF16", "F32", "I32", ... */
    int ndim;
    int64_t shape[8];
    const void *data;
    size_t bytes;
} moeint4_tensor_view;
#define MOEINT4_TENSOR_VIEW_MIN_SIZE MOEINT4_SIZE_THROUGH(moeint4_tensor_view, bytes)

/* Opens a checkpoint (a directory or one .safetensors file); `options` may
 * be NULL. Validates every file header, the index, the config, the family and
 * the shapes of every MoE layer's tensors. *checkpoint is set only on
 * success. Errors: INVALID_ARGUMENT (missing or malformed file, a tensor of
 * the wrong shape or dtype, a missing expert or shard), UNSUPPORTED (unknown
 * architecture, bits != 4, an AWQ version other than GEMM, not quantized),
 * OUT_OF_MEMORY. */
MOEINT4_API moeint4_status moeint4_checkpoint_open(const char *path,
                                                   const moeint4_checkpoint_options *options,
                                                   moeint4_checkpoint **checkpoint);
/* Unmaps the files and frees every array handed out. NULL is a no-op. */
MOEINT4_API void moeint4_checkpoint_close(moeint4_checkpoint *checkpoint);

MOEINT4_API moeint4_status moeint4_checkpoint_query(const moeint4_checkpoint *checkpoint,
                                                    moeint4_checkpoint_info *info);
/* The MoE layer numbers in ascending order: at most `capacity` into `layers`
 * (may be NULL when capacity is 0), the total into *count. */
MOEINT4_API moeint4_status moeint4_checkpoint_layers(const moeint4_checkpoint *checkpoint,
                                                     int *layers, int capacity, int *count);
/* INVALID_ARGUMENT when `layer` is not a MoE layer (the message lists them). */
MOEINT4_API moeint4_status moeint4_checkpoint_layer_query(const moeint4_checkpoint *checkpoint,
                                                         int layer,
                                                         moeint4_checkpoint_layer_info *info);
/* Fills `desc` (struct_size set by the caller) with the routed experts of
 * `layer`: per-expert tensors stacked into [E, ...] arrays owned by the
 * checkpoint (fused 3-D tensors used in place), gate and up concatenated into
 * w13. Pointers stay valid until moeint4_checkpoint_release_layer or close.
 * Reads the data: symmetric GPTQ zeros are checked against the label here. */
MOEINT4_API moeint4_status moeint4_checkpoint_layer_desc(moeint4_checkpoint *checkpoint,
                                                         int layer, moeint4_weights_desc *desc);
/* The shared expert MLP of `layer` as a one-expert description (quantized
 * shared experts only; a dense one is read with moeint4_checkpoint_tensor).
 * INVALID_ARGUMENT when the layer has none or it is dense. */
MOEINT4_API moeint4_status moeint4_checkpoint_shared_desc(moeint4_checkpoint *checkpoint,
                                                          int layer, moeint4_weights_desc *desc);
/* Frees the stacked arrays of `layer` (descs filled for it become invalid). */
MOEINT4_API moeint4_status moeint4_checkpoint_release_layer(moeint4_checkpoint *checkpoint,
                                                            int layer);
/* prepare(layer_desc(layer)); the stacked arrays are released again unless a
 * desc of the layer was handed out before. */
MOEINT4_API moeint4_status moeint4_checkpoint_prepare(moeint4_context *ctx,
                                                      moeint4_checkpoint *checkpoint, int layer,
                                                      moeint4_weights **weights);
/* A tensor by name; INVALID_ARGUMENT when absent. */
MOEINT4_API moeint4_status moeint4_checkpoint_tensor(const moeint4_checkpoint *checkpoint,
                                                     const char *name, moeint4_tensor_view *view);
/* Tensor `index` in [0, info.num_tensors), in name order. */
MOEINT4_API moeint4_status moeint4_checkpoint_tensor_at(const moeint4_checkpoint *checkpoint,
                                                        size_t index, moeint4_tensor_view *view);
/* Warnings so far (config contradicted by the tensors, relabeled zeros, ...),
 * one per line; same buffer rules as moeint4_oracle_explain. */
MOEINT4_API moeint4_status moeint4_checkpoint_warnings(const moeint4_checkpoint *checkpoint,
                                                       char *buffer, size_t capacity,
                                                       size_t *length);

#ifdef __cplusplus
}
#endif

#endif /* MOEINT4_H */
