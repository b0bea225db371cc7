/* The test kit checked on its own: 16-bit conversions, hand-packed words for
 * every format, the packed/natural round trip, routing, and the reference
 * MoE against a naive element-by-element evaluation of the same formula. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testkit.h"

static void test_f16_conversions(void **state)
{
    (void)state;
    assert_int_equal(tk_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(tk_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(tk_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tk_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(tk_f32_to_f16(65520.0f), 0x7c00); /* ties away from 65504: to even = inf */
    assert_int_equal(tk_f32_to_f16(0x1p-24f), 0x0001); /* smallest subnormal */
    assert_int_equal(tk_f32_to_f16(0x1p-25f), 0x0000); /* tie -> even (0) */
    assert_int_equal(tk_f32_to_f16(0x3p-25f), 0x0002); /* tie -> even (2) */
    assert_int_equal(tk_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie -> even */
    assert_int_equal(tk_f32_to_f16(1.0f + 0x3p-11f), 0x3c02);
    assert_int_equal(tk_f32_to_f16(INFINITY), 0x7c00);
    assert_true(isnan(tk_f16_to_f32(tk_f32_to_f16(NAN))));
    /* Every non-NaN half survives f16 -> f32 -> f16. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue;
        assert_int_equal(tk_f32_to_f16(tk_f16_to_f32((uint16_t)h)), h);
    }
#ifdef __FLT16_MANT_DIG__
    /* The compiler's own conversion agrees on random floats over f16's range. */
    tk_rng rng;
    tk_rng_seed(&rng, 5);
    for (int i = 0; i < 200000; i++) {
        float f = (float)(tk_rng_normal(&rng) * ldexp(1.0, tk_rng_below(&rng, 44) - 28));
        _Float16 h = (_Float16)f;
        uint16_t bits;
        memcpy(&bits, &h, sizeof bits);
        assert_int_equal(tk_f32_to_f16(f), bits);
    }
#endif
}

static void test_bf16_conversions(void **state)
{
    (void)state;
    assert_int_equal(tk_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tk_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80); /* tie -> even */
    assert_int_equal(tk_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82); /* tie -> even (up) */
    assert_int_equal(tk_f32_to_bf16(1.0f + 0x1p-9f), 0x3f80);
    assert_int_equal(tk_f32_to_bf16(-3.0f), 0xc040);
    assert_int_equal(tk_f32_to_bf16(INFINITY), 0x7f80);
    assert_true(isnan(tk_bf16_to_f32(tk_f32_to_bf16(NAN))));
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
            continue;
        assert_int_equal(tk_f32_to_bf16(tk_bf16_to_f32((uint16_t)h)), h);
    }
}

/* Words worked out by hand from the format definitions. */
static void test_hand_packed_words(void **state)
{
    (void)state;
    tk_matrix m;
    /* GPTQ_ASYM v1, one expert, 8 x 8, per-channel: code[o][i] = (i + o) % 16,
     * real zeros 1..8 stored as 0..7. */
    assert_int_equal(
        tk_matrix_alloc(&m, MOEINT4_FORMAT_GPTQ_ASYM, 1, 1, 8, 8, -1, MOEINT4_DTYPE_F16, 0), 0);
    for (int o = 0; o < 8; o++) {
        for (int i = 0; i < 8; i++)
            m.codes[o * 8 + i] = (uint8_t)((i + o) % 16);
        m.zeros[o] = (uint8_t)(o + 1);
        m.scales[o] = tk_f32_to_f16(1.0f);
    }
    tk_matrix_pack(&m);
    assert_int_equal((uint32_t)m.qweight[0],
                     0x76543210u); /* column 0: k = 0..7, low nibble first */
    assert_int_equal((uint32_t)m.qweight[3], 0xa9876543u); /* column 3 */
    assert_int_equal((uint32_t)m.qzeros[0], 0x76543210u);  /* stored = real - 1 */
    assert_true(tk_matrix_value(&m, 0, 3, 2) == (5 - 4) * 1.0);
    tk_matrix_free(&m);

    /* AWQ: code[o][i] = o; nibble n holds column {0,2,4,6,1,3,5,7}[n]. */
    assert_int_equal(tk_matrix_alloc(&m, MOEINT4_FORMAT_AWQ, 0, 1, 8, 8, -1, MOEINT4_DTYPE_BF16, 0),
                     0);
    for (int o = 0; o < 8; o++) {
        for (int i = 0; i < 8; i++)
            m.codes[o * 8 + i] = (uint8_t)(o + 8 * (i == 5));
        m.zeros[o] = (uint8_t)(15 - o);
        m.scales[o] = tk_f32_to_bf16(0.5f);
    }
    tk_matrix_pack(&m);
    assert_int_equal((uint32_t)m.qweight[0], 0x75316420u);
    assert_int_equal((uint32_t)m.qweight[5], 0xfdb9eca8u);
    assert_int_equal((uint32_t)m.qzeros[0], 0x8ace9bdfu);
    tk_matrix_free(&m);
}

