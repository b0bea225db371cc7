/* Cross-backend conformance through the public ABI of libmoeint4.so: every
 * available backend against the double-precision reference over the matrix
 * in conformance_cases.c, plus vLLM's vector cases. Data moves through
 * moeint4_memory_alloc / moeint4_memory_copy, so host and device backends
 * run the same code.
 *
 * What each backend must serve and how close it must come are stated in
 * conformance_expect.c (expected-supported sets; tolerances from each
 * backend's stated precision): an UNSUPPORTED answer inside the set fails.
 *
 * Environment:
 *   MOEINT4_CONFORMANCE_BACKENDS=cpu,xpu  only these backends (default: every known one)
 *   MOEINT4_CONFORMANCE_FILTER=substring  only cases whose name contains it
 *   MOEINT4_CONFORMANCE_SKIP_LARGE=1      skip the full-size model layers
 * A selected backend that is not available here is skipped, and any skip
 * makes the exit status 77 (ctest SKIP_RETURN_CODE: Skipped, never Passed)
 * after the available ones ran; a failure makes it 1. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "tk_cmocka.h"

#include "conformance_cases.h"
#include "conformance_expect.h"
#include "conformance_run.h"
#include "fake_backend.h"
#include "moeint4.h"
#include "testkit.h"

#define MAX_BACKENDS 32

typedef struct suite {
    const conf_case *cases;
    int num_cases;
} suite;

typedef struct backend_test {
    suite *suite;
    moeint4_backend id;
    char name[32];
} backend_test;

static int env_flag(const char *name)
{
    const char *value = getenv(name);
    return value && *value && strcmp(value, "0") != 0;
}

/* Is `name` in the comma-separated MOEINT4_CONFORMANCE_BACKENDS (or is it unset)? */
static int backend_selected(const char *name)
{
    const char *list = getenv("MOEINT4_CONFORMANCE_BACKENDS");
    if (!list || !*list)
        return 1;
    size_t length = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t item = end ? (size_t)(end - p) : strlen(p);
        if (item == length && strncasecmp(p, name, length) == 0)
            return 1;
        p += item + (end ? 1 : 0);
    }
    return 0;
}

/* Skips (never passes) a selected backend that is absent. */
static void require_backend(const backend_test *bt)
{
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(moeint4_backend_query(bt->id, &info), MOEINT4_SUCCESS);
    if (!info.compiled || !info.available)
        tk_skip("backend %s: not available: %s", info.name, info.reason);
    char why[160];
    if (bt->id == MOEINT4_BACKEND_CPU && tk_cpu_forced_kernel_skip(why, sizeof why))
        tk_skip("%s", why);
}

static void test_matrix(void **state)
{
    backend_test *bt = *state;
    require_backend(bt);
    const char *filter = getenv("MOEINT4_CONFORMANCE_FILTER");
    conf_summary summary;
    conf_run_matrix(bt->id, bt->name, bt->suite->cases, bt->suite->num_cases,
                    env_flag("MOEINT4_CONFORMANCE_SKIP_LARGE"), filter, &summary);
    conf_print_summary(bt->id, bt->name, &summary);
    assert_int_equal(summary.failed, 0);
    assert_true(summary.passed > 0 || (filter && *filter));
}

static void test_vectors(void **state)
{
    backend_test *bt = *state;
    require_backend(bt);
    assert_int_equal(conf_run_vectors(bt->id, bt->name), 0);
}

