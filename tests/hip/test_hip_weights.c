/* The HIP backend's gpu_weights mode: the context option against
 * MOEINT4_HIP_WEIGHTS (an explicit option wins, AUTO follows the variable,
 * INT4 when it is unset), bad values of both, a caller built before the
 * option existed (the first published struct_size: AUTO), the device bytes
 * of each mode (int4: within 1.05x of the checkpoint's int4 arrays), and
 * both modes' forwards against the double reference on every path the int4
 * weights take: the direct GEMVs (one token), the routed int4 GEMV (few rows
 * per expert) and the BF16 expansion for the matrix-core tiles (many rows),
 * for every format and group size, with an expert map.
 * Exits 77 (ctest: skipped) when the plugin or a GPU is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hip_test_util.h"
#include "tk_cmocka.h"

static moeint4_status create(int gpu_weights, size_t struct_size, moeint4_context **ctx)
{
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = struct_size;
    options.backend = MOEINT4_BACKEND_HIP;
    options.gpu_weights = gpu_weights;
    *ctx = NULL;
    return moeint4_context_create(&options, ctx);
}

/* Device bytes of a small GPTQ-sym layer prepared on a context made with
 * this option, MOEINT4_HIP_WEIGHTS = env (NULL: unset). */
static size_t device_bytes_with(int gpu_weights, const char *env, size_t struct_size)
{
    if (env)
        setenv("MOEINT4_HIP_WEIGHTS", env, 1);
    else
        unsetenv("MOEINT4_HIP_WEIGHTS");
    moeint4_context *ctx = NULL;
    moeint4_status status = create(gpu_weights, struct_size, &ctx);
    if (status != MOEINT4_SUCCESS)
        print_error("context_create: %s\n", moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 4, 256, 128, 128, 0, 9001);
    size_t bytes = 0;
    assert_int_equal(moeint4_weights_memory(w, NULL, &bytes), MOEINT4_SUCCESS);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
    return bytes;
}

