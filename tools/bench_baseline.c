/* f32 weights + OpenBLAS sgemm per expert: the baseline the bench compares
 * the library with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "bench_baseline.h"

static int cli_dequantize(const tk_matrix *matrix, float **out)
{
    size_t count =
        (size_t)matrix->num_experts * (size_t)matrix->out_features * (size_t)matrix->in_features;
    *out = malloc(count * sizeof **out);
    if (*out == NULL) {
        fprintf(stderr, "moeint4: out of memory for the f32 baseline weights (%.1f GB)\n",
                count * 4.0 / 1e9);
        return CLI_EXIT_FAILURE;
    }
    moeint4_quant_matrix view = tk_matrix_view(matrix);
    moeint4_status status = moeint4_layout_dequantize_f32(&view, *out);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_layout_dequantize_f32", status);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

int cli_baseline_create(cli_baseline *baseline, const cli_session *session)
{
    memset(baseline, 0, sizeof *baseline);
    baseline->session = session;
    if (cli_dequantize(&session->layer.w13, &baseline->w13) != CLI_EXIT_OK ||
        cli_dequantize(&session->layer.w2, &baseline->w2) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    int experts = session->layer.num_experts;
    baseline->expert_start = malloc(((size_t)experts + 1) * sizeof *baseline->expert_start);
    return baseline->expert_start ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

static void cli_baseline_free_scratch(cli_baseline *baseline)
{
    free(baseline->x);
    free(baseline->gathered);
    free(baseline->gate_up);
    free(baseline->activated);
    free(baseline->down);
    free(baseline->out);
    free(baseline->slot_order);
    baseline->x = baseline->gathered = baseline->gate_up = NULL;
    baseline->activated = baseline->down = baseline->out = NULL;
    baseline->slot_order = NULL;
    baseline->capacity = 0;
}

void cli_baseline_destroy(cli_baseline *baseline)
{
    cli_baseline_free_scratch(baseline);
    free(baseline->w13);
    free(baseline->w2);
    free(baseline->expert_start);
    memset(baseline, 0, sizeof *baseline);
}

double cli_baseline_weight_bytes(const cli_baseline *baseline)
{
    const tk_layer *layer = &baseline->session->layer;
    return 4.0 * 3.0 * layer->num_experts * (double)layer->hidden_size * layer->intermediate_size;
}

static int cli_baseline_reserve(cli_baseline *baseline, int64_t num_tokens)
{
    if (num_tokens <= baseline->capacity)
        return CLI_EXIT_OK;
    cli_baseline_free_scratch(baseline);
    const tk_layer *layer = &baseline->session->layer;
    size_t m = (size_t)num_tokens, k = (size_t)layer->hidden_size;
    size_t n = (size_t)layer->intermediate_size;
    size_t slots = m * (size_t)baseline->session->options->preset->topk;
    baseline->x = malloc(m * k * sizeof(float));
    baseline->gathered = malloc(m * k * sizeof(float));
    baseline->gate_up = malloc(m * 2 * n * sizeof(float));
    baseline->activated = malloc(m * n * sizeof(float));
    baseline->down = malloc(m * k * sizeof(float));
    baseline->out = malloc(m * k * sizeof(float));
    baseline->slot_order = malloc(slots * sizeof(int64_t));
    if (!baseline->x || !baseline->gathered || !baseline->gate_up || !baseline->activated ||
        !baseline->down || !baseline->out || !baseline->slot_order) {
        cli_baseline_free_scratch(baseline);
        fprintf(stderr, "moeint4: out of memory for the baseline's scratch\n");
        return CLI_EXIT_FAILURE;
    }
    baseline->capacity = num_tokens;
    return CLI_EXIT_OK;
}

static float cli_activate(const tk_activation *act, float gate, float up)
{
    switch (act->kind) {
    case MOEINT4_ACTIVATION_GELU: return 0.5f * gate * (1.0f + erff(gate * 0.70710678f)) * up;
    case MOEINT4_ACTIVATION_SWIGLU_CLAMP: {
        float limit = (float)act->limit;
        float g = gate < limit ? gate : limit;
        float u = up < -limit ? -limit : (up > limit ? limit : up);
        return (u + (float)act->beta) * g / (1.0f + expf(-(float)act->alpha * g));
    }
    default: return gate / (1.0f + expf(-gate)) * up;
    }
}

/* Counting sort of the token slots by local expert; slots of non-local
 * experts (expert_map -1) are dropped, as the library does. */
