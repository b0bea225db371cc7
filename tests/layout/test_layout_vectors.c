/* The layout module against tests/data/vllm (made with vLLM's own helpers):
 * the XPU layout byte for byte, the f32 dequantization bit for bit, bf16 =
 * the f32 value rounded once, and vLLM's twice-rounded emulation weights
 * within one bf16 ulp. Also the natural-order unpack against the debug
 * arrays. */
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

typedef struct vector_case {
    const char *name;
    moeint4_format format;
    int experts, hidden, intermediate, group_size;
} vector_case;

static const vector_case case1 = {
    "case1_gptq_sym_g128", MOEINT4_FORMAT_GPTQ_SYM, 4, 256, 128, 128
};
static const vector_case case3 = { "case3_awq_asym_g64", MOEINT4_FORMAT_AWQ, 3, 128, 64, 64 };

/* One projection of a case, its arrays read from the vector files. */
typedef struct projection {
    const vector_case *vc;
    const char *prefix; /* "w13" or "w2" */
    moeint4_quant_matrix view;
    void *qweight, *scales, *qzeros;
    size_t weights, groups; /* E*OUT*IN and E*G*OUT */
} projection;

static void *read_array(const vector_case *vc, const char *prefix, const char *suffix, size_t bytes)
{
    char array[64];
    snprintf(array, sizeof array, "%s_%s", prefix, suffix);
    void *data = tk_read_vector_array(vc->name, array, bytes);
    if (!data) {
        print_error("%s/%s.bin is missing or not %zu bytes\n", vc->name, array, bytes);
        fail();
    }
    return data;
}

static void load_projection(projection *p, const vector_case *vc, int is_w13)
{
    memset(p, 0, sizeof *p);
    p->vc = vc;
    p->prefix = is_w13 ? "w13" : "w2";
    int in = is_w13 ? vc->hidden : vc->intermediate;
    int out = is_w13 ? 2 * vc->intermediate : vc->hidden;
    int groups = in / vc->group_size;
    p->weights = (size_t)vc->experts * (size_t)in * (size_t)out;
    p->groups = (size_t)vc->experts * (size_t)groups * (size_t)out;
    p->qweight = read_array(vc, p->prefix, "qweight", p->weights / 2);
    p->scales = read_array(vc, p->prefix, "scales", p->groups * 2);
    if (vc->format != MOEINT4_FORMAT_GPTQ_SYM)
        p->qzeros = read_array(vc, p->prefix, "qzeros", p->groups / 2);
    p->view.struct_size = sizeof p->view;
    p->view.format = vc->format;
    p->view.num_experts = vc->experts;
    p->view.in_features = in;
    p->view.out_features = out;
    p->view.group_size = vc->group_size;
    p->view.scales_dtype = MOEINT4_DTYPE_F16;
    p->view.qweight = p->qweight;
    p->view.scales = p->scales;
    p->view.qzeros = p->qzeros;
    assert_int_equal(moeint4_layout_validate(&p->view), MOEINT4_SUCCESS);
}

static void free_projection(projection *p)
{
    free(p->qweight);
    free(p->scales);
    free(p->qzeros);
}

static void expect_bytes(const vector_case *vc, const char *array, const void *ours, size_t bytes)
{
    uint8_t *theirs = tk_read_vector_array(vc->name, array, bytes);
    assert_non_null(theirs);
    const uint8_t *a = ours;
    for (size_t i = 0; i < bytes; i++)
        if (a[i] != theirs[i]) {
            print_error("%s/%s differs first at byte %zu: ours 0x%02x, vLLM 0x%02x\n", vc->name,
                        array, i, a[i], theirs[i]);
            free(theirs);
            fail();
        }
    free(theirs);
}

static void check_xpu_case1(int is_w13)
{
    projection p;
    load_projection(&p, &case1, is_w13);
    size_t packed_bytes = p.weights / 2, scales_bytes = p.groups * 2;
    uint8_t *packed = tk_poisoned_alloc(packed_bytes);
    void *scales_t = tk_poisoned_alloc(scales_bytes);
    assert_int_equal(moeint4_layout_gptq_to_xpu(&p.view, packed, scales_t), MOEINT4_SUCCESS);
    expect_bytes(&case1, is_w13 ? "xpu_w13_u8" : "xpu_w2_u8", packed, packed_bytes);
    expect_bytes(&case1, is_w13 ? "xpu_w13_scales" : "xpu_w2_scales", scales_t, scales_bytes);
    free(packed);
    free(scales_t);
    free_projection(&p);
}

static void test_case1_xpu_w13(void **state)
{
    (void)state;
    check_xpu_case1(1);
}

static void test_case1_xpu_w2(void **state)
{
    (void)state;
    check_xpu_case1(0);
}

/* f32 bit-exact with deq_*_f32; bf16 = that value rounded once; vLLM's
 * emulation (rounded twice) within one ulp. */
