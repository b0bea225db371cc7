/* Every refusal of the layout module: its status, a message naming the field,
 * and outputs left byte for byte as they were (poisoned before the call).
 * Each bad matrix goes through moeint4_layout_validate and all three
 * conversions, which must refuse it the same way. */
#include <limits.h>
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

/* Base matrices: 2 experts, IN = 64, OUT = 16, group 32 (G = 2). */
#define BASE_EXPERTS 2
#define BASE_IN 64
#define BASE_OUT 16
#define BASE_GROUP 32
#define BASE_GROUPS (BASE_IN / BASE_GROUP)
/* Output buffers sized for the largest matrix any case could wrongly accept. */
#define OUTPUT_ELEMENTS ((size_t)BASE_EXPERTS * BASE_OUT * 4 * BASE_IN * 2)

typedef struct outputs {
    float *f32;
    uint16_t *bf16;
    uint8_t *packed;
    uint16_t *scales_t;
    uint8_t *zeros_t;
} outputs;

static void poison(outputs *o)
{
    memset(o->f32, TK_POISON, OUTPUT_ELEMENTS * sizeof(float));
    memset(o->bf16, TK_POISON, OUTPUT_ELEMENTS * sizeof(uint16_t));
    memset(o->packed, TK_POISON, OUTPUT_ELEMENTS);
    memset(o->scales_t, TK_POISON, OUTPUT_ELEMENTS * sizeof(uint16_t));
    memset(o->zeros_t, TK_POISON, OUTPUT_ELEMENTS);
}

static void expect_message(const char *call, const char *needle1, const char *needle2)
{
    const char *message = moeint4_last_error();
    if ((needle1 && !strstr(message, needle1)) || (needle2 && !strstr(message, needle2))) {
        print_error("%s: message \"%s\" lacks \"%s\" / \"%s\"\n", call, message,
                    needle1 ? needle1 : "", needle2 ? needle2 : "");
        fail();
    }
}

static void expect_status(const char *call, moeint4_status got, moeint4_status want)
{
    if (got != want) {
        print_error("%s returned %s, want %s (message: %s)\n", call, moeint4_status_string(got),
                    moeint4_status_string(want), moeint4_last_error());
        fail();
    }
}

static void expect_untouched(const outputs *o)
{
    assert_true(tk_still_poisoned(o->f32, OUTPUT_ELEMENTS * sizeof(float)));
    assert_true(tk_still_poisoned(o->bf16, OUTPUT_ELEMENTS * sizeof(uint16_t)));
    assert_true(tk_still_poisoned(o->packed, OUTPUT_ELEMENTS));
    assert_true(tk_still_poisoned(o->scales_t, OUTPUT_ELEMENTS * sizeof(uint16_t)));
    assert_true(tk_still_poisoned(o->zeros_t, OUTPUT_ELEMENTS));
}

/* validate and every conversion refuse `m` with `status` and a message
 * holding both needles (NULL = none); no output byte changes. */
static void expect_refused(const moeint4_quant_matrix *m, moeint4_status status,
                           const char *needle1, const char *needle2)
{
    outputs o = { tk_poisoned_alloc(OUTPUT_ELEMENTS * sizeof(float)),
                  tk_poisoned_alloc(OUTPUT_ELEMENTS * sizeof(uint16_t)),
                  tk_poisoned_alloc(OUTPUT_ELEMENTS),
                  tk_poisoned_alloc(OUTPUT_ELEMENTS * sizeof(uint16_t)),
                  tk_poisoned_alloc(OUTPUT_ELEMENTS) };
    assert_true(o.f32 && o.bf16 && o.packed && o.scales_t && o.zeros_t);
    poison(&o);
    expect_status("validate", moeint4_layout_validate(m), status);
    expect_message("validate", needle1, needle2);
    expect_status("dequantize_f32", moeint4_layout_dequantize_f32(m, o.f32), status);
    expect_message("dequantize_f32", needle1, needle2);
    expect_status("dequantize_bf16", moeint4_layout_dequantize_bf16(m, o.bf16), status);
    expect_message("dequantize_bf16", needle1, needle2);
    /* The XPU conversion refuses non-GPTQ_SYM sources as UNSUPPORTED, but only
     * after the shape checks; data errors of such sources are not reached. */
    moeint4_status xpu = moeint4_layout_gptq_to_xpu(m, o.packed, o.scales_t);
    if (!m || m->format == MOEINT4_FORMAT_GPTQ_SYM || xpu != MOEINT4_UNSUPPORTED) {
        expect_status("gptq_to_xpu", xpu, status);
        expect_message("gptq_to_xpu", needle1, needle2);
    }
    /* moeint4_layout_to_xpu takes every format: the same refusals */
    expect_status("to_xpu", moeint4_layout_to_xpu(m, o.packed, o.scales_t, o.zeros_t), status);
    expect_message("to_xpu", needle1, needle2);
    expect_untouched(&o);
    free(o.f32);
    free(o.bf16);
    free(o.packed);
    free(o.scales_t);
    free(o.zeros_t);
}

