/* The oneDNN path's matmul on oneDNN's CPU engine with f32 operands (the
 * GPU engine runs the same calls with f16) against a double reference, on
 * shapes like one expert's w13 and w2 products. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tk_cmocka.h"

#include "testkit.h"
#include "xpu_dnnl.h"
#include "xpu_test_util.h"

static void check_matmul(mi4_xpu_dnnl *dnnl, tk_rng *rng, int M, int N, int K)
{
    float *a = malloc((size_t)M * K * sizeof(float));
    float *b = malloc((size_t)N * K * sizeof(float));
    float *c = malloc((size_t)M * N * sizeof(float));
    assert_true(a && b && c);
    for (int i = 0; i < M * K; ++i)
        a[i] = (float)tk_rng_normal(rng);
    for (int i = 0; i < N * K; ++i)
        b[i] = (float)tk_rng_range(rng, -0.3, 0.3);
    for (int i = 0; i < M * N; ++i)
        c[i] = NAN;
    char err[256] = "";
    moeint4_status st =
        mi4_xpu_dnnl_matmul(dnnl, MOEINT4_DTYPE_F32, M, N, K, a, b, c, err, sizeof err);
    if (st != MOEINT4_SUCCESS)
        fail_msg("oneDNN matmul %dx%dx%d: %s", M, N, K, err);
    for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) {
            double want = 0, sum_abs = 0;
            for (int k = 0; k < K; ++k) {
                double term = (double)a[m * K + k] * b[n * K + k];
                want += term, sum_abs += fabs(term);
            }
            double bound = xt_sum_error_bound(K, sum_abs);
            double diff = fabs((double)c[m * N + n] - want);
            if (!(diff <= bound))
                fail_msg("c[%d][%d] = %.9g, want %.9g (bound %.3g), shape %dx%dx%d", m, n,
                         (double)c[m * N + n], want, bound, M, N, K);
        }
    free(a);
    free(b);
    free(c);
}

static void test_cpu_engine_matmul_matches_reference(void **state)
{
    (void)state;
    mi4_xpu_dnnl *dnnl = NULL;
    char err[256] = "";
    if (mi4_xpu_dnnl_create_cpu(&dnnl, err, sizeof err) != MOEINT4_SUCCESS)
        fail_msg("oneDNN CPU engine: %s", err);
    /* the CPU engine multiplies f32 whatever the activations are */
    assert_int_equal(mi4_xpu_dnnl_dtype(dnnl, MOEINT4_DTYPE_BF16), MOEINT4_DTYPE_F32);
    assert_int_equal(mi4_xpu_dnnl_dtype(dnnl, MOEINT4_DTYPE_F16), MOEINT4_DTYPE_F32);
    assert_false(mi4_xpu_dnnl_has_int4(dnnl)); /* int4 needs oneDNN >= 3.5 on a GPU */
    tk_rng rng;
    tk_rng_seed(&rng, 77);
    check_matmul(dnnl, &rng, 1, 48, 64);   /* one token */
    check_matmul(dnnl, &rng, 70, 96, 128); /* an expert with many tokens: w13 (2N x K) */
    check_matmul(dnnl, &rng, 70, 128, 48); /* and its w2 (K x N) */
    check_matmul(dnnl, &rng, 5, 7, 13);    /* odd sizes */
    mi4_xpu_dnnl_destroy(dnnl);
}

static void test_int4_matmul_refused_without_onednn_3_5(void **state)
{
    (void)state;
    mi4_xpu_dnnl *dnnl = NULL;
    char err[256] = "";
    assert_int_equal(mi4_xpu_dnnl_create_cpu(&dnnl, err, sizeof err), MOEINT4_SUCCESS);
    float a[4] = { 1, 2, 3, 4 }, c[4];
    uint8_t packed[4] = { 0x88, 0x88, 0x88, 0x88 };
    uint16_t scales[2] = { 0x3c00, 0x3c00 };
    moeint4_status st = mi4_xpu_dnnl_matmul_int4(dnnl, MOEINT4_DTYPE_F16, 1, 2, 4, 4, a, packed,
                                                 scales, c, err, sizeof err);
    if (mi4_xpu_dnnl_has_int4(dnnl))
        tk_skip("this oneDNN has int4 weights: the refusal is not there to check");
    assert_int_equal(st, MOEINT4_UNSUPPORTED);
    assert_non_null(strstr(err, "3.5"));
    mi4_xpu_dnnl_destroy(dnnl);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_engine_matmul_matches_reference),
        cmocka_unit_test(test_int4_matmul_refused_without_onednn_3_5),
    };
    return tk_cmocka_run("xpu oneDNN", tests, sizeof tests / sizeof tests[0], NULL, NULL, argc,
                         argv);
}
