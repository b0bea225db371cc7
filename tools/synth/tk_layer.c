/* Synthetic layers: whole MoE layers, routing and the public-ABI descriptor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

/* Scale so that a projection keeps the variance of its input: with x of
 * variance v, h_o = sum_i (q - z) s x_i has variance
 *   IN * E[(q - z)^2] * E[s^2] * v,
 * where q is uniform on 0..15, s = base * U[0.5, 1.5] (E[s^2] = 13/12 base^2)
 * and E[(q - z)^2] = 21.5 for GPTQ_SYM (z = 8) or 42.5 + offset^2 when z is
 * itself uniform on 0..15 (+ offset). Setting the product to 1 gives unit
 * gain. SiLU/GELU-and-mul then shrink the rms to about 0.6, so outputs stay
 * between roughly 0.2 and 1: well inside every dtype's range. */
double tk_unit_gain_scale(moeint4_format format, int zero_offset, int in_features)
{
    double mean_square =
        format == MOEINT4_FORMAT_GPTQ_SYM ? 21.5 : 42.5 + zero_offset * zero_offset;
    return 1.0 / sqrt((double)in_features * mean_square * 13.0 / 12.0);
}

static void shuffle(tk_rng *rng, int32_t *values, int count)
{
    for (int i = count - 1; i > 0; i--) {
        int j = tk_rng_below(rng, i + 1);
        int32_t t = values[i];
        values[i] = values[j];
        values[j] = t;
    }
}

int tk_layer_random(tk_layer *layer, moeint4_format format, int zero_offset, int num_experts,
                    int hidden_size, int intermediate_size, int group_size,
                    moeint4_dtype scales_dtype, int expert_map_mode, tk_rng *rng)
{
    memset(layer, 0, sizeof *layer);
    if (num_experts < 1)
        return -1;
    layer->num_experts = num_experts;
    layer->num_local_experts = num_experts;
    layer->hidden_size = hidden_size;
    layer->intermediate_size = intermediate_size;
    layer->group_size = group_size;
    layer->format = format;
    layer->zero_offset = zero_offset;
    if (expert_map_mode == 1) {
        /* About a third of the experts live elsewhere (-1); the rest get
         * shuffled local ids so global and local order differ. */
        int local = num_experts - num_experts / 3;
        layer->num_local_experts = local;
        layer->expert_map = malloc((size_t)num_experts * sizeof *layer->expert_map);
        int32_t *local_ids = malloc((size_t)num_experts * sizeof *local_ids);
        if (!layer->expert_map || !local_ids) {
            free(local_ids);
            tk_layer_free(layer);
            return -1;
        }
        for (int i = 0; i < num_experts; i++)
            local_ids[i] = i < local ? i : -1;
        shuffle(rng, local_ids, num_experts);
        memcpy(layer->expert_map, local_ids, (size_t)num_experts * sizeof *local_ids);
        free(local_ids);
    }
    int local = layer->num_local_experts;
    if (tk_matrix_random(&layer->w13, format, zero_offset, local, hidden_size,
                         2 * intermediate_size, group_size, scales_dtype,
                         tk_unit_gain_scale(format, zero_offset, hidden_size), 0, rng) != 0 ||
        tk_matrix_random(&layer->w2, format, zero_offset, local, intermediate_size, hidden_size,
                         group_size, scales_dtype,
                         tk_unit_gain_scale(format, zero_offset, intermediate_size), 0, rng) != 0) {
        tk_layer_free(layer);
        return -1;
    }
    return 0;
}

void tk_layer_free(tk_layer *layer)
{
    free(layer->expert_map);
    tk_matrix_free(&layer->w13);
    tk_matrix_free(&layer->w2);
    memset(layer, 0, sizeof *layer);
}

moeint4_weights_desc tk_layer_desc(const tk_layer *layer)
{
    moeint4_weights_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    desc.num_experts = layer->num_experts;
    desc.num_local_experts = layer->num_local_experts;
    desc.expert_map = layer->expert_map;
    desc.hidden_size = layer->hidden_size;
    desc.intermediate_size = layer->intermediate_size;
    desc.group_size = layer->group_size;
    desc.format = layer->format;
    desc.zero_offset = layer->zero_offset;
    desc.scales_dtype = layer->w13.scales_dtype;
    desc.w13_qweight = layer->w13.qweight;
    desc.w13_scales = layer->w13.scales;
    desc.w13_qzeros = layer->w13.qzeros;
    desc.w13_g_idx = layer->w13.g_idx;
    desc.w2_qweight = layer->w2.qweight;
    desc.w2_scales = layer->w2.scales;
    desc.w2_qzeros = layer->w2.qzeros;
    desc.w2_g_idx = layer->w2.g_idx;
    return desc;
}

void tk_route_random(tk_rng *rng, int64_t num_tokens, int num_experts, int topk, int32_t *ids,
                     float *weights)
{
    /* logits [num_experts] then the picked ones [topk] */
    double *logits = malloc((size_t)(num_experts + topk) * sizeof *logits);
    if (!logits)
        return;
    double *picked = logits + num_experts;
    for (int64_t m = 0; m < num_tokens; m++) {
        for (int e = 0; e < num_experts; e++)
            logits[e] = tk_rng_normal(rng);
        /* Pick the k largest (picked ones are marked -inf); softmax restricted
         * to the picked set = the full softmax renormalised over them. */
        double top = 0.0, sum = 0.0;
        for (int j = 0; j < topk; j++) {
            int best = 0;
            for (int e = 1; e < num_experts; e++)
                if (logits[e] > logits[best])
                    best = e;
            ids[m * topk + j] = best;
            picked[j] = logits[best];
            if (j == 0)
                top = logits[best];
            logits[best] = -INFINITY;
        }
        for (int j = 0; j < topk; j++)
            sum += exp(picked[j] - top);
        for (int j = 0; j < topk; j++)
            weights[m * topk + j] = (float)(exp(picked[j] - top) / sum);
    }
    free(logits);
}

int tk_layer_add_g_idx(tk_layer *layer)
{
    return tk_matrix_add_g_idx(&layer->w13) == 0 && tk_matrix_add_g_idx(&layer->w2) == 0 ? 0 : -1;
}
