/* The layout conversions against the test kit's independent packer: every
 * format (GPTQ sym, GPTQ asym with zero_offset 0 and 1, AWQ), every group
 * size, F16 and BF16 scales, w13-like, w2-like and odd shapes. Each output
 * element is compared bit for bit with the value the packer's natural-order
 * codes, zeros and scales define. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "layout/layout.h"
#include "moeint4.h"
#include "testkit.h"

typedef struct format_variant {
    moeint4_format format;
    int zero_offset;
    const char *name;
} format_variant;

static const format_variant format_variants[] = {
    { MOEINT4_FORMAT_GPTQ_SYM, 0, "gptq-sym" },
    { MOEINT4_FORMAT_GPTQ_ASYM, 0, "gptq-asym" },
    { MOEINT4_FORMAT_GPTQ_ASYM, 1, "gptq-asym-v1" },
    { MOEINT4_FORMAT_AWQ, 0, "awq" },
};
static const int group_sizes[] = { 32, 64, 128, -1 };
static const moeint4_dtype scale_dtypes[] = { MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };

typedef struct shape {
    int in_features, out_features;
    const char *what;
} shape;

#define SHAPES_PER_GROUP 4

/* IN follows the group size (a multiple of it; per-channel takes IN values
 * that are not multiples of 32, the tile width). OUT is deliberately not a
 * multiple of the 64-row tile; GPTQ_SYM, which packs nothing along OUT, also
 * gets an OUT that is not a multiple of 8. */
static void shapes_for(int group_size, moeint4_format format, shape out[SHAPES_PER_GROUP])
{
    int unit = group_size == -1 ? 8 : group_size;
    int k = group_size == -1 ? 200 : 3 * unit; /* hidden size K */
    int n = group_size == -1 ? 72 : 2 * unit;  /* intermediate size N */
    out[0] = (shape){ k, 2 * 72, "w13-like (IN = K, OUT = 2N)" };
    out[1] = (shape){ n, k, "w2-like (IN = N, OUT = K)" };
    out[2] = (shape){ unit, format == MOEINT4_FORMAT_GPTQ_SYM ? 13 : 8, "narrow" };
    /* more than 1024 columns: several blocks of row words per row */
    out[3] = (shape){ group_size == -1 ? 1096 : (1024 / unit + 1) * unit, 136, "wide" };
}

static size_t weight_count(const tk_matrix *m)
{
    return (size_t)m->num_experts * (size_t)m->out_features * (size_t)m->in_features;
}

static size_t group_count(const tk_matrix *m)
{
    return (size_t)m->num_experts * (size_t)m->num_groups * (size_t)m->out_features;
}

static float natural_scale(const tk_matrix *m, size_t index)
{
    uint16_t bits = m->scales[index];
    return m->scales_dtype == MOEINT4_DTYPE_BF16 ? tk_bf16_to_f32(bits) : tk_f16_to_f32(bits);
}

/* Copies of the checkpoint arrays, to prove the conversions leave them alone. */
typedef struct input_copies {
    void *qweight, *scales, *qzeros, *g_idx;
    size_t qweight_bytes, scales_bytes, qzeros_bytes, g_idx_bytes;
} input_copies;

static void copy_inputs(const tk_matrix *m, input_copies *c)
{
    c->qweight_bytes = weight_count(m) / 2;
    c->scales_bytes = group_count(m) * sizeof(uint16_t);
    c->qzeros_bytes = m->qzeros ? group_count(m) / 2 : 0;
    c->g_idx_bytes = m->g_idx ? (size_t)m->num_experts * (size_t)m->in_features * 4 : 0;
    c->qweight = tk_copy_alloc(m->qweight, c->qweight_bytes);
    c->scales = tk_copy_alloc(m->scales, c->scales_bytes);
    c->qzeros = tk_copy_alloc(m->qzeros, c->qzeros_bytes);
    c->g_idx = tk_copy_alloc(m->g_idx, c->g_idx_bytes);
}

static void expect_inputs_unchanged(const tk_matrix *m, input_copies *c)
{
    assert_memory_equal(m->qweight, c->qweight, c->qweight_bytes);
    assert_memory_equal(m->scales, c->scales, c->scales_bytes);
    if (c->qzeros_bytes)
        assert_memory_equal(m->qzeros, c->qzeros, c->qzeros_bytes);
    if (c->g_idx_bytes)
        assert_memory_equal(m->g_idx, c->g_idx, c->g_idx_bytes);
    free(c->qweight);
    free(c->scales);
    free(c->qzeros);
    free(c->g_idx);
}

