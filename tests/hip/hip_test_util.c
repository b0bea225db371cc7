#include "hip_test_util.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

int hip_test_available(void)
{
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (moeint4_backend_query(MOEINT4_BACKEND_HIP, &info) != MOEINT4_SUCCESS) {
        printf("hip backend unknown to the registry: %s\n", moeint4_last_error());
        return 0;
    }
    if (!info.compiled || !info.available) {
        printf("hip backend not available: %s\n", info.reason);
        return 0;
    }
    return 1;
}

int hip_test_weights_env_is(const char *mode)
{
    const char *v = getenv("MOEINT4_HIP_WEIGHTS");
    return v != NULL && strcasecmp(v, mode) == 0;
}

char *hip_test_env_save(const char *name)
{
    const char *value = getenv(name);
    char *saved = value ? strdup(value) : NULL;
    assert_true(value == NULL || saved != NULL);
    return saved;
}

void hip_test_env_restore(const char *name, char *saved)
{
    if (saved)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
}

moeint4_context *hip_test_context(const char *gemm)
{
    if (gemm)
        setenv("MOEINT4_HIP_GEMM", gemm, 1);
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_HIP;
    moeint4_context *ctx = NULL;
    moeint4_status status = moeint4_context_create(&options, &ctx);
    if (status != MOEINT4_SUCCESS)
        print_error("moeint4_context_create(hip): %s: %s\n", moeint4_status_string(status),
                    moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);
    return ctx;
}

moeint4_weights *hip_test_prepare(moeint4_context *ctx, tk_layer *layer, moeint4_format format,
                                  int num_experts, int hidden, int intermediate, int group_size,
                                  int expert_map_mode, uint64_t seed)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    int zero_offset = 0;
    assert_int_equal(tk_layer_random(layer, format, zero_offset, num_experts, hidden, intermediate,
                                     group_size, MOEINT4_DTYPE_F16, expert_map_mode, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(layer);
    moeint4_weights *weights = NULL;
    moeint4_status status = moeint4_weights_prepare(ctx, &desc, &weights);
    if (status != MOEINT4_SUCCESS)
        print_error("moeint4_weights_prepare: %s: %s\n", moeint4_status_string(status),
                    moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);
    return weights;
}

void *hip_test_upload(moeint4_context *ctx, const void *host, size_t bytes)
{
    void *device = NULL;
    assert_int_equal(moeint4_memory_alloc(ctx, bytes, &device), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_memory_copy(ctx, device, host, bytes, MOEINT4_COPY_HOST_TO_DEVICE),
                     MOEINT4_SUCCESS);
    return device;
}

moeint4_status hip_test_forward(moeint4_context *ctx, const moeint4_weights *weights,
                                const tk_layer *layer, const hip_test_case *c, void *got,
                                double *want)
{
    int64_t m = c->num_tokens;
    size_t count = (size_t)m * (size_t)layer->hidden_size;
    size_t slots = (size_t)m * (size_t)c->topk;
    size_t element = tk_dtype_size(c->dtype), bytes = count * element;
    void *hidden = malloc(bytes + element);
    int32_t *ids = malloc(slots * sizeof *ids + 4);
    float *router = malloc(slots * sizeof *router + 4);
    assert_non_null(hidden);
    assert_non_null(ids);
    assert_non_null(router);
    tk_rng rng;
    tk_rng_seed(&rng, c->seed);
    tk_fill_activations(&rng, c->dtype, count, 1.0, hidden);
    tk_route_random(&rng, m, layer->num_experts, c->topk, ids, router);
    for (size_t i = 0; i < slots; i++)
        router[i] *= (float)tk_rng_range(&rng, 0.5, 1.5);
    if (want) {
        tk_activation act = { c->activation, c->limit, c->alpha, c->beta, c->on_input };
        tk_reference_moe(layer, c->dtype, hidden, m, c->topk, ids, router, &act, NULL, 0, want);
    }
    /* The device input, shifted by one element when asked (bf16 rows then
     * lose their 16-byte alignment). */
    size_t shift = c->misalign ? element : 0;
    char *staged = malloc(bytes + element);
    assert_non_null(staged);
    memset(staged, 0, bytes + element);
    memcpy(staged + shift, hidden, bytes);
    char *d_hidden = hip_test_upload(ctx, staged, bytes + element);
    void *d_ids = hip_test_upload(ctx, ids, slots * sizeof *ids + 4);
    void *d_router = hip_test_upload(ctx, router, slots * sizeof *router + 4);
    tk_poison(got, bytes);
    void *d_out = hip_test_upload(ctx, got, bytes ? bytes : 1);

    tk_activation act = { c->activation, c->limit, c->alpha, c->beta, c->on_input };
    moeint4_forward_args args =
        tk_forward_args(c->dtype, m, c->topk, d_hidden + shift, d_ids, d_router, d_out, &act);
    moeint4_status status = moeint4_forward(ctx, weights, &args);
    /* Downloaded even on failure: a failing forward must leave it as it was. */
    assert_int_equal(moeint4_memory_copy(ctx, got, d_out, bytes, MOEINT4_COPY_DEVICE_TO_HOST),
                     MOEINT4_SUCCESS);
    moeint4_memory_free(ctx, d_hidden);
    moeint4_memory_free(ctx, d_ids);
    moeint4_memory_free(ctx, d_router);
    moeint4_memory_free(ctx, d_out);
    free(staged);
    free(hidden);
    free(ids);
    free(router);
    return status;
}

double hip_test_error(moeint4_context *ctx, const moeint4_weights *weights, const tk_layer *layer,
                      const hip_test_case *c)
{
    size_t count = (size_t)c->num_tokens * (size_t)layer->hidden_size;
    void *got = malloc(count * tk_dtype_size(c->dtype) + 1);
    double *want = malloc(count * sizeof *want + 1);
    assert_non_null(got);
    assert_non_null(want);
    moeint4_status status = hip_test_forward(ctx, weights, layer, c, got, want);
    double error = NAN;
    if (status != MOEINT4_SUCCESS)
        print_error("moeint4_forward: %s: %s\n", moeint4_status_string(status),
                    moeint4_last_error());
    else
        error = tk_relative_l2(c->dtype, got, want, count);
    print_message("  dtype %d M %lld topk %d act %d on_input %d: rel L2 %.3e\n", (int)c->dtype,
                  (long long)c->num_tokens, c->topk, (int)c->activation, c->on_input, error);
    free(got);
    free(want);
    return error;
}
