/* The CPU forward pass against the test kit's double-precision reference,
 * for every kernel table, format, group size, dtype, activation, expert map
 * and router-weight placement, at few and many tokens per expert; and the
 * same bits from 1 and 2 threads, and for a token alone and in a batch. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cpu/cpu_internal.h"
#include "cpu_test_util.h"
#include "testkit.h"

typedef struct forward_case {
    moeint4_format format;
    int zero_offset;
    int num_experts, hidden, intermediate, group_size;
    moeint4_dtype scales_dtype;
    int expert_map_mode;
    moeint4_dtype dtype;
    int64_t tokens;
    int topk;
    moeint4_activation activation;
    int on_input;
    int repeat_ids; /* every token lists expert (m % 2) in all its top-k slots */
} forward_case;

/* Relative L2 bound: the output rounding of the dtype plus f32 accumulation
 * (sums of a few hundred terms with cancellation:
 * measured about 1e-6, bounded here by 2e-5). */
static double tolerance(moeint4_dtype dtype)
{
    double unit = dtype == MOEINT4_DTYPE_BF16 ? 0x1p-8 : dtype == MOEINT4_DTYPE_F16 ? 0x1p-11 : 0.0;
    return unit + 2e-5;
}

static void run_case(const forward_case *fc, uint64_t seed)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    tk_layer layer;
    assert_int_equal(tk_layer_random(&layer, fc->format, fc->zero_offset, fc->num_experts,
                                     fc->hidden, fc->intermediate, fc->group_size, fc->scales_dtype,
                                     fc->expert_map_mode, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    size_t elem = tk_dtype_size(fc->dtype);
    size_t out_count = (size_t)fc->tokens * fc->hidden;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(fc->tokens * fc->topk + 1));
    float *weights = malloc(sizeof(float) * (size_t)(fc->tokens * fc->topk + 1));
    void *hidden = malloc(out_count * elem + 1);
    void *out = malloc(out_count * elem + 1);
    void *first = malloc(out_count * elem + 1);
    /* the two builds of the bf16 table (with and without VBMI2) form the
     * same code words: their outputs must be the same bits */
    void *bf16_first = malloc(out_count * elem + 1);
    int have_bf16 = 0;
    double *want = malloc(sizeof(double) * (out_count + 1));
    assert_non_null(ids);
    assert_non_null(weights);
    assert_non_null(hidden);
    assert_non_null(out);
    assert_non_null(first);
    assert_non_null(bf16_first);
    assert_non_null(want);
    tk_route_random(&rng, fc->tokens, fc->num_experts, fc->topk, ids, weights);
    if (fc->repeat_ids)
        for (int64_t s = 0; s < fc->tokens * fc->topk; s++)
            ids[s] = (int32_t)((s / fc->topk) % 2);
    tk_fill_activations(&rng, fc->dtype, out_count, 1.0, hidden);

    tk_activation act = { fc->activation, 1.25, 1.702, 0.5, fc->on_input };
    /* the reference reads the f32-rounded SwiGLU parameters */
    act.limit = 1.25f;
    act.alpha = 1.702f;
    moeint4_forward_args args =
        tk_forward_args(fc->dtype, fc->tokens, fc->topk, hidden, ids, weights, out, &act);
    act.beta = 0.5f;
    tk_reference_moe(&layer, fc->dtype, hidden, fc->tokens, fc->topk, ids, weights, &act, NULL, 0,
                     want);

    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int num_tables = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    for (int ti = 0; ti < num_tables; ti++) {
        for (int threads = 1; threads <= 2; threads++) {
            mi4_cpu_context *ctx = NULL;
            assert_int_equal(mi4_cpu_context_create_with(threads, tables[ti], &ctx),
                             MOEINT4_SUCCESS);
            mi4_cpu_weights *w = NULL;
            char err[256] = "";
            assert_int_equal(mi4_cpu_weights_prepare(ctx, &desc, &w, err, sizeof err),
                             MOEINT4_SUCCESS);
            tk_poison(out, out_count * elem);
            assert_int_equal(mi4_cpu_forward_with(ctx, tables[ti], w, &args, err, sizeof err),
                             MOEINT4_SUCCESS);
            double error = tk_relative_l2(fc->dtype, out, want, out_count);
            if (!(error <= tolerance(fc->dtype)))
                fail_msg("kernel %s threads %d format %d group %d dtype %d act %d M %lld "
                         "K %d N %d: relative L2 error %g > %g",
                         tables[ti]->name, threads, fc->format, fc->group_size, fc->dtype,
                         fc->activation, (long long)fc->tokens, fc->hidden, fc->intermediate, error,
                         tolerance(fc->dtype));
            if (threads == 1)
                memcpy(first, out, out_count * elem);
            else if (!cpu_test_same_bits(first, out, out_count * elem))
                fail_msg("kernel %s: 1 and 2 threads give different bits", tables[ti]->name);
            if (threads == 1 && strncmp(tables[ti]->name, "avx512bf16", 10) == 0) {
                if (!have_bf16)
                    memcpy(bf16_first, out, out_count * elem);
                else if (!cpu_test_same_bits(bf16_first, out, out_count * elem))
                    fail_msg("kernel %s: not the same bits as the other bf16 build",
                             tables[ti]->name);
                have_bf16 = 1;
            }
            mi4_cpu_weights_release(w);
            mi4_cpu_context_destroy(ctx);
        }
    }
    free(ids);
    free(weights);
    free(hidden);
    free(out);
    free(first);
    free(bf16_first);
    free(want);
    tk_layer_free(&layer);
}

