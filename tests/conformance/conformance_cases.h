/* The conformance matrix: which layers and forwards every backend runs. */
#ifndef MOEINT4_TESTS_CONFORMANCE_CASES_H
#define MOEINT4_TESTS_CONFORMANCE_CASES_H

#include <stdint.h>

#include "moeint4.h"

/* What the weights are; consecutive cases with equal specs share one layer
 * (and one prepared handle per backend). */
typedef struct conf_layer_spec {
    moeint4_format format;
    int zero_offset;
    int group_size;
    int num_experts, hidden_size, intermediate_size;
    moeint4_dtype scales_dtype;
    int expert_map; /* 1: about a third of the experts map to -1 */
    int with_g_idx; /* g_idx arrays: trivial (k / group_size) ... */
    int act_order;  /* ... or act-order: g_idx[e][k] = ((11 k + e) mod IN) / group_size
                       (every group keeps group_size rows; GPTQ, grouped) */
    uint64_t seed;
} conf_layer_spec;

typedef struct conf_case {
    char name[160];
    conf_layer_spec layer;
    int64_t num_tokens;
    int topk;
    moeint4_dtype dtype;
    moeint4_activation activation;
    float limit, alpha, beta;
    int apply_router_weight_on_input;
    int large; /* full real-model size (MOEINT4_CONFORMANCE_SKIP_LARGE skips) */
    uint64_t seed;
} conf_case;

/* Fills up to `capacity` cases; returns how many there are in all. */
int conf_build_cases(conf_case *cases, int capacity);

const char *conf_dtype_name(moeint4_dtype dtype);

#endif