/* The matrix really holds what it claims: every value of every axis. */
static void test_matrix_coverage(void **state)
{
    const suite *s = *state;
    int activations[3] = { 0 }, dtypes[4] = { 0 }, scales[4] = { 0 }, topk[9] = { 0 };
    int maps = 0, on_input = 0, g_idx = 0, act_order = 0, large = 0, formats[4][2] = { { 0 } },
        groups[129] = { 0 };
    int tokens_1 = 0, tokens_300 = 0, not_multiple_of_16 = 0;
    for (int i = 0; i < s->num_cases; i++) {
        const conf_case *c = &s->cases[i];
        activations[c->activation]++;
        dtypes[c->dtype]++;
        scales[c->layer.scales_dtype]++;
        topk[c->topk]++;
        maps += c->layer.expert_map;
        on_input += c->apply_router_weight_on_input;
        g_idx += c->layer.with_g_idx;
        act_order += c->layer.act_order;
        large += c->large;
        formats[c->layer.format][c->layer.zero_offset]++;
        groups[c->layer.group_size == -1 ? 0 : c->layer.group_size]++;
        tokens_1 += c->num_tokens == 1;
        tokens_300 += c->num_tokens == 300;
        not_multiple_of_16 += c->layer.hidden_size % 16 != 0 && c->layer.intermediate_size % 16;
    }
    assert_true(s->num_cases - large >= 200);
    for (int a = 0; a < 3; a++)
        assert_true(activations[a] > 0);
    for (int d = 1; d <= 3; d++)
        assert_true(dtypes[d] > 0);
    assert_true(scales[MOEINT4_DTYPE_F16] > 0 && scales[MOEINT4_DTYPE_BF16] > 0);
    for (int k = 1; k <= 8; k++)
        assert_true(topk[k] > 0);
    assert_true(maps > 0 && on_input > 0 && g_idx > 0 && act_order > 0 && large > 0);
    assert_true(formats[MOEINT4_FORMAT_GPTQ_SYM][0] > 0 &&
                formats[MOEINT4_FORMAT_GPTQ_ASYM][0] > 0 &&
                formats[MOEINT4_FORMAT_GPTQ_ASYM][1] > 0 && formats[MOEINT4_FORMAT_AWQ][0] > 0);
    assert_true(groups[0] > 0 && groups[32] > 0 && groups[64] > 0 && groups[128] > 0);
    assert_true(tokens_1 > 0 && tokens_300 > 0 && not_multiple_of_16 > 0);
}

/* Each backend is held to its own stated precision: one that keeps
 * everything in f32 gets an f32 bound far below what a single bf16 or f16
 * rounding on the way would cause, and a coarser path a wider bound. */
static void test_tolerances_follow_the_stated_precision(void **state)
{
    (void)state;
    const moeint4_backend built_in[] = { MOEINT4_BACKEND_CPU, MOEINT4_BACKEND_XPU,
                                         MOEINT4_BACKEND_HIP };
    for (size_t b = 0; b < sizeof built_in / sizeof built_in[0]; b++) {
        for (int d = MOEINT4_DTYPE_F32; d <= MOEINT4_DTYPE_BF16; d++) {
            moeint4_precision p;
            memset(&p, 0, sizeof p);
            p.struct_size = sizeof p;
            assert_int_equal(moeint4_backend_precision(built_in[b], (moeint4_dtype)d, &p),
                             MOEINT4_SUCCESS);
            assert_int_equal(p.stated, 1);
            double bound = conf_tolerance(built_in[b], (moeint4_dtype)d);
            int all_f32 = p.inputs == MOEINT4_DTYPE_F32 && p.weights == MOEINT4_DTYPE_F32 &&
                          p.intermediate == MOEINT4_DTYPE_F32;
            if (all_f32)
                assert_true(bound < 5e-5); /* one f16 rounding is 2.8e-4 rms */
            if (p.weights == MOEINT4_DTYPE_BF16 || p.intermediate == MOEINT4_DTYPE_BF16)
                assert_true(bound > 5e-3); /* bf16 roundings on the way: 2.3e-3 rms each */
            assert_true(bound >= conf_tolerance(MOEINT4_BACKEND_CPU, (moeint4_dtype)d) ||
                        built_in[b] == MOEINT4_BACKEND_CPU);
        }
    }
}

/* ---- the expectations bite: a backend that refuses everything ---- */

/* A backend that is there and serves nothing (tests/core/fake_backend.c). */
static moeint4_backend register_refuser(fake_control *control)
{
    moeint4_backend_iface iface = fake_backend_iface(control);
    moeint4_backend id = MOEINT4_BACKEND_AUTO;
    assert_int_equal(moeint4_register_backend(&iface, &id), MOEINT4_SUCCESS);
    return id;
}

/* conformance_expect.c holds "conformance-self-check" to GPTQ_SYM g128:
 * those cases fail when refused, the others count as unsupported; a
 * backend the table does not name may refuse everything. */
