/* The conformance matrix. Small odd-sized layers cover every format x group
 * size (16 combinations), each with 14 variants that cycle through the
 * activations, dtypes, scale dtypes, expert maps, router-weight placement,
 * token counts and top-k; a few full-size layers follow. */
#include <stdio.h>
#include <string.h>

#include "conformance_cases.h"
#include "testkit.h"

#define VARIANTS_PER_COMBINATION 14

typedef struct format_choice {
    const char *name;
    moeint4_format format;
    int zero_offset;
} format_choice;

static const format_choice formats[] = {
    { "gptq_sym", MOEINT4_FORMAT_GPTQ_SYM, 0 },
    { "gptq_asym", MOEINT4_FORMAT_GPTQ_ASYM, 0 },
    { "gptq_asym_v1", MOEINT4_FORMAT_GPTQ_ASYM, 1 },
    { "awq", MOEINT4_FORMAT_AWQ, 0 },
};
static const int group_sizes[] = { 32, 64, 128, -1 };

/* K and N per group size: multiples of 8 and of the group, but odd
 * multiples of it (so not of 2 * group), to catch tiling that assumes more. */
static const int sizes_for_group_32[] = { 32, 96, 160, 224 };
static const int sizes_for_group_64[] = { 64, 192, 320, 64 };
static const int sizes_for_group_128[] = { 128, 384, 128, 640 };
static const int sizes_per_channel[] = { 8, 24, 40, 56, 72, 136, 200, 24 };

static const int64_t token_counts[] = { 1, 2, 3, 7, 33, 100, 300 };
static const int expert_counts[] = { 1, 2, 3, 4, 5, 8, 16 };

static int pick_size(int group_size, int index)
{
    switch (group_size) {
    case 32: return sizes_for_group_32[index % 4];
    case 64: return sizes_for_group_64[index % 4];
    case 128: return sizes_for_group_128[index % 4];
    default: return sizes_per_channel[index % 8];
    }
}

const char *conf_dtype_name(moeint4_dtype dtype)
{
    return dtype == MOEINT4_DTYPE_F32 ? "f32" : dtype == MOEINT4_DTYPE_F16 ? "f16" : "bf16";
}

static const char *activation_name(moeint4_activation activation)
{
    return activation == MOEINT4_ACTIVATION_SILU   ? "silu"
           : activation == MOEINT4_ACTIVATION_GELU ? "gelu"
                                                   : "swiglu";
}

static void name_case(conf_case *c, const char *format_name)
{
    const conf_layer_spec *l = &c->layer;
    snprintf(c->name, sizeof c->name, "%s%s_g%d_%s_%s_s%s_E%d_top%d_K%d_N%d_M%lld%s%s%s",
             c->large ? "large_" : "", format_name, l->group_size, activation_name(c->activation),
             conf_dtype_name(c->dtype), conf_dtype_name(l->scales_dtype), l->num_experts, c->topk,
             l->hidden_size, l->intermediate_size, (long long)c->num_tokens,
             l->expert_map ? "_map" : "", c->apply_router_weight_on_input ? "_rwi" : "",
             l->act_order    ? "_actorder"
             : l->with_g_idx ? "_gidx"
                             : "");
}

static void set_activation(conf_case *c, int which, int limit_choice)
{
    static const float limits[] = { 7.0f, 1.0f, 0.5f }; /* small limits make the clamps bite */
    c->activation = (moeint4_activation)which;
    if (c->activation == MOEINT4_ACTIVATION_SWIGLU_CLAMP) {
        c->limit = limits[limit_choice];
        c->alpha = 1.702f;
        c->beta = 1.0f;
    }
}

/* Variant v of format f x group g. The activation x dtype pair cycles
 * through all 9 combinations and the token count through all 7 values; the
 * rest is drawn from a generator seeded by (f, g, v), so it is fixed but not
 * correlated with those cycles. */