static void test_option_and_environment(void **state)
{
    (void)state;
    char *restore = hip_test_env_save("MOEINT4_HIP_WEIGHTS");
    const size_t full = sizeof(moeint4_context_options);
    const size_t weights = (size_t)4 * 3 * 256 * 128;    /* weights of the layer */
    const size_t bf16 = weights * 2, int4 = weights / 2; /* plus scales and the map */
    size_t auto_unset = device_bytes_with(MOEINT4_GPU_WEIGHTS_AUTO, NULL, full);
    size_t auto_bf16 = device_bytes_with(MOEINT4_GPU_WEIGHTS_AUTO, "bf16", full);
    size_t auto_int4 = device_bytes_with(MOEINT4_GPU_WEIGHTS_AUTO, "INT4", full);
    size_t forced_bf16 = device_bytes_with(MOEINT4_GPU_WEIGHTS_BF16, "int4", full);
    size_t forced_int4 = device_bytes_with(MOEINT4_GPU_WEIGHTS_INT4, "bf16", full);
    size_t old_caller =
        device_bytes_with(MOEINT4_GPU_WEIGHTS_BF16, NULL, MOEINT4_CONTEXT_OPTIONS_MIN_SIZE);
    print_message("device bytes: auto %zu, auto+env bf16 %zu, auto+env int4 %zu, BF16 %zu, "
                  "INT4 %zu, first-published struct_size %zu\n",
                  auto_unset, auto_bf16, auto_int4, forced_bf16, forced_int4, old_caller);
    assert_true(auto_unset >= int4 && auto_unset < int4 + int4 / 8);
    assert_true(auto_bf16 >= bf16 && auto_bf16 < bf16 + bf16 / 32);
    assert_int_equal(auto_int4, auto_unset);
    assert_int_equal(forced_bf16, auto_bf16);
    assert_int_equal(forced_int4, auto_unset);
    /* the option past the caller's struct_size is AUTO: int4 */
    assert_int_equal(old_caller, auto_unset);

    /* A bad variable: a context forced to HIP makes the backend's state at
     * create, which fails naming it; an explicit option does not read it. */
    moeint4_context *ctx = NULL;
    setenv("MOEINT4_HIP_WEIGHTS", "fp8", 1);
    moeint4_status status = create(MOEINT4_GPU_WEIGHTS_AUTO, full, &ctx);
    print_message("MOEINT4_HIP_WEIGHTS=fp8, option AUTO: %s: %s\n", moeint4_status_string(status),
                  moeint4_last_error());
    assert_int_equal(status, MOEINT4_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(moeint4_last_error(), "MOEINT4_HIP_WEIGHTS"));
    tk_layer layer;
    tk_rng rng;
    tk_rng_seed(&rng, 9002);
    assert_int_equal(tk_layer_random(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 4, 256, 128, 128,
                                     MOEINT4_DTYPE_F16, 0, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    assert_int_equal(create(MOEINT4_GPU_WEIGHTS_INT4, full, &ctx), MOEINT4_SUCCESS);
    moeint4_weights *w = NULL;
    assert_int_equal(moeint4_weights_prepare(ctx, &desc, &w), MOEINT4_SUCCESS);
    moeint4_weights_release(w);
    moeint4_context_destroy(ctx);
    tk_layer_free(&layer);
    unsetenv("MOEINT4_HIP_WEIGHTS");
    assert_int_equal(create(7, full, &ctx), MOEINT4_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(moeint4_last_error(), "options->gpu_weights = 7"));
    assert_int_equal(create(-1, full, &ctx), MOEINT4_INVALID_ARGUMENT);
    hip_test_env_restore("MOEINT4_HIP_WEIGHTS", restore);
}

/* Checkpoint bytes of a layer's int4 arrays: qweight, scales, qzeros. */
static size_t checkpoint_bytes(const tk_layer *layer)
{
    const tk_matrix *m[2] = { &layer->w13, &layer->w2 };
    size_t total = 0;
    for (int i = 0; i < 2; i++) {
        const tk_matrix *q = m[i];
        size_t row_groups =
            (size_t)q->num_experts * (size_t)q->num_groups * (size_t)q->out_features;
        total += (size_t)q->num_experts * (size_t)q->in_features * (size_t)q->out_features / 2 +
                 row_groups * 2 + (q->qzeros ? row_groups / 2 : 0);
    }
    return total;
}

/* Each format and group size in each mode, on the three int4 paths. */
static void test_paths_in_both_modes(void **state)
{
    (void)state;
    const moeint4_format formats[] = { MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_FORMAT_GPTQ_ASYM,
                                       MOEINT4_FORMAT_AWQ };
    const int groups[] = { 32, 64, 128, -1 };
    const int modes[] = { MOEINT4_GPU_WEIGHTS_INT4, MOEINT4_GPU_WEIGHTS_BF16 };
    for (int mode = 0; mode < 2; mode++) {
        moeint4_context *ctx = NULL;
        assert_int_equal(create(modes[mode], sizeof(moeint4_context_options), &ctx),
                         MOEINT4_SUCCESS);
        for (int f = 0; f < 3; f++) {
            for (int g = 0; g < 4; g++) {
                /* K = 384 (12 loads of 32 codes), N = 256; with an expert map */
                tk_layer layer;
                uint64_t seed = 9100 + (uint64_t)(f * 4 + g);
                moeint4_weights *w =
                    hip_test_prepare(ctx, &layer, formats[f], 16, 384, 256, groups[g], 1, seed);
                size_t device = 0, checkpoint = checkpoint_bytes(&layer);
                assert_int_equal(moeint4_weights_memory(w, NULL, &device), MOEINT4_SUCCESS);
                size_t map_and_record = (size_t)layer.num_experts * 4 + 16;
                print_message("%s format %d group %d: device %zu bytes, checkpoint %zu "
                              "(%.3fx)\n",
                              modes[mode] == MOEINT4_GPU_WEIGHTS_INT4 ? "int4" : "bf16",
                              (int)formats[f], groups[g], device, checkpoint,
                              (double)(device - map_and_record) / (double)checkpoint);
                if (modes[mode] == MOEINT4_GPU_WEIGHTS_INT4)
                    assert_true((double)(device - map_and_record) <= 1.05 * (double)checkpoint);
                /* one token: direct; 24 tokens x 4 and 200 x 4 on 16 experts:
                 * int4 mode, group 128 / per-channel on sm_90a: the int4
                 * grouped GEMM (qw32, qw64), else the routed int4 GEMV and the
                 * BF16 expansion */
                const int64_t tokens[] = { 1, 24, 200 };
                const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_BF16, MOEINT4_DTYPE_F32,
                                                 MOEINT4_DTYPE_F16 };
                for (int t = 0; t < 3; t++) {
                    hip_test_case c;
                    memset(&c, 0, sizeof c);
                    c.dtype = dtypes[t];
                    c.num_tokens = tokens[t];
                    c.topk = 4;
                    c.activation = t == 1 ? MOEINT4_ACTIVATION_GELU : MOEINT4_ACTIVATION_SILU;
                    c.on_input = g == 1 && t == 2;
                    c.seed = seed * 10 + (uint64_t)t;
                    double e = hip_test_error(ctx, w, &layer, &c);
                    assert_true(e <= HIP_TOLERANCE);
                }
                moeint4_weights_release(w);
                tk_layer_free(&layer);
            }
        }
        moeint4_context_destroy(ctx);
    }
}

int main(int argc, char **argv)
{
    if (!hip_test_available())
        return HIP_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_option_and_environment),
        cmocka_unit_test(test_paths_in_both_modes),
    };
    return tk_cmocka_run("hip weights", tests, sizeof tests / sizeof tests[0], NULL, NULL, argc,
                         argv);
}
