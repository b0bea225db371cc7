/* Every MoE layer of every generated checkpoint, read through the public
 * API, against what the generator wrote: the layer's info (shapes, format,
 * zero convention, group size, act-order, shared experts) matches
 * expect.json; the stacked description dequantizes to exactly the generator's
 * dense weights; and the CPU forward matches a double-precision reference
 * computed from those dense weights, for the routed experts and for a
 * quantized shared expert. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint_test_util.h"
#include "moeint4.h"
#include "testkit.h"

#define TOKENS 7

static const char *const checkpoints[] = {
    "qwen3_moe_gptq_v1_act_order", "qwen2_moe_gptq_sym_shared", "mixtral_awq_gemm_g64",
    "deepseek_v2_gptq_v2",         "qwen3_moe_gptq_fused",
};

static int json_int(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v) || cJSON_IsBool(v));
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : v->valueint;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* out[M][K] in double: sum_j w * W2[e] silu-and-mul(W13[e] x). */
static void reference(const float *w13, const float *w2, int K, int N, const float *x,
                      const int32_t *ids, const float *weights, int M, int topk, double *out)
{
    double *h = malloc(sizeof(double) * 3 * (size_t)N);
    assert_non_null(h);
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            out[(size_t)m * K + k] = 0.0;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < topk; j++) {
            int e = ids[m * topk + j];
            const float *a = w13 + (size_t)e * 2 * N * K;
            for (int o = 0; o < 2 * N; o++) {
                double s = 0.0;
                for (int k = 0; k < K; k++)
                    s += (double)a[(size_t)o * K + k] * x[(size_t)m * K + k];
                h[o] = s;
            }
            double *act = h + 2 * N;
            for (int n = 0; n < N; n++)
                act[n] = h[n] / (1.0 + exp(-h[n])) * h[N + n];
            const float *b = w2 + (size_t)e * K * N;
            for (int k = 0; k < K; k++) {
                double s = 0.0;
                for (int n = 0; n < N; n++)
                    s += (double)b[(size_t)k * N + n] * act[n];
                out[(size_t)m * K + k] += weights[m * topk + j] * s;
            }
        }
    free(h);
}

/* The description dequantizes to exactly the generator's dense weights. */
static void check_dense(const moeint4_weights_desc *d, const char *name, const char *file13,
                        const char *file2)
{
    int E = d->num_local_experts, K = d->hidden_size, N = d->intermediate_size;
    size_t n13 = (size_t)E * 2 * N * K, n2 = (size_t)E * K * N;
    float *want13 = ck_read_f32(ck_path(name, file13), n13);
    float *want2 = ck_read_f32(ck_path(name, file2), n2);
    assert_non_null(want13);
    assert_non_null(want2);
    float *got = malloc(sizeof(float) * (n13 > n2 ? n13 : n2));
    assert_non_null(got);
    moeint4_quant_matrix m = { .struct_size = sizeof m,
                               .format = d->format,
                               .zero_offset = d->zero_offset,
                               .num_experts = E,
                               .in_features = K,
                               .out_features = 2 * N,
                               .group_size = d->group_size,
                               .scales_dtype = d->scales_dtype,
                               .qweight = d->w13_qweight,
                               .scales = d->w13_scales,
                               .qzeros = d->w13_qzeros,
                               .g_idx = d->w13_g_idx };
    assert_int_equal(moeint4_layout_dequantize_f32(&m, got), MOEINT4_SUCCESS);
    for (size_t i = 0; i < n13; i++)
        if (got[i] != want13[i])
            fail_msg("%s %s: w13 value %zu is %g, the generator wrote %g", name, file13, i,
                     (double)got[i], (double)want13[i]);
    m.in_features = N;
    m.out_features = K;
    m.qweight = d->w2_qweight;
    m.scales = d->w2_scales;
    m.qzeros = d->w2_qzeros;
    m.g_idx = d->w2_g_idx;
    assert_int_equal(moeint4_layout_dequantize_f32(&m, got), MOEINT4_SUCCESS);
    for (size_t i = 0; i < n2; i++)
        if (got[i] != want2[i])
            fail_msg("%s %s: w2 value %zu is %g, the generator wrote %g", name, file2, i,
                     (double)got[i], (double)want2[i]);
    free(got);
    free(want13);
    free(want2);
}