static void small_case(conf_case *c, int f, int g, int v)
{
    int combination = f * 4 + g;
    tk_rng rng;
    tk_rng_seed(&rng, 0xc0f0u + (uint64_t)combination * 100u + (uint64_t)v);
    memset(c, 0, sizeof *c);
    conf_layer_spec *l = &c->layer;
    l->format = formats[f].format;
    l->zero_offset = formats[f].zero_offset;
    l->group_size = group_sizes[g];
    l->scales_dtype = tk_rng_below(&rng, 2) ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16;
    l->expert_map = tk_rng_below(&rng, 3) == 0;
    l->with_g_idx = tk_rng_below(&rng, 5) == 0;
    l->num_experts = expert_counts[tk_rng_below(&rng, 7)];
    if (l->expert_map && l->num_experts < 3)
        l->num_experts = 4; /* so that some experts really map to -1 */
    /* half the g_idx cases of GPTQ with groups act-order (no draw: the other
     * choices stay as they were) */
    l->act_order =
        l->with_g_idx && l->format != MOEINT4_FORMAT_AWQ && l->group_size != -1 && v % 2 == 0;
    l->hidden_size = pick_size(l->group_size, tk_rng_below(&rng, 8));
    l->intermediate_size = pick_size(l->group_size, tk_rng_below(&rng, 8));
    l->seed = 1000u + (uint64_t)combination * 100u + (uint64_t)v;

    c->num_tokens = token_counts[(v + 2 * combination) % 7];
    c->topk = 1 + tk_rng_below(&rng, 8);
    if (c->topk > l->num_experts)
        c->topk = l->num_experts;
    if (c->num_tokens >= 100) {
        /* Many tokens: keep the layer small and the experts few so each
         * expert sees dozens of tokens (a CPU backend's many-token path). */
        l->hidden_size = pick_size(l->group_size, 0);
        l->intermediate_size = pick_size(l->group_size, 1);
        if (l->num_experts > 4)
            l->num_experts = 4;
        if (c->topk > 2)
            c->topk = 2;
    }
    c->dtype = (moeint4_dtype)(1 + (v / 3 + combination) % 3);
    set_activation(c, (v + combination) % 3, tk_rng_below(&rng, 3));
    c->apply_router_weight_on_input = tk_rng_below(&rng, 4) == 0;
    c->seed = 7000u + (uint64_t)combination * 100u + (uint64_t)v;
    name_case(c, formats[f].name);
}

/* Full-size layers with few tokens: the shapes real engines run. */
typedef struct large_layer {
    int format_index, num_experts, hidden_size, intermediate_size, group_size, topk;
    moeint4_dtype dtype, scales_dtype;
    int max_tokens;
} large_layer;

static const large_layer large_layers[] = {
    { 0, 128, 2048, 768, 128, 8, MOEINT4_DTYPE_BF16, MOEINT4_DTYPE_F16, 4 }, /* Qwen3-30B-A3B */
    { 3, 128, 2048, 768, 128, 8, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16, 1 },
    { 1, 8, 4096, 14336, 128, 2, MOEINT4_DTYPE_BF16, MOEINT4_DTYPE_F16, 2 }, /* Mixtral-8x7B */
};

int conf_build_cases(conf_case *cases, int capacity)
{
    int count = 0;
    conf_case c;
    for (int f = 0; f < 4; f++)
        for (int g = 0; g < 4; g++)
            for (int v = 0; v < VARIANTS_PER_COMBINATION; v++) {
                small_case(&c, f, g, v);
                if (count < capacity)
                    cases[count] = c;
                count++;
            }
    for (size_t i = 0; i < sizeof large_layers / sizeof large_layers[0]; i++) {
        const large_layer *big = &large_layers[i];
        for (int m = 1; m <= big->max_tokens; m++) {
            memset(&c, 0, sizeof c);
            c.large = 1;
            c.layer.format = formats[big->format_index].format;
            c.layer.zero_offset = formats[big->format_index].zero_offset;
            c.layer.group_size = big->group_size;
            c.layer.num_experts = big->num_experts;
            c.layer.hidden_size = big->hidden_size;
            c.layer.intermediate_size = big->intermediate_size;
            c.layer.scales_dtype = big->scales_dtype;
            c.layer.seed = 50000u + i; /* same spec for every m: the layer is shared */
            c.num_tokens = m;
            c.topk = big->topk;
            c.dtype = big->dtype;
            c.activation = MOEINT4_ACTIVATION_SILU;
            c.seed = 60000u + 10u * i + (uint64_t)m;
            name_case(&c, formats[big->format_index].name);
            if (count < capacity)
                cases[count] = c;
            count++;
        }
    }
    return count;
}
