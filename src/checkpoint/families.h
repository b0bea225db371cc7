/* Model families: where each one keeps its MoE tensors and which config.json
 * keys describe them. Data only; a new family is a new table row. */
#ifndef MOEINT4_CHECKPOINT_FAMILIES_H
#define MOEINT4_CHECKPOINT_FAMILIES_H

#include <stddef.h>

typedef struct mi4_family {
    const char *model_type;   /* config.json model_type */
    const char *architecture; /* config.json architectures[0] */
    const char *block;        /* model.layers.L.<block>.experts.E.<proj> */
    const char *proj[3];      /* gate, up, down projection names */
    const char *fused_w13;    /* <block>.experts.<fused_w13>: [E, ...] gate then up */
    const char *fused_w2;
    const char *router;       /* <block>.<router>.weight */
    const char *shared_block; /* <block>.<shared_block>.<proj>, or NULL */
    const char *shared_gate;  /* <block>.<shared_gate>.weight, or NULL */
    const char *key_experts;  /* config keys ("a|b": a, else b) */
    const char *key_top_k;
    const char *key_intermediate;
    const char *key_shared_intermediate; /* the shared MLP's own size, or NULL */
    const char *key_shared_count;        /* or: count x key_intermediate, or NULL */
} mi4_family;

/* The family whose model_type (first) or architecture matches; NULL if none. */
const mi4_family *mi4_family_find(const char *model_type, const char *architecture);
/* "qwen2_moe, qwen3_moe, ..." (every row's model_type) for messages. */
void mi4_family_list(char *buffer, size_t capacity);

#endif