/* CPU forward (F32) of prepared weights against the double reference. */
static void check_forward(moeint4_context *ctx, const moeint4_weights *w, const char *name,
                          const char *file13, const char *file2, int E, int K, int N, int topk,
                          uint64_t seed)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    float *x = malloc(sizeof(float) * TOKENS * K);
    float *out = malloc(sizeof(float) * TOKENS * K);
    double *ref = malloc(sizeof(double) * TOKENS * K);
    int32_t ids[TOKENS * 8];
    float weights[TOKENS * 8];
    assert_true(x && out && ref && topk <= 8);
    tk_route_random(&rng, TOKENS, E, topk, ids, weights);
    tk_fill_activations(&rng, MOEINT4_DTYPE_F32, (size_t)TOKENS * K, 1.0, x);
    tk_poison(out, sizeof(float) * TOKENS * K);
    moeint4_forward_args a = { .struct_size = sizeof a,
                               .dtype = MOEINT4_DTYPE_F32,
                               .num_tokens = TOKENS,
                               .topk = topk,
                               .hidden_states = x,
                               .topk_ids = ids,
                               .topk_weights = weights,
                               .output = out,
                               .activation = MOEINT4_ACTIVATION_SILU };
    assert_int_equal(moeint4_forward(ctx, w, &a), MOEINT4_SUCCESS);
    float *w13 = ck_read_f32(ck_path(name, file13), (size_t)E * 2 * N * K);
    float *w2 = ck_read_f32(ck_path(name, file2), (size_t)E * K * N);
    assert_true(w13 && w2);
    reference(w13, w2, K, N, x, ids, weights, TOKENS, topk, ref);
    double max_ref = 0.0, max_err = 0.0;
    for (int i = 0; i < TOKENS * K; i++) {
        assert_false(isnan(out[i]));
        max_ref = fmax(max_ref, fabs(ref[i]));
        max_err = fmax(max_err, fabs(out[i] - ref[i]));
    }
    assert_true(max_ref > 0.0);
    if (max_err > 1e-5 * max_ref)
        fail_msg("%s %s: max |out - ref| = %g with max |ref| = %g", name, file13, max_err, max_ref);
    free(w13);
    free(w2);
    free(x);
    free(out);
    free(ref);
}

static void check_layer_info(const moeint4_checkpoint_layer_info *info, const cJSON *expect)
{
    assert_int_equal(info->num_experts, json_int(expect, "num_experts"));
    assert_int_equal(info->hidden_size, json_int(expect, "hidden_size"));
    assert_int_equal(info->intermediate_size, json_int(expect, "intermediate_size"));
    assert_int_equal(info->top_k, json_int(expect, "top_k"));
    assert_int_equal(info->group_size, json_int(expect, "group_size"));
    assert_int_equal(info->act_order, json_int(expect, "act_order"));
    assert_int_equal(info->fused_experts, json_int(expect, "fused"));
    const char *format = json_str(expect, "format"), *zeros = json_str(expect, "zeros");
    assert_int_equal(info->format, strcmp(format, "awq") == 0        ? MOEINT4_FORMAT_AWQ
                                   : strcmp(format, "gptq_sym") == 0 ? MOEINT4_FORMAT_GPTQ_SYM
                                                                     : MOEINT4_FORMAT_GPTQ_ASYM);
    moeint4_zero_convention z = strcmp(zeros, "awq") == 0       ? MOEINT4_ZEROS_AWQ
                                : strcmp(zeros, "gptq_v2") == 0 ? MOEINT4_ZEROS_GPTQ_V2
                                                                : MOEINT4_ZEROS_GPTQ_V1;
    assert_int_equal(info->zeros, z);
    assert_int_equal(info->zero_offset,
                     z == MOEINT4_ZEROS_GPTQ_V1 && info->format == MOEINT4_FORMAT_GPTQ_ASYM);
    assert_string_equal(info->router_dtype, json_str(expect, "router_dtype"));
    int shared = json_int(expect, "shared_intermediate_size");
    assert_int_equal(info->shared_intermediate_size, shared);
    assert_int_equal(info->shared_quantized, shared > 0);
    assert_true(info->expert_bytes > 0);
}