static void check_dequantized(const tk_matrix *m, const moeint4_quant_matrix *view,
                              const char *label)
{
    size_t count = weight_count(m);
    float *f32 = tk_poisoned_alloc(count * sizeof(float));
    uint16_t *bf16 = tk_poisoned_alloc(count * sizeof(uint16_t));
    assert_non_null(f32);
    assert_non_null(bf16);
    assert_int_equal(moeint4_layout_dequantize_f32(view, f32), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_layout_dequantize_bf16(view, bf16), MOEINT4_SUCCESS);
    size_t index = 0;
    for (int e = 0; e < m->num_experts; e++)
        for (int o = 0; o < m->out_features; o++)
            for (int i = 0; i < m->in_features; i++, index++) {
                float want = (float)tk_matrix_value(m, e, o, i);
                uint16_t want_bf16 = tk_f32_to_bf16(want);
                if (memcmp(&f32[index], &want, sizeof want) != 0 || bf16[index] != want_bf16) {
                    print_error("%s: [%d][%d][%d] f32 %.9g (want %.9g), bf16 0x%04x (want "
                                "0x%04x)\n",
                                label, e, o, i, (double)f32[index], (double)want, bf16[index],
                                want_bf16);
                    fail();
                }
            }
    free(f32);
    free(bf16);
}

static void check_unpacked(const tk_matrix *m, const moeint4_quant_matrix *view, const char *label)
{
    size_t per_expert = (size_t)m->out_features * (size_t)m->in_features;
    size_t groups = (size_t)m->num_groups * (size_t)m->out_features;
    uint8_t *codes = tk_poisoned_alloc(per_expert);
    uint8_t *zeros = tk_poisoned_alloc(groups);
    float *scales = tk_poisoned_alloc(groups * sizeof(float));
    assert_non_null(codes);
    assert_non_null(zeros);
    assert_non_null(scales);
    for (int e = 0; e < m->num_experts; e++) {
        memset(codes, TK_POISON, per_expert);
        memset(zeros, TK_POISON, groups);
        memset(scales, TK_POISON, groups * sizeof(float));
        mi4_layout_unpack_expert(view, e, codes, zeros, scales);
        if (memcmp(codes, m->codes + (size_t)e * per_expert, per_expert) != 0) {
            print_error("%s: expert %d codes differ\n", label, e);
            fail();
        }
        if (memcmp(zeros, m->zeros + (size_t)e * groups, groups) != 0) {
            print_error("%s: expert %d zeros differ\n", label, e);
            fail();
        }
        for (size_t j = 0; j < groups; j++) {
            float want = natural_scale(m, (size_t)e * groups + j);
            if (memcmp(&scales[j], &want, sizeof want) != 0) {
                print_error("%s: expert %d scale %zu = %.9g, want %.9g\n", label, e, j,
                            (double)scales[j], (double)want);
                fail();
            }
        }
    }
    free(codes);
    free(zeros);
    free(scales);
}

/* A block that starts and ends off the tile and word grid where it may. */
static void check_decoded_block(const tk_matrix *m, const moeint4_quant_matrix *view)
{
    int e = m->num_experts - 1;
    int row0 = m->out_features > 3 ? 3 : 0;
    int rows = m->out_features - row0 - (m->out_features > 5 ? 1 : 0);
    int col0 = m->in_features > 16 ? 8 : 0;
    int cols = m->in_features - col0 - (m->in_features > 16 ? 8 : 0);
    size_t ld = (size_t)cols + 5;
    uint8_t *block = tk_poisoned_alloc((size_t)rows * ld);
    assert_non_null(block);
    mi4_layout_decode_codes(view, e, row0, rows, col0, cols, block, ld);
    for (int r = 0; r < rows; r++) {
        const uint8_t *want =
            m->codes +
            ((size_t)e * (size_t)m->out_features + (size_t)(row0 + r)) * (size_t)m->in_features +
            (size_t)col0;
        assert_memory_equal(block + (size_t)r * ld, want, (size_t)cols);
        assert_true(tk_still_poisoned(block + (size_t)r * ld + cols, 5));
    }
    free(block);
}

/* The XPU layout computed here from the natural codes: byte j of row o holds
 * code(2j) in the low nibble and code(2j+1) in the high one; zeros [E][OUT][G]
 * the value subtracted. moeint4_layout_to_xpu takes every format;
 * moeint4_layout_gptq_to_xpu GPTQ_SYM only (the same bytes), refusing the
 * others with its outputs untouched. */