static void check_dequantized(const vector_case *vc, int is_w13)
{
    projection p;
    load_projection(&p, vc, is_w13);
    char name[32];
    snprintf(name, sizeof name, "deq_%s_f32", p.prefix);
    float *want = tk_read_vector_array(vc->name, name, p.weights * sizeof(float));
    snprintf(name, sizeof name, "emu_%s_bf16", p.prefix);
    uint16_t *emulation = tk_read_vector_array(vc->name, name, p.weights * sizeof(uint16_t));
    assert_non_null(want);
    assert_non_null(emulation);

    float *f32 = tk_poisoned_alloc(p.weights * sizeof(float));
    uint16_t *bf16 = tk_poisoned_alloc(p.weights * sizeof(uint16_t));
    assert_int_equal(moeint4_layout_dequantize_f32(&p.view, f32), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_layout_dequantize_bf16(&p.view, bf16), MOEINT4_SUCCESS);
    size_t emulation_differs = 0;
    for (size_t i = 0; i < p.weights; i++) {
        if (memcmp(&f32[i], &want[i], sizeof(float)) != 0) {
            print_error("%s %s f32[%zu] = %.9g, vLLM %.9g\n", vc->name, p.prefix, i, (double)f32[i],
                        (double)want[i]);
            fail();
        }
        if (bf16[i] != tk_f32_to_bf16(want[i])) {
            print_error("%s %s bf16[%zu] = 0x%04x, want round(%.9g) = 0x%04x\n", vc->name, p.prefix,
                        i, bf16[i], (double)want[i], tk_f32_to_bf16(want[i]));
            fail();
        }
        int32_t ulps = tk_bf16_ordinal(bf16[i]) - tk_bf16_ordinal(emulation[i]);
        if (ulps < -1 || ulps > 1) {
            print_error("%s %s bf16[%zu] = 0x%04x is %d ulps from vLLM's emulation 0x%04x\n",
                        vc->name, p.prefix, i, bf16[i], (int)ulps, emulation[i]);
            fail();
        }
        emulation_differs += ulps != 0;
    }
    print_message("%s %s: %zu of %zu bf16 weights differ from vLLM's twice-rounded emulation "
                  "by one ulp (%.2f%%)\n",
                  vc->name, p.prefix, emulation_differs, p.weights,
                  100.0 * (double)emulation_differs / (double)p.weights);
    /* The double rounding must show up somewhere, or this comparison proved nothing. */
    assert_true(emulation_differs > 0);
    free(want);
    free(emulation);
    free(f32);
    free(bf16);
    free_projection(&p);
}

static void test_case1_dequantize(void **state)
{
    (void)state;
    check_dequantized(&case1, 1);
    check_dequantized(&case1, 0);
}

static void test_case3_dequantize(void **state)
{
    (void)state;
    check_dequantized(&case3, 1);
    check_dequantized(&case3, 0);
}

/* unpack_expert against debug_*_q_natural ([E][IN][OUT], checkpoint
 * orientation) and debug_*_zero_natural ([E][G][OUT], asym only). */
static void check_unpacked(const vector_case *vc, int is_w13)
{
    projection p;
    load_projection(&p, vc, is_w13);
    int in = p.view.in_features, out = p.view.out_features;
    size_t per_expert = (size_t)in * (size_t)out;
    size_t groups = p.groups / (size_t)vc->experts;
    char name[48];
    snprintf(name, sizeof name, "debug_%s_q_natural", p.prefix);
    uint8_t *natural = tk_read_vector_array(vc->name, name, p.weights);
    assert_non_null(natural);
    uint8_t *natural_zeros = NULL;
    if (vc->format != MOEINT4_FORMAT_GPTQ_SYM) {
        snprintf(name, sizeof name, "debug_%s_zero_natural", p.prefix);
        natural_zeros = tk_read_vector_array(vc->name, name, p.groups);
        assert_non_null(natural_zeros);
    }
    uint8_t *codes = tk_poisoned_alloc(per_expert);
    uint8_t *zeros = tk_poisoned_alloc(groups);
    float *scales = tk_poisoned_alloc(groups * sizeof(float));
    const uint16_t *scale_bits = p.scales;
    for (int e = 0; e < vc->experts; e++) {
        mi4_layout_unpack_expert(&p.view, e, codes, zeros, scales);
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++)
                if (codes[(size_t)o * in + i] !=
                    natural[((size_t)e * in + (size_t)i) * out + (size_t)o]) {
                    print_error("%s %s code [%d][%d][%d] differs\n", vc->name, p.prefix, e, o, i);
                    fail();
                }
        for (size_t j = 0; j < groups; j++) {
            int want_zero = natural_zeros ? natural_zeros[(size_t)e * groups + j] : 8;
            assert_int_equal(zeros[j], want_zero);
            float want_scale = tk_f16_to_f32(scale_bits[(size_t)e * groups + j]);
            assert_memory_equal(&scales[j], &want_scale, sizeof(float));
        }
    }
    free(natural);
    free(natural_zeros);
    free(codes);
    free(zeros);
    free(scales);
    free_projection(&p);
}

static void test_unpack_natural(void **state)
{
    (void)state;
    check_unpacked(&case1, 1);
    check_unpacked(&case1, 0);
    check_unpacked(&case3, 1);
    check_unpacked(&case3, 0);
}

/* The XPU layout holds symmetric GPTQ only: case 3 (AWQ) is refused. */
static void test_case3_xpu_refused(void **state)
{
    (void)state;
    projection p;
    load_projection(&p, &case3, 1);
    uint8_t *packed = tk_poisoned_alloc(p.weights / 2);
    void *scales_t = tk_poisoned_alloc(p.groups * 2);
    assert_int_equal(moeint4_layout_gptq_to_xpu(&p.view, packed, scales_t), MOEINT4_UNSUPPORTED);
    assert_non_null(strstr(moeint4_last_error(), "AWQ"));
    assert_true(tk_still_poisoned(packed, p.weights / 2));
    assert_true(tk_still_poisoned(scales_t, p.groups * 2));
    free(packed);
    free(scales_t);
    free_projection(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case1_xpu_w13),    cmocka_unit_test(test_case1_xpu_w2),
        cmocka_unit_test(test_case1_dequantize), cmocka_unit_test(test_case3_dequantize),
        cmocka_unit_test(test_unpack_natural),   cmocka_unit_test(test_case3_xpu_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
