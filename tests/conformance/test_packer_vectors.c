/* The test kit's packer against tests/data/vllm (produced by vLLM's own
 * packers): packing the natural-order codes and zeros must give the
 * checkpoint arrays byte for byte, tk_matrix_value must equal vLLM's exact
 * f32 dequantization, and the reference MoE must reproduce ref_out_f32. */
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

static void expect_same_bytes(const char *case_name, const char *array, const void *ours,
                              size_t bytes)
{
    void *theirs = tk_read_vector_array(case_name, array, bytes);
    assert_non_null(theirs);
    if (memcmp(ours, theirs, bytes) != 0) {
        const uint8_t *a = ours, *b = theirs;
        size_t first = 0;
        while (a[first] == b[first])
            first++;
        print_error("%s/%s differs first at byte %zu (ours 0x%02x, vLLM 0x%02x)\n", case_name,
                    array, first, a[first], b[first]);
        free(theirs);
        fail();
    }
    free(theirs);
}

static size_t qweight_bytes(const tk_matrix *m)
{
    return (size_t)m->num_experts * m->in_features * m->out_features / 2;
}

static size_t qzeros_bytes(const tk_matrix *m)
{
    return (size_t)m->num_experts * m->num_groups * m->out_features / 2;
}

/* Every dequantized weight equals vLLM's (q - z) * float(scale) exactly. */
static void expect_dequantized(const char *case_name, const char *array, const tk_matrix *m)
{
    size_t count = (size_t)m->num_experts * m->out_features * m->in_features;
    float *want = tk_read_vector_array(case_name, array, count * sizeof(float));
    assert_non_null(want);
    size_t index = 0;
    for (int e = 0; e < m->num_experts; e++)
        for (int o = 0; o < m->out_features; o++)
            for (int i = 0; i < m->in_features; i++, index++)
                if (tk_matrix_value(m, e, o, i) != (double)want[index]) {
                    print_error("%s[%d][%d][%d]: ours %.9g, vLLM %.9g\n", array, e, o, i,
                                tk_matrix_value(m, e, o, i), (double)want[index]);
                    free(want);
                    fail();
                }
    free(want);
}

static void test_vector_case(void **state)
{
    const tk_vector_params *p = *state;
    tk_vector_case c;
    if (tk_vector_case_load(&c, p) != 0)
        fail_msg("cannot read vectors of %s under %s", p->name, MOEINT4_VECTORS_DIR);
    expect_same_bytes(p->name, "w13_qweight", c.layer.w13.qweight, qweight_bytes(&c.layer.w13));
    expect_same_bytes(p->name, "w2_qweight", c.layer.w2.qweight, qweight_bytes(&c.layer.w2));
    if (c.layer.w13.qzeros) {
        expect_same_bytes(p->name, "w13_qzeros", c.layer.w13.qzeros, qzeros_bytes(&c.layer.w13));
        expect_same_bytes(p->name, "w2_qzeros", c.layer.w2.qzeros, qzeros_bytes(&c.layer.w2));
    }
    expect_dequantized(p->name, "deq_w13_f32", &c.layer.w13);
    expect_dequantized(p->name, "deq_w2_f32", &c.layer.w2);

    /* vLLM computed ref_out_f32 in f32 on the exact weights: our double
     * reference agrees to f32 accumulation error (~1e-6 relative). */
    size_t count = (size_t)p->num_tokens * p->hidden_size;
    double *ours = malloc(count * sizeof *ours);
    assert_non_null(ours);
    tk_activation act = { MOEINT4_ACTIVATION_SILU, 0, 0, 0, 0 };
    tk_reference_moe(&c.layer, MOEINT4_DTYPE_BF16, c.hidden, p->num_tokens, p->topk, c.topk_ids,
                     c.topk_weights, &act, NULL, 0, ours);
    double error = tk_relative_l2(MOEINT4_DTYPE_F32, c.ref_out, ours, count);
    print_message("%s: reference vs ref_out_f32 relative L2 %.3g\n", p->name, error);
    assert_true(error <= 1e-5);
    free(ours);
    tk_vector_case_free(&c);
}

int main(void)
{
    struct CMUnitTest tests[] = {
        { "case1_gptq_sym_g128", test_vector_case, NULL, NULL, NULL },
        { "case3_awq_asym_g64", test_vector_case, NULL, NULL, NULL },
    };
    for (int i = 0; i < 2; i++) {
        tests[i].initial_state = (void *)tk_vector_case_params(i);
        assert_non_null(tests[i].initial_state);
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