static void test_every_format_and_group(void **state)
{
    (void)state;
    const moeint4_format formats[] = { MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_FORMAT_GPTQ_ASYM,
                                       MOEINT4_FORMAT_AWQ };
    const int groups[] = { 32, 64, 128, -1 };
    uint64_t seed = 100;
    for (int f = 0; f < 3; f++)
        for (int g = 0; g < 4; g++)
            for (int zo = 0; zo <= (formats[f] == MOEINT4_FORMAT_GPTQ_ASYM); zo++)
                /* f32 runs the f32 tables, bf16 the bf16 one where the CPU has it,
                 * f16 (2+ rows an expert) amx-f16 where it has AMX */
                for (int d = 0; d < 3; d++) {
                    const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_BF16,
                                                     MOEINT4_DTYPE_F16 };
                    forward_case fc = { formats[f],
                                        zo,
                                        6,
                                        256,
                                        128,
                                        groups[g],
                                        MOEINT4_DTYPE_F16,
                                        0,
                                        dtypes[d],
                                        d ? 37 : 5, /* the AMX tables' tile path too */
                                        2,
                                        MOEINT4_ACTIVATION_SILU,
                                        0,
                                        0 };
                    run_case(&fc, seed++);
                }
}

static void test_every_dtype_and_activation(void **state)
{
    (void)state;
    const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
    const moeint4_activation acts[] = { MOEINT4_ACTIVATION_SILU, MOEINT4_ACTIVATION_GELU,
                                        MOEINT4_ACTIVATION_SWIGLU_CLAMP };
    uint64_t seed = 200;
    for (int d = 0; d < 3; d++)
        for (int a = 0; a < 3; a++)
            for (int on_input = 0; on_input <= 1; on_input++) {
                forward_case fc = { MOEINT4_FORMAT_GPTQ_ASYM,
                                    0,
                                    5,
                                    128,
                                    64,
                                    64,
                                    d == 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16,
                                    on_input,
                                    dtypes[d],
                                    7,
                                    3,
                                    acts[a],
                                    on_input,
                                    0 };
                run_case(&fc, seed++);
            }
}

/* Odd shapes: K and N multiples of 8 (the layout module requires it) but not
 * of 16 or of the 8-tile work items, per-channel groups of an odd number of
 * 8-column blocks, a single tile, and experts with no tokens. */
static void test_odd_shapes(void **state)
{
    (void)state;
    uint64_t seed = 300;
    const int sizes[][2] = { { 40, 24 }, { 72, 40 }, { 96, 56 }, { 136, 8 }, { 8, 8 } };
    for (int s = 0; s < 5; s++) {
        forward_case awq = { s % 2 ? MOEINT4_FORMAT_AWQ : MOEINT4_FORMAT_GPTQ_ASYM,
                             0,
                             9,
                             sizes[s][0],
                             sizes[s][1],
                             -1,
                             MOEINT4_DTYPE_F16,
                             0,
                             MOEINT4_DTYPE_F32,
                             6,
                             2,
                             MOEINT4_ACTIVATION_SILU,
                             0,
                             0 };
        run_case(&awq, seed++);
    }
    forward_case gptq = {
        MOEINT4_FORMAT_GPTQ_SYM, 0, 3, 96, 64, 32, MOEINT4_DTYPE_BF16, 0, MOEINT4_DTYPE_BF16, 9, 2,
        MOEINT4_ACTIVATION_GELU, 0, 0
    };
    run_case(&gptq, seed++);
}

/* Many tokens per expert: the 8-token register blocks plus every remainder;
 * inputs converted by the caller alone (M * K <= 65536) or by every thread;
 * more than one 2048-token chunk. */
static void test_many_tokens(void **state)
{
    (void)state;
    uint64_t seed = 400;
    const int64_t tokens[] = { 1, 2, 3, 17, 61, 200, 600, 2100 };
    for (int i = 0; i < 8; i++) {
        forward_case fc = { MOEINT4_FORMAT_GPTQ_SYM,
                            0,
                            4,
                            128,
                            96,
                            32,
                            MOEINT4_DTYPE_F16,
                            1,
                            MOEINT4_DTYPE_BF16,
                            tokens[i],
                            2,
                            MOEINT4_ACTIVATION_SILU,
                            0,
                            0 };
        run_case(&fc, seed++);
    }
}

