/* Plugin loading, one scenario per process (the registry loads plugins once):
 * ctest runs this program with MOEINT4_BACKEND_PATH pointing at a folder of
 * fake plugins built by tests/core/CMakeLists.txt, and the scenario name as
 * argument. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_test_util.h"
#include "fake_backend.h"

static const char *scenario;

static moeint4_backend_info query(moeint4_backend id)
{
    moeint4_backend_info info;
    memset(&info, 0x5a, sizeof info);
    info.struct_size = sizeof info;
    assert_ok(moeint4_backend_query(id, &info));
    return info;
}

/* The HIP plugin failed to load: reported, listed, and refused when forced. */
static void expect_hip_refused(const char *words)
{
    moeint4_backend_info info = query(MOEINT4_BACKEND_HIP);
    assert_int_equal(info.compiled, 0);
    assert_int_equal(info.available, 0);
    if (!strstr(info.reason, words))
        fail_msg("reason \"%s\" lacks \"%s\"", info.reason, words);
    moeint4_backend ids[64];
    int count = 0;
    assert_ok(moeint4_backend_list(ids, 64, &count));
    int listed = 0;
    for (int i = 0; i < count; i++)
        listed |= ids[i] == MOEINT4_BACKEND_HIP;
    assert_true(listed);
    moeint4_context_options options = util_options(MOEINT4_BACKEND_HIP);
    moeint4_context *ctx = NULL;
    assert_status_says(moeint4_context_create(&options, &ctx), MOEINT4_BACKEND_UNAVAILABLE, words);
    assert_null(ctx);
}

static void check_good(void)
{
    moeint4_backend_info hip = query(MOEINT4_BACKEND_HIP);
    assert_int_equal(hip.compiled, 1);
    assert_int_equal(hip.available, 1);
    assert_string_equal(hip.name, "hip");
    assert_string_equal(hip.reason, "");
    moeint4_backend_info xpu = query(MOEINT4_BACKEND_XPU);
    assert_int_equal(xpu.compiled, 1);
    assert_int_equal(xpu.available, 0);
    assert_string_equal(xpu.reason, "fake device 0 is not plugged in");

    /* AUTO: HIP (priority 200) before CPU for GPTQ_SYM; CPU for AWQ */
    moeint4_context *ctx = util_context(MOEINT4_BACKEND_AUTO);
    tk_layer gptq, awq;
    util_make_layer(&gptq, MOEINT4_FORMAT_GPTQ_SYM, 1, 3);
    util_make_layer(&awq, MOEINT4_FORMAT_AWQ, 0, 4);
    moeint4_weights_desc desc = tk_layer_desc(&gptq);
    moeint4_weights *weights = NULL;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &weights));
    moeint4_backend backend;
    assert_ok(moeint4_weights_backend(weights, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_HIP);

    enum { M = 2, K = 64, TOPK = 2 };
    uint16_t hidden[M * K], output[M * K];
    int32_t ids[M * TOPK];
    float router[M * TOPK];
    util_random_batch(9, MOEINT4_DTYPE_BF16, M, TOPK, hidden, ids, router);
    memset(output, 0xff, sizeof output);
    moeint4_forward_args args = util_args(MOEINT4_DTYPE_BF16, M, TOPK, hidden, ids, router, output);
    assert_ok(moeint4_forward(ctx, weights, &args));
    for (int i = 0; i < M * K; i++)
        assert_int_equal(output[i], 0x3e80); /* the fake's 0.25 */
    moeint4_weights_release(weights);

    /* That context is bound to HIP now: AWQ is refused there, and served
     * by the CPU on a fresh AUTO context. */
    desc = tk_layer_desc(&awq);
    weights = NULL;
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &weights), MOEINT4_UNSUPPORTED,
                       "bound to backend hip (by its first prepared weights");
    assert_null(weights);
    moeint4_context_destroy(ctx);
    ctx = util_context(MOEINT4_BACKEND_AUTO);
    assert_ok(moeint4_weights_prepare(ctx, &desc, &weights));
    assert_ok(moeint4_weights_backend(weights, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU);
    assert_ok(moeint4_context_backend(ctx, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU); /* memory helpers follow the weights */
    moeint4_context_destroy(ctx);                   /* releases the AWQ weights */

    /* forced HIP cannot serve AWQ: said, not replaced by the CPU */
    ctx = util_context(MOEINT4_BACKEND_HIP);
    weights = NULL;
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &weights), MOEINT4_UNSUPPORTED,
                       "hip was requested but cannot serve this problem: fake backend serves one "
                       "format only");
    assert_null(weights);
    moeint4_context_destroy(ctx);
    tk_layer_free(&gptq);
    tk_layer_free(&awq);
}

static void test_scenario(void **state)
{
    (void)state;
    if (strcmp(scenario, "good") == 0) {
        check_good();
    } else if (strcmp(scenario, "nosym") == 0) {
        expect_hip_refused("libmoeint4-hip.so: moeint4_plugin_backend missing");
    } else if (strcmp(scenario, "badversion") == 0) {
        expect_hip_refused("libmoeint4-hip.so: api version 7, core expects 1");
    } else if (strcmp(scenario, "wrongid") == 0) {
        expect_hip_refused("its table says backend id 2, expected 3");
    } else if (strcmp(scenario, "corrupt") == 0 || strcmp(scenario, "truncated") == 0) {
        expect_hip_refused("libmoeint4-hip.so: cannot be loaded");
    } else if (strcmp(scenario, "missing") == 0) {
        /* every searched directory is named, the path's first */
        char words[4200];
        snprintf(words, sizeof words,
                 "libmoeint4-hip.so not found in %s:", getenv("MOEINT4_BACKEND_PATH"));
        expect_hip_refused(words);
        assert_int_equal(query(MOEINT4_BACKEND_XPU).compiled, 0);
    } else if (strcmp(scenario, "owndir") == 0) {
        /* found next to the program that holds the (static) library */
        assert_int_equal(query(MOEINT4_BACKEND_HIP).compiled, 1);
        assert_int_equal(query(MOEINT4_BACKEND_XPU).compiled, 1);
    } else if (strcmp(scenario, "precedence") == 0) {
        /* MOEINT4_BACKEND_PATH is searched first; the first file found decides */
        expect_hip_refused("api version 7, core expects 1");
        assert_int_equal(query(MOEINT4_BACKEND_XPU).compiled, 1);
    } else {
        fail_msg("unknown scenario %s", scenario);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCENARIO\n", argv[0]);
        return 2;
    }
    scenario = argv[1];
    unsetenv("MOEINT4_BACKEND");
    const struct CMUnitTest tests[] = { cmocka_unit_test(test_scenario) };
    return cmocka_run_group_tests_name(scenario, tests, NULL, NULL);
}