static void test_every_layer(void **state)
{
    (void)state;
    moeint4_context_options o = { .struct_size = sizeof o, .backend = MOEINT4_BACKEND_CPU };
    moeint4_context *ctx;
    assert_int_equal(moeint4_context_create(&o, &ctx), MOEINT4_SUCCESS);
    for (size_t c = 0; c < sizeof checkpoints / sizeof checkpoints[0]; c++) {
        const char *name = checkpoints[c];
        char expected_dir[256];
        snprintf(expected_dir, sizeof expected_dir, "%s.expected", name);
        cJSON *expect = ck_read_json(ck_path(expected_dir, "expect.json"));
        assert_non_null(expect);
        moeint4_checkpoint *ck;
        if (moeint4_checkpoint_open(ck_path(name, NULL), NULL, &ck) != MOEINT4_SUCCESS)
            fail_msg("%s: %s", name, moeint4_last_error());
        moeint4_checkpoint_info info = { .struct_size = sizeof info };
        assert_int_equal(moeint4_checkpoint_query(ck, &info), MOEINT4_SUCCESS);
        assert_string_equal(info.model_type, json_str(expect, "family"));
        assert_string_equal(info.quant_source, json_str(expect, "quant_source"));
        assert_int_equal(info.num_files, json_int(expect, "files"));
        const cJSON *layers = cJSON_GetObjectItemCaseSensitive(expect, "moe_layers");
        int want = cJSON_GetArraySize(layers), count = 0, numbers[16];
        assert_int_equal(moeint4_checkpoint_layers(ck, numbers, 16, &count), MOEINT4_SUCCESS);
        assert_int_equal(count, want);
        assert_int_equal(info.num_moe_layers, want);
        for (int i = 0; i < count; i++) {
            int layer = cJSON_GetArrayItem(layers, i)->valueint;
            assert_int_equal(numbers[i], layer);
            moeint4_checkpoint_layer_info li = { .struct_size = sizeof li };
            assert_int_equal(moeint4_checkpoint_layer_query(ck, layer, &li), MOEINT4_SUCCESS);
            assert_int_equal(li.layer, layer);
            check_layer_info(&li, expect);
            char f13[64], f2[64];
            snprintf(f13, sizeof f13, "L%d.w13.f32", layer);
            snprintf(f2, sizeof f2, "L%d.w2.f32", layer);
            moeint4_weights_desc d = { .struct_size = sizeof d };
            assert_int_equal(moeint4_checkpoint_layer_desc(ck, layer, &d), MOEINT4_SUCCESS);
            assert_int_equal(d.w13_g_idx != NULL, li.act_order);
            check_dense(&d, expected_dir, f13, f2);
            moeint4_weights *w;
            if (moeint4_weights_prepare(ctx, &d, &w) != MOEINT4_SUCCESS)
                fail_msg("%s layer %d: %s", name, layer, moeint4_last_error());
            check_forward(ctx, w, expected_dir, f13, f2, li.num_experts, li.hidden_size,
                          li.intermediate_size, li.top_k, 100 + (uint64_t)layer);
            moeint4_weights_release(w);
            /* the convenience call gives the same layer */
            assert_int_equal(moeint4_checkpoint_release_layer(ck, layer), MOEINT4_SUCCESS);
            assert_int_equal(moeint4_checkpoint_prepare(ctx, ck, layer, &w), MOEINT4_SUCCESS);
            check_forward(ctx, w, expected_dir, f13, f2, li.num_experts, li.hidden_size,
                          li.intermediate_size, li.top_k, 200 + (uint64_t)layer);
            moeint4_weights_release(w);
            if (li.shared_quantized) {
                moeint4_weights_desc sd = { .struct_size = sizeof sd };
                assert_int_equal(moeint4_checkpoint_shared_desc(ck, layer, &sd), MOEINT4_SUCCESS);
                assert_int_equal(sd.num_experts, 1);
                assert_int_equal(sd.intermediate_size, li.shared_intermediate_size);
                snprintf(f13, sizeof f13, "L%d.shared_w13.f32", layer);
                snprintf(f2, sizeof f2, "L%d.shared_w2.f32", layer);
                check_dense(&sd, expected_dir, f13, f2);
                assert_int_equal(moeint4_weights_prepare(ctx, &sd, &w), MOEINT4_SUCCESS);
                check_forward(ctx, w, expected_dir, f13, f2, 1, li.hidden_size,
                              li.shared_intermediate_size, 1, 300 + (uint64_t)layer);
                moeint4_weights_release(w);
            }
        }
        char warnings[1024];
        size_t length = 0;
        assert_int_equal(moeint4_checkpoint_warnings(ck, warnings, sizeof warnings, &length),
                         MOEINT4_SUCCESS);
        if (length != 0)
            fail_msg("%s: unexpected warnings: %s", name, warnings);
        moeint4_checkpoint_close(ck);
        cJSON_Delete(expect);
    }
    moeint4_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ck_generated_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_layer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