/* A token may list one expert in several top-k slots (the core allows it):
 * an expert then has more pairs than there are tokens. */
static void test_repeated_expert_ids(void **state)
{
    (void)state;
    const int64_t tokens[] = { 1, 5, 40 };
    for (int i = 0; i < 3; i++) {
        forward_case fc = { MOEINT4_FORMAT_GPTQ_SYM,
                            0,
                            4,
                            64,
                            32,
                            32,
                            MOEINT4_DTYPE_F16,
                            0,
                            MOEINT4_DTYPE_F32,
                            tokens[i],
                            4,
                            MOEINT4_ACTIVATION_SILU,
                            i == 1,
                            1 };
        run_case(&fc, 500 + (uint64_t)i);
    }
}

/* Phase 3 runs w2 by expert for few pairs (decode) and by output slice for
 * many: a token's output row is the same bits alone (the first) and in a
 * batch of 1100 tokens (2200 pairs: the second), on every table but the
 * AMX one. That one runs an expert's jobs of 2 tokens or more on the tile
 * unit, which sums in another order than the bf16 kernels that take a token
 * alone: there the two rows agree within the bf16 tolerance. */
static void test_w2_paths_agree(void **state)
{
    (void)state;
    const int64_t batch = 1100;
    const int topk = 2, hidden = 128;
    tk_rng rng;
    tk_rng_seed(&rng, 600);
    tk_layer layer;
    assert_int_equal(tk_layer_random(&layer, MOEINT4_FORMAT_GPTQ_ASYM, 0, 4, hidden, 96, 32,
                                     MOEINT4_DTYPE_BF16, 0, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    size_t row_bytes = (size_t)hidden * 2;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)batch * topk);
    float *weights = malloc(sizeof(float) * (size_t)batch * topk);
    uint16_t *x = malloc(row_bytes * (size_t)batch);
    uint16_t *out = malloc(row_bytes * (size_t)batch);
    uint16_t alone[128];
    assert_non_null(ids);
    assert_non_null(weights);
    assert_non_null(x);
    assert_non_null(out);
    tk_route_random(&rng, batch, 4, topk, ids, weights);
    tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, (size_t)batch * hidden, 1.0, x);
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int num_tables = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    for (int ti = 0; ti < num_tables; ti++) {
        mi4_cpu_context *ctx = NULL;
        assert_int_equal(mi4_cpu_context_create_with(2, tables[ti], &ctx), MOEINT4_SUCCESS);
        mi4_cpu_weights *w = NULL;
        char err[256] = "";
        assert_int_equal(mi4_cpu_weights_prepare(ctx, &desc, &w, err, sizeof err), MOEINT4_SUCCESS);
        moeint4_forward_args args =
            tk_forward_args(MOEINT4_DTYPE_BF16, batch, topk, x, ids, weights, out, NULL);
        assert_int_equal(mi4_cpu_forward_with(ctx, tables[ti], w, &args, err, sizeof err),
                         MOEINT4_SUCCESS);
        for (int64_t m = 0; m < batch; m += 137) {
            moeint4_forward_args one =
                tk_forward_args(MOEINT4_DTYPE_BF16, 1, topk, x + m * hidden, ids + m * topk,
                                weights + m * topk, alone, NULL);
            assert_int_equal(mi4_cpu_forward_with(ctx, tables[ti], w, &one, err, sizeof err),
                             MOEINT4_SUCCESS);
            if (strncmp(tables[ti]->name, "amx", 3) == 0) { /* amx, amx-f16 */
                double batch_row[128];
                for (int k = 0; k < hidden; k++)
                    batch_row[k] = tk_bf16_to_f32(out[m * hidden + k]);
                double error = tk_relative_l2(MOEINT4_DTYPE_BF16, alone, batch_row, (size_t)hidden);
                if (!(error <= tolerance(MOEINT4_DTYPE_BF16)))
                    fail_msg("kernel %s: token %lld alone and in the batch: relative L2 %g",
                             tables[ti]->name, (long long)m, error);
            } else if (!cpu_test_same_bits(alone, out + m * hidden, row_bytes)) {
                fail_msg("kernel %s: token %lld alone and in the batch differ", tables[ti]->name,
                         (long long)m);
            }
        }
        mi4_cpu_weights_release(w);
        mi4_cpu_context_destroy(ctx);
    }
    free(ids);
    free(weights);
    free(x);
    free(out);
    tk_layer_free(&layer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_format_and_group),
        cmocka_unit_test(test_every_dtype_and_activation),
        cmocka_unit_test(test_odd_shapes),
        cmocka_unit_test(test_many_tokens),
        cmocka_unit_test(test_repeated_expert_ids),
        cmocka_unit_test(test_w2_paths_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
