/* What the XPU backend's handles hold, shared by xpu_backend.c (tables,
 * contexts, weights) and xpu_forward.c. */
#ifndef MOEINT4_BACKENDS_XPU_XPU_BACKEND_H
#define MOEINT4_BACKENDS_XPU_XPU_BACKEND_H

#include <pthread.h>
#include <stddef.h>

#include "moeint4.h"
#include "xpu_dnnl.h"
#include "xpu_runtime.h"

#define MI4_XPU_DEFAULT_ONEDNN_MIN_TOKENS 64
/* f32 scratch per chunk of tokens (intermediate activations + per-slot outputs) */
#define MI4_XPU_SCRATCH_BUDGET ((size_t)256 << 20)
/* tokens per chunk at most: launch grids stay within every device's group counts */
#define MI4_XPU_MAX_CHUNK_TOKENS 32768

typedef struct mi4_xpu_context {
    mi4_xpu_runtime *rt;
    mi4_xpu_dnnl *dnnl;      /* NULL: the int4 kernels serve every expert */
    int onednn_min_tokens;   /* experts with at least this many slots use oneDNN */
    int64_t chunk_tokens;    /* 0: from MI4_XPU_SCRATCH_BUDGET */
    pthread_mutex_t lock;    /* kernel objects carry arguments: one forward at a time */
} mi4_xpu_context;

typedef struct mi4_xpu_weights {
    int num_experts, num_local, hidden, intermediate;
    int group13, group2;     /* effective group sizes along K (w13) and N (w2) */
    int scales_bf16;
    int32_t *expert_map;     /* device [num_experts] */
    uint8_t *w13_packed;     /* device [E_l, 2N, K/2] */
    uint16_t *w13_scales;    /* device [E_l, 2N, K/g] */
    uint8_t *w2_packed;      /* device [E_l, K, N/2] */
    uint16_t *w2_scales;     /* device [E_l, K, N/g] */
    size_t device_bytes;
} mi4_xpu_weights;

moeint4_status mi4_xpu_forward(void *backend_context, const void *backend_weights,
                               const moeint4_forward_args *args, char *err, size_t cap);

#endif
