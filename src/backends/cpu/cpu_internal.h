/* What the CPU backend's opaque handles hold. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_INTERNAL_H
#define MOEINT4_BACKENDS_CPU_CPU_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_pool.h"
#include "layout/cpu_repack.h"
#include "moeint4.h"

typedef struct mi4_cpu_context {
    const mi4_cpu_kernels *kernels;
    mi4_cpu_pool *pool;
    int num_threads;
    /* the forward's scratch, kept between calls (cpu_forward.c); a call
     * that finds it busy (another thread's forward) allocates its own */
    void *scratch;
    size_t scratch_bytes;
    atomic_int scratch_busy;
} mi4_cpu_context;

/* Per local expert: w13 = N-row gate tiles then N-row up tiles (geo13, IN =
 * K), so tile t of each half covers the same 8 intermediate columns; w2 =
 * K-row tiles (geo2, IN = N). */
typedef struct mi4_cpu_weights {
    int num_experts;
    int num_local_experts;
    int32_t *expert_map;   /* [num_experts] global -> local or -1 */
    int hidden_size;       /* K */
    int intermediate_size; /* N */
    int scales_bf16;
    mi4_cpu_pack_geometry geo13; /* one half of w13: IN = K, rows = N */
    mi4_cpu_pack_geometry geo2;  /* IN = N, rows = K */
    size_t w13_expert_bytes;
    size_t w2_expert_bytes;
    uint8_t *w13;
    uint8_t *w2;
    /* Act-order checkpoints (layout/act_order.h): [E_l][K], w13 row i of
     * expert e takes x[input_perm[e][i]]; NULL otherwise. */
    int32_t *input_perm;
} mi4_cpu_weights;

/* The forward pass (cpu_forward.c) with an explicit kernel table, so tests
 * can compare variants on the same prepared weights. */
moeint4_status mi4_cpu_forward_with(mi4_cpu_context *ctx, const mi4_cpu_kernels *kernels,
                                    const mi4_cpu_weights *weights,
                                    const moeint4_forward_args *args, char *err, size_t err_cap);

/* Test hook: a context that uses `kernels` (NULL: mi4_cpu_kernels_select). */
moeint4_status mi4_cpu_context_create_with(int num_threads, const mi4_cpu_kernels *kernels,
                                           mi4_cpu_context **out);
void mi4_cpu_context_destroy(mi4_cpu_context *ctx);
moeint4_status mi4_cpu_weights_prepare(mi4_cpu_context *ctx, const moeint4_weights_desc *desc,
                                       mi4_cpu_weights **out, char *err, size_t err_cap);
void mi4_cpu_weights_release(mi4_cpu_weights *weights);

#endif