/* Dropping the natural codes makes tk_matrix_code decode the packed words:
 * a second, independent reading of every packed nibble. */
static void test_packed_round_trip(void **state)
{
    (void)state;
    const moeint4_format formats[] = { MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_FORMAT_GPTQ_ASYM,
                                       MOEINT4_FORMAT_GPTQ_ASYM, MOEINT4_FORMAT_AWQ };
    const int groups[] = { 32, 64, 128, -1 };
    tk_rng rng;
    tk_rng_seed(&rng, 11);
    for (int f = 0; f < 4; f++)
        for (int g = 0; g < 4; g++) {
            int in = groups[g] == -1 ? 40 : 3 * groups[g], out = 24;
            tk_matrix m;
            assert_int_equal(tk_matrix_random(&m, formats[f], f == 2, 3, in, out, groups[g],
                                              g % 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16, 0.01,
                                              1, &rng),
                             0);
            size_t count = (size_t)3 * in * out;
            uint8_t *natural = malloc(count);
            assert_non_null(natural);
            memcpy(natural, m.codes, count);
            tk_matrix_drop_codes(&m);
            for (int e = 0; e < 3; e++)
                for (int o = 0; o < out; o++)
                    for (int i = 0; i < in; i++)
                        assert_int_equal(tk_matrix_code(&m, e, o, i),
                                         natural[((size_t)e * out + o) * in + i]);
            int group = groups[g] == -1 ? in : groups[g];
            for (int i = 0; i < in; i++)
                assert_int_equal(m.g_idx[2 * in + i], i / group);
            free(natural);
            tk_matrix_free(&m);
        }
}

static void test_routing(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 3);
    int32_t ids[50 * 8];
    float weights[50 * 8];
    tk_route_random(&rng, 50, 128, 8, ids, weights);
    for (int m = 0; m < 50; m++) {
        double sum = 0;
        for (int j = 0; j < 8; j++) {
            assert_in_range(ids[m * 8 + j], 0, 127);
            for (int other = 0; other < j; other++)
                assert_int_not_equal(ids[m * 8 + j], ids[m * 8 + other]);
            assert_true(weights[m * 8 + j] > 0.0f);
            if (j > 0)
                assert_true(weights[m * 8 + j] <= weights[m * 8 + j - 1]);
            sum += weights[m * 8 + j];
        }
        assert_true(fabs(sum - 1.0) < 1e-6);
    }
}

static void test_expert_map(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 4);
    tk_layer layer;
    assert_int_equal(
        tk_layer_random(&layer, MOEINT4_FORMAT_AWQ, 0, 12, 32, 32, 32, MOEINT4_DTYPE_F16, 1, &rng),
        0);
    assert_int_equal(layer.num_local_experts, 8);
    assert_int_equal(layer.w13.num_experts, 8);
    int seen[8] = { 0 }, remote = 0;
    for (int e = 0; e < 12; e++) {
        int local = layer.expert_map[e];
        if (local < 0) {
            remote++;
        } else {
            assert_in_range(local, 0, 7);
            seen[local]++;
        }
    }
    assert_int_equal(remote, 4);
    for (int l = 0; l < 8; l++)
        assert_int_equal(seen[l], 1);
    tk_layer_free(&layer);
}

/* The formula of include/moeint4.h evaluated element by element through
 * tk_matrix_value (no group sums, no shared loops with reference.c). */