static void expect_accepted(const moeint4_quant_matrix *m)
{
    moeint4_status status = moeint4_layout_validate(m);
    if (status != MOEINT4_SUCCESS) {
        print_error("validate refused a good matrix: %s\n", moeint4_last_error());
        fail();
    }
    assert_string_equal(moeint4_last_error(), "");
}

typedef struct fixture {
    tk_matrix sym, asym, awq;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    tk_rng rng;
    tk_rng_seed(&rng, 7);
    if (!f ||
        tk_matrix_random(&f->sym, MOEINT4_FORMAT_GPTQ_SYM, 0, BASE_EXPERTS, BASE_IN, BASE_OUT,
                         BASE_GROUP, MOEINT4_DTYPE_F16, 0.01, 1, &rng) != 0 ||
        tk_matrix_random(&f->asym, MOEINT4_FORMAT_GPTQ_ASYM, 1, BASE_EXPERTS, BASE_IN, BASE_OUT,
                         BASE_GROUP, MOEINT4_DTYPE_BF16, 0.01, 1, &rng) != 0 ||
        tk_matrix_random(&f->awq, MOEINT4_FORMAT_AWQ, 0, BASE_EXPERTS, BASE_IN, BASE_OUT,
                         BASE_GROUP, MOEINT4_DTYPE_F16, 0.01, 1, &rng) != 0)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tk_matrix_free(&f->sym);
    tk_matrix_free(&f->asym);
    tk_matrix_free(&f->awq);
    free(f);
    return 0;
}

static void test_base_matrices_accepted(void **state)
{
    fixture *f = *state;
    moeint4_quant_matrix sym = tk_matrix_view(&f->sym), asym = tk_matrix_view(&f->asym),
                         awq = tk_matrix_view(&f->awq);
    expect_refused(NULL, MOEINT4_INVALID_ARGUMENT, "src", "NULL"); /* leaves an error set */
    expect_accepted(&sym); /* ...which a successful call clears */
    expect_accepted(&asym);
    expect_accepted(&awq);
}

static void test_struct_size(void **state)
{
    fixture *f = *state;
    moeint4_quant_matrix m = tk_matrix_view(&f->sym);
    m.struct_size = 0;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src->struct_size = 0", "moeint4_quant_matrix");
    m.struct_size = MOEINT4_QUANT_MATRIX_MIN_SIZE - 1;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src->struct_size", "first published size");
    m.struct_size = MOEINT4_QUANT_MATRIX_MIN_SIZE;
    expect_accepted(&m);
    /* A newer caller's larger struct is fine (fields past ours are not read). */
    struct {
        moeint4_quant_matrix m;
        char newer_fields[32];
    } larger;
    memset(&larger, 0x5a, sizeof larger);
    larger.m = tk_matrix_view(&f->sym);
    larger.m.struct_size = sizeof larger;
    expect_accepted(&larger.m);
}

