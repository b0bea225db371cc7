/* The double-precision scalar reference MoE. It reads only the natural-order
 * codes, zeros and scales of a synthetic layer (never the packed checkpoint
 * arrays, never library code), so a packing or layout bug anywhere else
 * cannot hide in it. Part of moeint4_synth (libc/libm only). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

/* y[OUT] = W[e] x, in double: per group, sum (code - zero) * x exactly-ish
 * in double, then one multiply by the group's scale; with a g_idx (groups
 * not contiguous when act-order), each column times its own group's. */
static void project(const tk_matrix *m, int e, const double *x, double *y)
{
    int in = m->in_features, out = m->out_features;
    int group = m->group_size == -1 ? in : m->group_size;
    for (int o = 0; o < out; o++) {
        const uint8_t *codes = m->codes + ((size_t)e * out + o) * in;
        double sum = 0.0;
        if (m->g_idx) {
            for (int i = 0; i < in; i++)
                sum += (double)(codes[i] - tk_matrix_zero(m, e, o, i)) *
                       tk_matrix_scale(m, e, o, i) * x[i];
            y[o] = sum;
            continue;
        }
        for (int g = 0; g < m->num_groups; g++) {
            int zero = tk_matrix_zero(m, e, o, g * group);
            double acc = 0.0;
            for (int i = g * group; i < (g + 1) * group; i++)
                acc += (double)(codes[i] - zero) * x[i];
            sum += acc * tk_matrix_scale(m, e, o, g * group);
        }
        y[o] = sum;
    }
}

static double sigmoid(double v) { return 1.0 / (1.0 + exp(-v)); }

/* gate = h[0..N), up = h[N..2N) -> a[N], per include/moeint4.h. */
static void activate(const tk_activation *act, const double *h, int n, double *a)
{
    for (int i = 0; i < n; i++) {
        double gate = h[i], up = h[n + i];
        switch (act->kind) {
        case MOEINT4_ACTIVATION_GELU: a[i] = 0.5 * gate * (1.0 + erf(gate / sqrt(2.0))) * up; break;
        case MOEINT4_ACTIVATION_SWIGLU_CLAMP: {
            double g = fmin(gate, act->limit);
            double u = fmax(fmin(up, act->limit), -act->limit);
            a[i] = (u + act->beta) * g * sigmoid(act->alpha * g);
            break;
        }
        case MOEINT4_ACTIVATION_SILU:
        default: a[i] = gate * sigmoid(gate) * up; break;
        }
    }
}

void tk_reference_moe(const tk_layer *layer, moeint4_dtype dtype, const void *hidden,
                      int64_t num_tokens, int topk, const int32_t *ids, const float *weights,
                      const tk_activation *act, const int64_t *row_list, int64_t num_rows,
                      double *out)
{
    int k = layer->hidden_size, n = layer->intermediate_size;
    int64_t rows = row_list ? num_rows : num_tokens;
    double *x = malloc((size_t)k * sizeof *x);
    double *h = malloc((size_t)2 * n * sizeof *h);
    double *a = malloc((size_t)n * sizeof *a);
    double *y = malloc((size_t)k * sizeof *y);
    if (!x || !h || !a || !y || !layer->w13.codes || !layer->w2.codes) {
        /* No memory, or natural codes dropped: an answer no test can pass. */
        for (size_t i = 0; i < (size_t)rows * (size_t)k; i++)
            out[i] = NAN;
        free(x), free(h), free(a), free(y);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        int64_t m = row_list ? row_list[r] : r;
        double *row = out + (size_t)r * k;
        memset(row, 0, (size_t)k * sizeof *row);
        for (int j = 0; j < topk; j++) {
            int global = ids[m * topk + j];
            int e = layer->expert_map ? layer->expert_map[global] : global;
            if (e < 0)
                continue; /* expert lives elsewhere: contributes nothing here */
            double w = weights[m * topk + j];
            double input_scale = act->apply_router_weight_on_input ? w : 1.0;
            double output_scale = act->apply_router_weight_on_input ? 1.0 : w;
            for (int i = 0; i < k; i++)
                x[i] = input_scale * tk_load(dtype, hidden, (size_t)m * k + i);
            project(&layer->w13, e, x, h);
            activate(act, h, n, a);
            project(&layer->w2, e, a, y);
            for (int i = 0; i < k; i++)
                row[i] += output_scale * y[i];
        }
    }
    free(x), free(h), free(a), free(y);
}