static void test_refusals_inside_the_expected_set_fail(void **state)
{
    const suite *s = *state;
    conf_summary summary;
    print_message("the FAIL lines below are this self-check's, expected\n");
    /* after the CPU (priority 1000): AUTO never lands on them */
    static fake_control held_control = { .name = "conformance-self-check",
                                         .priority = 5000,
                                         .probe_ok = 1 };
    static fake_control free_control = { .name = "conformance-refuses-all",
                                         .priority = 5001,
                                         .probe_ok = 1 };
    moeint4_backend held = register_refuser(&held_control);
    conf_run_matrix(held, "conformance-self-check", s->cases, s->num_cases, 1, "_g128_", &summary);
    assert_true(summary.unexpectedly_unsupported > 0);
    assert_int_equal(summary.failed, summary.unexpectedly_unsupported);
    assert_true(summary.unsupported > 0); /* the other formats at g128 */
    assert_int_equal(summary.passed, 0);
    moeint4_backend free_to_refuse = register_refuser(&free_control);
    conf_run_matrix(free_to_refuse, "conformance-refuses-all", s->cases, s->num_cases, 1, "_g128_",
                    &summary);
    assert_int_equal(summary.failed, 0);
    assert_true(summary.unsupported > 0);
}

int main(int argc, char **argv)
{
    moeint4_backend ids[MAX_BACKENDS];
    int count = 0;
    if (moeint4_backend_list(ids, MAX_BACKENDS, &count) != MOEINT4_SUCCESS || count < 1) {
        fprintf(stderr, "moeint4_backend_list failed: %s\n", moeint4_last_error());
        return 1;
    }
    if (count > MAX_BACKENDS)
        count = MAX_BACKENDS;

    suite s = { NULL, 0 };
    s.num_cases = conf_build_cases(NULL, 0);
    conf_case *cases = calloc((size_t)s.num_cases, sizeof *cases);
    backend_test *backends = calloc((size_t)count, sizeof *backends);
    struct CMUnitTest *tests = calloc((size_t)count * 2 + 3, sizeof *tests);
    char(*names)[64] = calloc((size_t)count * 2, sizeof *names);
    if (!cases || !backends || !tests || !names)
        return 1;
    conf_build_cases(cases, s.num_cases);
    s.cases = cases;

    /* Backends MOEINT4_CONFORMANCE_BACKENDS leaves out are not part of this
     * run at all (other ctest entries run them). */
    int selected = 0;
    for (int b = 0; b < count; b++) {
        moeint4_backend_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        moeint4_backend_query(ids[b], &info);
        if (!backend_selected(info.name))
            continue;
        backend_test *bt = &backends[selected];
        bt->suite = &s;
        bt->id = ids[b];
        snprintf(bt->name, sizeof bt->name, "%s", info.name);
        int t = 2 * selected;
        snprintf(names[t], sizeof names[0], "%s: %d cases", info.name, s.num_cases);
        snprintf(names[t + 1], sizeof names[0], "%s: vLLM vectors", info.name);
        tests[t].name = names[t];
        tests[t].test_func = test_matrix;
        tests[t].initial_state = bt;
        tests[t + 1].name = names[t + 1];
        tests[t + 1].test_func = test_vectors;
        tests[t + 1].initial_state = bt;
        selected++;
    }
    if (selected == 0) {
        fprintf(stderr, "MOEINT4_CONFORMANCE_BACKENDS = \"%s\" names no known backend\n",
                getenv("MOEINT4_CONFORMANCE_BACKENDS"));
        return 1;
    }
    tests[2 * selected].name = "the case matrix covers every axis";
    tests[2 * selected].test_func = test_matrix_coverage;
    tests[2 * selected].initial_state = &s;
    tests[2 * selected + 1].name = "a refusal inside a backend's expected set fails";
    tests[2 * selected + 1].test_func = test_refusals_inside_the_expected_set_fail;
    tests[2 * selected + 1].initial_state = &s;
    tests[2 * selected + 2].name = "tolerances follow each backend's stated precision";
    tests[2 * selected + 2].test_func = test_tolerances_follow_the_stated_precision;
    int status =
        tk_cmocka_run("conformance", tests, (size_t)selected * 2 + 3, NULL, NULL, argc, argv);
    free(names);
    free(tests);
    free(backends);
    free(cases);
    return status;
}