static void check_xpu(const tk_matrix *m, const moeint4_quant_matrix *view, const char *label)
{
    size_t packed_bytes = weight_count(m) / 2;
    size_t scales_count = group_count(m);
    uint8_t *packed = tk_poisoned_alloc(packed_bytes);
    uint16_t *scales_t = tk_poisoned_alloc(scales_count * sizeof(uint16_t));
    uint8_t *zeros_t = tk_poisoned_alloc(scales_count);
    assert_true(packed && scales_t && zeros_t);
    moeint4_status status = moeint4_layout_gptq_to_xpu(view, packed, scales_t);
    if (m->format != MOEINT4_FORMAT_GPTQ_SYM) {
        assert_int_equal(status, MOEINT4_UNSUPPORTED);
        assert_non_null(strstr(moeint4_last_error(), "moeint4_layout_to_xpu takes every format"));
        assert_true(tk_still_poisoned(packed, packed_bytes));
        assert_true(tk_still_poisoned(scales_t, scales_count * sizeof(uint16_t)));
        assert_int_equal(moeint4_layout_to_xpu(view, packed, scales_t, NULL),
                         MOEINT4_INVALID_ARGUMENT);
        assert_non_null(strstr(moeint4_last_error(), "zeros_t is NULL"));
        assert_true(tk_still_poisoned(packed, packed_bytes));
    } else {
        assert_int_equal(status, MOEINT4_SUCCESS);
    }
    assert_int_equal(moeint4_layout_to_xpu(view, packed, scales_t, zeros_t), MOEINT4_SUCCESS);
    int in = m->in_features, out = m->out_features, groups = m->num_groups;
    for (int e = 0; e < m->num_experts; e++)
        for (int o = 0; o < out; o++) {
            const uint8_t *codes = m->codes + ((size_t)e * out + o) * in;
            const uint8_t *row = packed + ((size_t)e * out + o) * (size_t)(in / 2);
            for (int j = 0; j < in / 2; j++)
                if (row[j] != (uint8_t)(codes[2 * j] | codes[2 * j + 1] << 4)) {
                    print_error("%s: packed[%d][%d][%d] = 0x%02x, want 0x%02x\n", label, e, o, j,
                                row[j], codes[2 * j] | codes[2 * j + 1] << 4);
                    fail();
                }
            for (int g = 0; g < groups; g++) {
                size_t at = ((size_t)e * out + o) * groups + g;
                assert_int_equal(scales_t[at], m->scales[((size_t)e * groups + g) * out + o]);
                assert_int_equal(zeros_t[at], tk_matrix_packed_zero(m, e, g, o));
            }
        }
    free(packed);
    free(scales_t);
    free(zeros_t);
}

static void run_variant(const format_variant *variant, int group_size, moeint4_dtype dtype,
                        uint64_t seed)
{
    shape shapes[SHAPES_PER_GROUP];
    shapes_for(group_size, variant->format, shapes);
    for (int s = 0; s < SHAPES_PER_GROUP; s++) {
        char label[160];
        snprintf(label, sizeof label, "%s g%d %s IN=%d OUT=%d (%s)", variant->name, group_size,
                 dtype == MOEINT4_DTYPE_BF16 ? "bf16" : "f16", shapes[s].in_features,
                 shapes[s].out_features, shapes[s].what);
        tk_rng rng;
        tk_rng_seed(&rng, seed * 16 + (uint64_t)s);
        tk_matrix m;
        int with_g_idx = s % 2; /* a trivial g_idx must be accepted */
        assert_int_equal(tk_matrix_random(&m, variant->format, variant->zero_offset, 3,
                                          shapes[s].in_features, shapes[s].out_features, group_size,
                                          dtype, 0.01, with_g_idx, &rng),
                         0);
        moeint4_quant_matrix view = tk_matrix_view(&m);
        input_copies copies;
        copy_inputs(&m, &copies);
        if (moeint4_layout_validate(&view) != MOEINT4_SUCCESS) {
            print_error("%s: validate: %s\n", label, moeint4_last_error());
            fail();
        }
        check_dequantized(&m, &view, label);
        check_unpacked(&m, &view, label);
        check_decoded_block(&m, &view);
        check_xpu(&m, &view, label);
        expect_inputs_unchanged(&m, &copies);
        tk_matrix_free(&m);
    }
}

static void test_all_formats(void **state)
{
    (void)state;
    uint64_t seed = 1;
    for (size_t f = 0; f < sizeof format_variants / sizeof format_variants[0]; f++)
        for (size_t g = 0; g < sizeof group_sizes / sizeof group_sizes[0]; g++)
            for (size_t d = 0; d < sizeof scale_dtypes / sizeof scale_dtypes[0]; d++)
                run_variant(&format_variants[f], group_sizes[g], scale_dtypes[d], seed++);
}

/* Zero points at the extremes (0 and 15 stored, 16 with the v1 offset) and
 * the largest scales: the f32 products must stay exact. */
static void test_extreme_zeros_and_scales(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 99);
    for (int variant = 0; variant < 3; variant++) {
        moeint4_format format = variant == 2 ? MOEINT4_FORMAT_AWQ : MOEINT4_FORMAT_GPTQ_ASYM;
        int zero_offset = variant == 1;
        tk_matrix m;
        assert_int_equal(tk_matrix_random(&m, format, zero_offset, 2, 64, 16, 32, MOEINT4_DTYPE_F16,
                                          1000.0, 0, &rng),
                         0);
        size_t groups = group_count(&m);
        for (size_t j = 0; j < groups; j++) {
            m.zeros[j] = (uint8_t)((j % 2 ? 15 : 0) + zero_offset);
            m.scales[j] = j % 3 ? 0x7bffu /* 65504, the largest f16 */ : 0x0001u /* 2^-24 */;
        }
        tk_matrix_pack(&m);
        moeint4_quant_matrix view = tk_matrix_view(&m);
        check_dequantized(&m, &view, "extreme zeros and scales");
        check_unpacked(&m, &view, "extreme zeros and scales");
        tk_matrix_free(&m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_formats),
        cmocka_unit_test(test_extreme_zeros_and_scales),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