static void test_enums(void **state)
{
    fixture *f = *state;
    const int bad_formats[] = { 0, 4, -1 };
    for (int i = 0; i < 3; i++) {
        moeint4_quant_matrix m = tk_matrix_view(&f->sym);
        m.format = (moeint4_format)bad_formats[i];
        expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.format", "is not GPTQ_SYM");
    }
    moeint4_quant_matrix m = tk_matrix_view(&f->sym);
    m.zero_offset = 1;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.zero_offset = 1", "GPTQ_SYM");
    m = tk_matrix_view(&f->awq);
    m.zero_offset = 1;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.zero_offset = 1", "AWQ");
    m = tk_matrix_view(&f->asym);
    m.zero_offset = 2;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.zero_offset = 2", NULL);
    m.zero_offset = -1;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.zero_offset = -1", NULL);

    const int bad_dtypes[] = { MOEINT4_DTYPE_F32, 4, -1 };
    for (int i = 0; i < 3; i++) {
        m = tk_matrix_view(&f->sym);
        m.scales_dtype = (moeint4_dtype)bad_dtypes[i];
        expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.scales_dtype", NULL);
    }
    const int bad_groups[] = { 0, 16, 256, -2, 8 };
    for (int i = 0; i < 5; i++) {
        m = tk_matrix_view(&f->sym);
        m.group_size = bad_groups[i];
        expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.group_size", "32, 64, 128 or -1");
    }
}

/* scales_dtype 0 means F16: same bytes out as F16 spelled out. */
static void test_default_scales_dtype(void **state)
{
    fixture *f = *state;
    moeint4_quant_matrix m = tk_matrix_view(&f->sym);
    size_t count = (size_t)BASE_EXPERTS * BASE_OUT * BASE_IN;
    uint16_t *spelled = tk_poisoned_alloc(count * 2), *defaulted = tk_poisoned_alloc(count * 2);
    assert_int_equal(moeint4_layout_dequantize_bf16(&m, spelled), MOEINT4_SUCCESS);
    m.scales_dtype = 0;
    assert_int_equal(moeint4_layout_dequantize_bf16(&m, defaulted), MOEINT4_SUCCESS);
    assert_memory_equal(spelled, defaulted, count * 2);
    free(spelled);
    free(defaulted);
}

static void test_shapes(void **state)
{
    fixture *f = *state;
    moeint4_quant_matrix m = tk_matrix_view(&f->sym);
    m.num_experts = 0;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.num_experts = 0", "positive");
    m.num_experts = -3;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.num_experts = -3", NULL);
    m = tk_matrix_view(&f->sym);
    m.in_features = 0;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.in_features = 0", "positive");
    m.in_features = -64;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.in_features = -64", NULL);
    m = tk_matrix_view(&f->sym);
    m.out_features = 0;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.out_features = 0", "positive");
    m.out_features = -16;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.out_features = -16", NULL);

    /* IN % 8, for every format, per-channel included. */
    moeint4_quant_matrix views[3] = { tk_matrix_view(&f->sym), tk_matrix_view(&f->asym),
                                      tk_matrix_view(&f->awq) };
    for (int i = 0; i < 3; i++) {
        m = views[i];
        m.group_size = -1;
        m.in_features = 60;
        expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.in_features = 60", "not a multiple of 8");
        /* IN % group_size */
        m = views[i];
        m.group_size = 64;
        m.in_features = 96;
        expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.in_features = 96",
                       "not a multiple of group_size 64");
    }
    /* OUT % 8 for the formats packed along OUT. */
    m = views[1];
    m.out_features = 12;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.out_features = 12", "GPTQ_ASYM");
    m = views[2];
    m.out_features = 12;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src.out_features = 12", "AWQ");
    /* GPTQ_SYM packs nothing along OUT: OUT = 12 is fine (the arrays are
     * larger than this view needs). */
    m = views[0];
    m.out_features = 12;
    expect_accepted(&m);
}

