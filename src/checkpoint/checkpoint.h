/* The checkpoint handle: mapped safetensors files, one name-sorted table of
 * every tensor, the parsed config, and per MoE layer the tensors of its
 * experts (validated at open) and, once asked for, their stacked [E, ...]
 * arrays. The public moeint4_checkpoint_* calls (src/core/checkpoint_api.c)
 * are thin wrappers over these functions. */
#ifndef MOEINT4_CHECKPOINT_CHECKPOINT_H
#define MOEINT4_CHECKPOINT_CHECKPOINT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"
#include "moeint4.h"

typedef struct mi4_ckpt_ref {
    const mi4_st_tensor *tensor;
    const mi4_st_file *file;
} mi4_ckpt_ref;

/* One projection: of one expert (2-D tensors) or of all of them (fused 3-D). */
typedef struct mi4_ckpt_proj {
    const mi4_ckpt_ref *qweight, *scales, *qzeros, *g_idx;
} mi4_ckpt_proj;

/* The arrays of one weights description. */
typedef struct mi4_ckpt_stack {
    int ready;
    int32_t *owned[8]; /* what this stack allocated (freed on release) */
    int num_owned;
    const int32_t *w13_qweight, *w13_qzeros, *w13_g_idx, *w2_qweight, *w2_qzeros, *w2_g_idx;
    const void *w13_scales, *w2_scales;
} mi4_ckpt_stack;

/* An MLP made of experts (the routed ones, or a shared MLP as one expert). */
typedef struct mi4_ckpt_experts {
    char prefix[128]; /* "model.layers.3.mlp.experts" / ".shared_expert" */
    int num_experts, hidden_size, intermediate_size, group_size;
    int fused; /* proj = {w13, w2} over [E, ...] */
    int act_order;
    mi4_st_dtype scales_dtype;
    mi4_ckpt_proj *proj; /* [E][3] gate, up, down; or [2] when fused */
    size_t stored_bytes;
    mi4_ckpt_stack stack;
} mi4_ckpt_experts;

typedef struct mi4_ckpt_layer {
    int layer;
    char block[96]; /* "model.layers.3.mlp" */
    mi4_ckpt_experts routed;
    int has_shared, shared_quantized;
    mi4_ckpt_experts shared;
    char shared_prefix[128];
    const mi4_ckpt_ref *router, *shared_gate;
    /* Under the checkpoint's lock: descs of the routed experts handed out
     * (kept until release_layer), and moeint4_checkpoint_prepare calls in
     * flight; the routed stack is freed by neither while the other holds it. */
    int desc_given, preparing;
} mi4_ckpt_layer;

struct moeint4_checkpoint {
    mi4_st_file *files;
    int num_files;
    size_t file_bytes;
    mi4_ckpt_ref *refs; /* sorted by name */
    size_t num_refs;
    mi4_model_config model;
    mi4_quant_config quant;
    moeint4_format format;
    moeint4_zero_convention zeros;
    int zero_offset;
    mi4_ckpt_layer *layers; /* ascending layer numbers */
    int num_layers;
    pthread_mutex_t lock;          /* stacks */
    pthread_mutex_t warnings_lock; /* warnings (added while `lock` may be held) */
    char *warnings;
    size_t warnings_length;
    int num_warnings;
};

/* checkpoint_open.c */
moeint4_status mi4_ckpt_open(const char *path, const moeint4_checkpoint_options *options,
                             moeint4_checkpoint **out);
void mi4_ckpt_close(moeint4_checkpoint *ck);

/* checkpoint_table.c: the sorted tensor table (duplicates across files are
 * INVALID_ARGUMENT) and the warnings. */
moeint4_status mi4_ckpt_build_refs(moeint4_checkpoint *ck);
const mi4_ckpt_ref *mi4_ckpt_find(const moeint4_checkpoint *ck, const char *name);
/* The first tensor (in name order) whose name starts with `prefix`, or NULL. */
const mi4_ckpt_ref *mi4_ckpt_find_prefix(const moeint4_checkpoint *ck, const char *prefix);
/* Adds a warning line (thread-safe); formatting like printf. */
void mi4_ckpt_warn(moeint4_checkpoint *ck, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* checkpoint_layers.c: finds the MoE layers and validates their tensors. */
moeint4_status mi4_ckpt_discover_layers(moeint4_checkpoint *ck);
const mi4_ckpt_layer *mi4_ckpt_layer_find(const moeint4_checkpoint *ck, int layer);

/* checkpoint_stack.c: the stacked arrays and the descriptions. `holder`
 * (may be NULL) is incremented under the checkpoint's lock together with the
 * build, so that no release can come between the two. */
moeint4_status mi4_ckpt_experts_desc(moeint4_checkpoint *ck, mi4_ckpt_experts *experts, int *holder,
                                     moeint4_weights_desc *desc);
void mi4_ckpt_stack_release(mi4_ckpt_stack *stack);

#endif