static double naive_activation(const tk_activation *act, double gate, double up)
{
    if (act->kind == MOEINT4_ACTIVATION_GELU)
        return gate * 0.5 * erfc(-gate / sqrt(2.0)) * up;
    if (act->kind == MOEINT4_ACTIVATION_SWIGLU_CLAMP) {
        double g = gate < act->limit ? gate : act->limit;
        double u = up > act->limit ? act->limit : up < -act->limit ? -act->limit : up;
        return (u + act->beta) * g / (1.0 + exp(-act->alpha * g));
    }
    return gate / (1.0 + exp(-gate)) * up;
}

static double naive_output(const tk_layer *l, moeint4_dtype dtype, const void *hidden, int m,
                           int topk, const int32_t *ids, const float *w, const tk_activation *act,
                           int col)
{
    int k = l->hidden_size, n = l->intermediate_size;
    double total = 0;
    for (int j = 0; j < topk; j++) {
        int e = l->expert_map ? l->expert_map[ids[m * topk + j]] : ids[m * topk + j];
        if (e < 0)
            continue;
        double router = w[m * topk + j], y = 0;
        double on_input = act->apply_router_weight_on_input ? router : 1.0;
        for (int c = 0; c < n; c++) {
            double gate = 0, up = 0;
            for (int i = 0; i < k; i++) {
                double x = on_input * tk_load(dtype, hidden, (size_t)m * k + i);
                gate += tk_matrix_value(&l->w13, e, c, i) * x;
                up += tk_matrix_value(&l->w13, e, n + c, i) * x;
            }
            y += tk_matrix_value(&l->w2, e, col, c) * naive_activation(act, gate, up);
        }
        total += act->apply_router_weight_on_input ? y : router * y;
    }
    return total;
}

static void test_reference_against_naive(void **state)
{
    (void)state;
    const tk_activation acts[] = {
        { MOEINT4_ACTIVATION_SILU, 0, 0, 0, 0 },
        { MOEINT4_ACTIVATION_GELU, 0, 0, 0, 1 },
        { MOEINT4_ACTIVATION_SWIGLU_CLAMP, 0.5, 1.702, 1.0, 0 },
        { MOEINT4_ACTIVATION_SWIGLU_CLAMP, 7.0, 1.702, 1.0, 1 },
    };
    tk_rng rng;
    tk_rng_seed(&rng, 9);
    for (int a = 0; a < 4; a++) {
        tk_layer layer;
        moeint4_format format = a == 1 ? MOEINT4_FORMAT_AWQ : MOEINT4_FORMAT_GPTQ_ASYM;
        assert_int_equal(
            tk_layer_random(&layer, format, a == 2, 6, 64, 32, 32, MOEINT4_DTYPE_BF16, a % 2, &rng),
            0);
        enum { M = 3, TOPK = 3 };
        uint16_t hidden[M * 64];
        int32_t ids[M * TOPK];
        float w[M * TOPK];
        tk_fill_activations(&rng, MOEINT4_DTYPE_F16, M * 64, 2.0, hidden);
        tk_route_random(&rng, M, 6, TOPK, ids, w);
        w[1] *= 0.5f; /* off the simplex */
        double out[M * 64];
        const int64_t rows[2] = { 2, 0 };
        tk_reference_moe(&layer, MOEINT4_DTYPE_F16, hidden, M, TOPK, ids, w, &acts[a], rows, 2,
                         out);
        double rms = 0;
        for (int r = 0; r < 2; r++)
            for (int col = 0; col < 64; col++) {
                double want = naive_output(&layer, MOEINT4_DTYPE_F16, hidden, (int)rows[r], TOPK,
                                           ids, w, &acts[a], col);
                assert_true(fabs(out[r * 64 + col] - want) <= 1e-12 * (1.0 + fabs(want)));
                rms += want * want;
            }
        /* Unit-ish magnitude (tk_unit_gain_scale): not vanishing, not huge. */
        rms = sqrt(rms / 128);
        assert_true(rms > 0.05 && rms < 5.0);
        tk_layer_free(&layer);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_conversions),
        cmocka_unit_test(test_bf16_conversions),
        cmocka_unit_test(test_hand_packed_words),
        cmocka_unit_test(test_packed_round_trip),
        cmocka_unit_test(test_routing),
        cmocka_unit_test(test_expert_map),
        cmocka_unit_test(test_reference_against_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
