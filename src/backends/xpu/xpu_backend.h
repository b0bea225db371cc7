/* What the XPU backend's handles hold, shared by xpu_backend.c (tables,
 * contexts, weights), xpu_scratch.c and xpu_forward.c. */
#ifndef MOEINT4_BACKENDS_XPU_XPU_BACKEND_H
#define MOEINT4_BACKENDS_XPU_XPU_BACKEND_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"
#include "xpu_dnnl.h"
#include "xpu_runtime.h"

#define MI4_XPU_DEFAULT_ONEDNN_MIN_TOKENS 64
/* f32 scratch per chunk of tokens (intermediate activations + per-slot outputs) */
#define MI4_XPU_SCRATCH_BUDGET ((size_t)256 << 20)
/* tokens per chunk at most: launch grids stay within every device's group counts */
#define MI4_XPU_MAX_CHUNK_TOKENS 32768
/* tokens whose scratch prepare reserves (MOEINT4_XPU_RESERVE_TOKENS) */
#define MI4_XPU_DEFAULT_RESERVE_TOKENS 64
/* One-token chunks take the rows GEMVs (kernels/gemv_rows.cl) with about
 * this many work-groups per compute unit (MOEINT4_XPU_GEMV_ROWS; 0: the
 * staged GEMVs of gemm.cl). On the H200 through NVIDIA's OpenCL 8 was the
 * best or within 2% of it (2, 4, 16, one work-group per chunk) on every
 * GEMV, and the rows GEMVs beat the staged ones on Mixtral's and Qwen3's
 * w13 and Mixtral's w2, and matched them on Qwen3's w2
 * (bench/results/xpu-2026-12-03-rows.md). */
#define MI4_XPU_DEFAULT_GEMV_ROWS 8

/* Alignment of every buffer carved out of the scratch or a caller's workspace. */
#define MI4_XPU_ALIGN 256

/* The oneDNN operands of mi4_xpu_scratch.dnnl (xpu_forward.c sizes them). */
enum {
    MI4_XPU_DNNL_A,
    MI4_XPU_DNNL_W,
    MI4_XPU_DNNL_A2,
    MI4_XPU_DNNL_C13,
    MI4_XPU_DNNL_C2,
    MI4_XPU_DNNL_S,
    MI4_XPU_DNNL_BUFFERS
};

/* Device buffers a forward works in. The chunk's are reserved at prepare;
 * each is grown (never per forward) when a forward needs more; owned by the
 * context, whose lock serialises forwards. */
typedef struct mi4_xpu_scratch {
    void *chunk; /* route table, slot lists, f32 intermediates of one chunk */
    size_t chunk_bytes;
    void *staging; /* a forward of several chunks combines here first */
    size_t staging_bytes;
    void *dnnl[MI4_XPU_DNNL_BUFFERS]; /* oneDNN operands (whole allocations: see xpu_forward.c) */
    size_t dnnl_bytes[MI4_XPU_DNNL_BUFFERS];
} mi4_xpu_scratch;

/* One chunk's buffers, carved out of the chunk scratch (mi4_xpu_chunk_scratch). */
typedef struct mi4_xpu_chunk_buffers {
    int32_t *route;       /* 4E+2 ints, see kernels/routing.cl */
    int32_t *slot_expert; /* [S] */
    int32_t *sorted;      /* [S] */
    float *act;           /* [S, N] */
    float *slot_out;      /* [S, K] */
    float *gathered;      /* [S, K] act-order weights' inputs (input_perm), else NULL */
} mi4_xpu_chunk_buffers;

typedef struct mi4_xpu_context {
    mi4_xpu_runtime *rt;
    mi4_xpu_dnnl *dnnl;     /* NULL: the int4 kernels serve every expert */
    int onednn_min_tokens;  /* experts with at least this many slots use oneDNN */
    int64_t chunk_tokens;   /* 0: from MI4_XPU_SCRATCH_BUDGET */
    int64_t reserve_tokens; /* scratch reserved at prepare for this many tokens */
    int gemm_team;          /* 0: chosen per row length (mi4_xpu_gemm_team) */
    int gemv;               /* one-token chunks use the one-row kernels */
    int gemv_walk;          /* >0: the walking GEMVs, this many work-groups per compute unit */
    int gemv_lanes;         /* >0: the lanes GEMVs where rows fit them, likewise */
    int gemv_rows;          /* >0: the rows GEMVs where rows fit and neither of the above is set */
    mi4_xpu_scratch scratch;
    pthread_mutex_t lock; /* kernel objects carry arguments: one forward at a time */
} mi4_xpu_context;

typedef struct mi4_xpu_weights {
    int num_experts, num_local, hidden, intermediate;
    int group13, group2; /* effective group sizes along K (w13) and N (w2) */
    int scales_bf16;
    int32_t *expert_map;  /* device [num_experts] */
    uint8_t *w13_packed;  /* device [E_l, 2N, K/2] */
    uint16_t *w13_scales; /* device [E_l, 2N, K/g] */
    uint8_t *w2_packed;   /* device [E_l, K, N/2] */
    uint16_t *w2_scales;  /* device [E_l, K, N/g] */
    uint8_t *w13_zeros;   /* device [E_l, 2N, K/g], or NULL: zero point 8 (GPTQ symmetric) */
    uint8_t *w2_zeros;    /* device [E_l, K, N/g], or NULL */
    /* device [E_l, K] for act-order weights (sorted at prepare: the w13
     * kernels read x gathered by it, mi4_gather_input), or NULL */
    int32_t *input_perm;
    /* device [6]: [0, 2) the synchronous forwards' error record (reset by
     * each), [2, 6) the sticky record of asynchronous forwards that
     * forward_check reads and clears (kernels/routing.cl) */
    int32_t *errors;
    size_t device_bytes;
} mi4_xpu_weights;

/* Bytes (a multiple of MI4_XPU_ALIGN) of chunk scratch for `tokens` tokens
 * of `topk` slots on these weights; with base (MI4_XPU_ALIGN-aligned), also
 * the buffers carved out of it into *buf. */
size_t mi4_xpu_chunk_scratch(const mi4_xpu_weights *w, int64_t tokens, int topk, void *base,
                             mi4_xpu_chunk_buffers *buf);
/* Tokens per chunk of a forward of num_tokens tokens. */
int64_t mi4_xpu_chunk_tokens(const mi4_xpu_context *ctx, const mi4_xpu_weights *w, int topk,
                             int64_t num_tokens);
/* Bytes of a caller workspace for up to max_tokens tokens (any alignment). */
size_t mi4_xpu_workspace_bytes(const mi4_xpu_context *ctx, const mi4_xpu_weights *w,
                               int64_t max_tokens, int topk, moeint4_dtype dtype);
/* Makes *buffer (one of ctx->scratch's, *have bytes) at least `bytes`
 * (waits for the queue before freeing a smaller one). Called with ctx->lock
 * held. */
moeint4_status mi4_xpu_reserve(mi4_xpu_context *ctx, void **buffer, size_t *have, size_t bytes,
                               void *queue, char *err, size_t cap);
void mi4_xpu_scratch_free(mi4_xpu_context *ctx);

moeint4_status mi4_xpu_forward(void *backend_context, const void *backend_weights,
                               const moeint4_forward_args *args, char *err, size_t cap);
moeint4_status mi4_xpu_forward_check(void *backend_context, const void *backend_weights,
                                     void *stream, char *err, size_t cap);

#endif