static void test_overflowing_sizes(void **state)
{
    fixture *f = *state;
    /* qweight bytes overflow size_t. */
    moeint4_quant_matrix m = tk_matrix_view(&f->sym);
    m.num_experts = INT_MAX;
    m.in_features = INT_MAX / 128 * 128;
    m.out_features = INT_MAX;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_qweight", "overflow");
    m = tk_matrix_view(&f->awq);
    m.num_experts = INT_MAX;
    m.in_features = INT_MAX / 128 * 128;
    m.out_features = INT_MAX / 8 * 8;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_qweight", "overflow");
    /* The checkpoint fits (2^62 bytes of qweight) but a dense f32 / bf16
     * output of 2^63 weights does not: refused before any array is read. */
    m = tk_matrix_view(&f->sym);
    m.num_experts = 1 << 21;
    m.in_features = 1 << 21;
    m.out_features = 1 << 21;
    outputs o = { tk_poisoned_alloc(64), tk_poisoned_alloc(64), NULL, NULL, NULL };
    assert_int_equal(moeint4_layout_dequantize_f32(&m, o.f32), MOEINT4_INVALID_ARGUMENT);
    expect_message("dequantize_f32", "out:", "overflow");
    assert_int_equal(moeint4_layout_dequantize_bf16(&m, o.bf16), MOEINT4_INVALID_ARGUMENT);
    expect_message("dequantize_bf16", "out:", "overflow");
    assert_true(tk_still_poisoned(o.f32, 64));
    assert_true(tk_still_poisoned(o.bf16, 64));
    free(o.f32);
    free(o.bf16);
}

static void test_pointers(void **state)
{
    fixture *f = *state;
    moeint4_quant_matrix m = tk_matrix_view(&f->asym);
    m.qweight = NULL;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_qweight is NULL", NULL);
    m = tk_matrix_view(&f->asym);
    m.scales = NULL;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_scales is NULL", NULL);
    m = tk_matrix_view(&f->asym);
    m.qzeros = NULL;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_qzeros is NULL", "GPTQ_ASYM");
    m = tk_matrix_view(&f->awq);
    m.qzeros = NULL;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_qzeros is NULL", "AWQ");
    /* GPTQ_SYM has no zeros: NULL is right, and a given array means the
     * checkpoint was mislabelled (refused, never silently ignored). */
    m = tk_matrix_view(&f->sym);
    assert_null(m.qzeros);
    expect_accepted(&m);
    m.qzeros = f->asym.qzeros;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_qzeros is not NULL", "GPTQ_SYM");

    /* NULL outputs, with the other output poisoned and left alone. */
    m = tk_matrix_view(&f->sym);
    uint8_t *packed = tk_poisoned_alloc(OUTPUT_ELEMENTS);
    uint16_t *scales_t = tk_poisoned_alloc(OUTPUT_ELEMENTS * 2);
    assert_int_equal(moeint4_layout_dequantize_f32(&m, NULL), MOEINT4_INVALID_ARGUMENT);
    expect_message("dequantize_f32", "out is NULL", NULL);
    assert_int_equal(moeint4_layout_dequantize_bf16(&m, NULL), MOEINT4_INVALID_ARGUMENT);
    expect_message("dequantize_bf16", "out is NULL", NULL);
    assert_int_equal(moeint4_layout_gptq_to_xpu(&m, NULL, scales_t), MOEINT4_INVALID_ARGUMENT);
    expect_message("gptq_to_xpu", "packed is NULL", NULL);
    assert_int_equal(moeint4_layout_gptq_to_xpu(&m, packed, NULL), MOEINT4_INVALID_ARGUMENT);
    expect_message("gptq_to_xpu", "scales_t is NULL", NULL);
    assert_true(tk_still_poisoned(packed, OUTPUT_ELEMENTS));
    assert_true(tk_still_poisoned(scales_t, OUTPUT_ELEMENTS * 2));
    free(packed);
    free(scales_t);
}