static void cli_baseline_group(cli_baseline *baseline, int64_t slots, const int32_t *ids)
{
    const tk_layer *layer = &baseline->session->layer;
    const int local = layer->num_local_experts;
    int64_t *start = baseline->expert_start;
    memset(start, 0, ((size_t)local + 1) * sizeof *start);
    for (int64_t s = 0; s < slots; s++) {
        int e = layer->expert_map ? layer->expert_map[ids[s]] : ids[s];
        if (e >= 0)
            start[e + 1]++;
    }
    for (int e = 0; e < local; e++)
        start[e + 1] += start[e];
    for (int64_t s = 0; s < slots; s++) {
        int e = layer->expert_map ? layer->expert_map[ids[s]] : ids[s];
        if (e >= 0)
            baseline->slot_order[start[e]++] = s;
    }
    for (int e = local; e > 0; e--)
        start[e] = start[e - 1];
    start[0] = 0;
}

/* y[rows, out] = x[rows, in] . w[out, in]^T. One row goes to sgemv, which
 * OpenBLAS streams about twice as fast as a one-row sgemm here: the baseline
 * should be the best plain OpenBLAS use, not a strawman. */
static void cli_matmul_rows(int rows, int out, int in, const float *x, const float *w, float *y)
{
    if (rows == 1)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, w, in, x, 1, 0.0f, y, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, w, in,
                    0.0f, y, out);
}

int cli_baseline_forward(cli_baseline *baseline, int64_t num_tokens, const void *hidden,
                         const int32_t *ids, const float *router_weights, void *output)
{
    if (cli_baseline_reserve(baseline, num_tokens) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    const cli_session *session = baseline->session;
    const tk_activation *act = &session->activation;
    const moeint4_dtype dtype = session->options->dtype;
    const int topk = session->options->preset->topk;
    const int k = session->layer.hidden_size, n = session->layer.intermediate_size;
    const size_t values = (size_t)num_tokens * (size_t)k;

    for (size_t i = 0; i < values; i++)
        baseline->x[i] = (float)tk_load(dtype, hidden, i);
    memset(baseline->out, 0, values * sizeof(float));
    cli_baseline_group(baseline, num_tokens * topk, ids);

    for (int e = 0; e < session->layer.num_local_experts; e++) {
        const int64_t first = baseline->expert_start[e];
        const int rows = (int)(baseline->expert_start[e + 1] - first);
        if (rows == 0)
            continue;
        for (int r = 0; r < rows; r++) {
            int64_t slot = baseline->slot_order[first + r];
            float scale = act->apply_router_weight_on_input ? router_weights[slot] : 1.0f;
            const float *x = baseline->x + (size_t)(slot / topk) * (size_t)k;
            float *row = baseline->gathered + (size_t)r * (size_t)k;
            for (int i = 0; i < k; i++)
                row[i] = scale * x[i];
        }
        const float *w13 = baseline->w13 + (size_t)e * 2u * (size_t)n * (size_t)k;
        const float *w2 = baseline->w2 + (size_t)e * (size_t)k * (size_t)n;
        cli_matmul_rows(rows, 2 * n, k, baseline->gathered, w13, baseline->gate_up);
        for (int r = 0; r < rows; r++) {
            const float *gate_up = baseline->gate_up + (size_t)r * 2u * (size_t)n;
            float *activated = baseline->activated + (size_t)r * (size_t)n;
            for (int i = 0; i < n; i++)
                activated[i] = cli_activate(act, gate_up[i], gate_up[n + i]);
        }
        cli_matmul_rows(rows, k, n, baseline->activated, w2, baseline->down);
        for (int r = 0; r < rows; r++) {
            int64_t slot = baseline->slot_order[first + r];
            float scale = act->apply_router_weight_on_input ? 1.0f : router_weights[slot];
            float *out = baseline->out + (size_t)(slot / topk) * (size_t)k;
            const float *down = baseline->down + (size_t)r * (size_t)k;
            for (int i = 0; i < k; i++)
                out[i] += scale * down[i];
        }
    }
    if (dtype == MOEINT4_DTYPE_F32) {
        memcpy(output, baseline->out, values * sizeof(float));
    } else {
        uint16_t *half = output;
        for (size_t i = 0; i < values; i++)
            half[i] = dtype == MOEINT4_DTYPE_BF16 ? tk_f32_to_bf16(baseline->out[i])
                                                  : tk_f32_to_f16(baseline->out[i]);
    }
    return CLI_EXIT_OK;
}