/* Bad scales in F16 and BF16, in a copy of the scales array. */
static void test_scales(void **state)
{
    fixture *f = *state;
    typedef struct bad_scale {
        uint16_t f16, bf16;
        const char *printed;
    } bad_scale;
    const bad_scale bad[] = {
        { 0x7e00u, 0x7fc0u, "= nan is" },
        { 0x7c00u, 0x7f80u, "= inf is" },
        { 0xfc00u, 0xff80u, "= -inf is" },
        { 0x0000u, 0x0000u, "= 0 is" },
        { 0x8000u, 0x8000u, "= -0 is" },
        { 0xbe00u, 0xbfc0u, "= -1.5 is" },
        { 0x8001u, 0x8001u, "is not a finite positive scale" },
    };
    const tk_matrix *sources[2] = { &f->sym, &f->asym }; /* F16 and BF16 scales */
    size_t count = (size_t)BASE_EXPERTS * BASE_GROUPS * BASE_OUT;
    for (int s = 0; s < 2; s++) {
        uint16_t *scales = tk_copy_alloc(sources[s]->scales, count * 2);
        moeint4_quant_matrix m = tk_matrix_view(sources[s]);
        m.scales = scales;
        int is_bf16 = m.scales_dtype == MOEINT4_DTYPE_BF16;
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            size_t at = ((size_t)1 * BASE_GROUPS + 1) * BASE_OUT + 5; /* [1][1][5] */
            uint16_t saved = scales[at];
            scales[at] = is_bf16 ? bad[b].bf16 : bad[b].f16;
            expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_scales[1][1][5] ", bad[b].printed);
            scales[at] = saved;
        }
        /* The smallest positive subnormal is a finite positive scale. */
        scales[0] = 0x0001u;
        expect_accepted(&m);
        free(scales);
    }
    /* The exact wording, through the internal call with a backend's name. */
    uint16_t *scales = tk_copy_alloc(f->sym.scales, count * 2);
    moeint4_quant_matrix m = tk_matrix_view(&f->sym);
    m.scales = scales;
    scales[(size_t)BASE_GROUPS * BASE_OUT + 9] = 0x7e00u; /* [1][0][9] */
    assert_int_equal(mi4_layout_validate(&m, "w13"), MOEINT4_INVALID_ARGUMENT);
    assert_string_equal(moeint4_last_error(),
                        "w13_scales[1][0][9] = nan is not a finite positive scale");
    free(scales);
}

static void test_g_idx(void **state)
{
    fixture *f = *state;
    size_t count = (size_t)BASE_EXPERTS * BASE_IN;
    int32_t *g_idx = tk_copy_alloc(f->awq.g_idx, count * sizeof(int32_t));
    moeint4_quant_matrix m = tk_matrix_view(&f->awq);
    assert_non_null(m.g_idx); /* trivial, from the kit */
    expect_accepted(&m);
    m.g_idx = g_idx;
    /* act-order: a column of group 0 assigned to group 1, in expert 1 */
    g_idx[BASE_IN + 3] = 1;
    expect_refused(&m, MOEINT4_UNSUPPORTED, "src_g_idx[1][3] = 1", "AWQ has no act-order");
    /* GPTQ act-order is accepted when every group holds group_size rows ... */
    moeint4_quant_matrix sym = tk_matrix_view(&f->sym);
    int32_t *sym_g_idx = tk_copy_alloc(f->sym.g_idx, count * sizeof(int32_t));
    sym.g_idx = sym_g_idx;
    sym_g_idx[BASE_IN + 3] = 1;
    sym_g_idx[BASE_IN + BASE_GROUP] = 0; /* a swap keeps both groups at BASE_GROUP rows */
    expect_accepted(&sym);
    /* ... and refused when it does not */
    sym_g_idx[BASE_IN + BASE_GROUP] = 1;
    expect_refused(&sym, MOEINT4_INVALID_ARGUMENT, "src_g_idx[1] puts 31 rows in group 0",
                   "exactly group_size = 32");
    free(sym_g_idx);
    g_idx[BASE_IN + 3] = 0;
    expect_accepted(&m);
    /* out of [0, G): malformed, not merely unsupported */
    g_idx[40] = BASE_GROUPS;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_g_idx[0][40] = 2", "outside [0, 2)");
    g_idx[40] = -1;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_g_idx[0][40] = -1", NULL);
    g_idx[40] = 1;
    expect_accepted(&m);
    /* per-channel: every entry 0 is trivial; anything else is not */
    m.group_size = -1;
    for (size_t i = 0; i < count; i++)
        g_idx[i] = 0;
    expect_accepted(&m);
    g_idx[BASE_IN - 1] = 1;
    expect_refused(&m, MOEINT4_INVALID_ARGUMENT, "src_g_idx[0][63] = 1", "outside [0, 1)");
    free(g_idx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base_matrices_accepted),
        cmocka_unit_test(test_struct_size),
        cmocka_unit_test(test_enums),
        cmocka_unit_test(test_default_scales_dtype),
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_overflowing_sizes),
        cmocka_unit_test(test_pointers),
        cmocka_unit_test(test_scales),
        cmocka_unit_test(test_g_idx),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
