/* Cross-backend conformance through the public ABI of libmoeint4.so: every
 * available backend against the double-precision reference over the matrix
 * in conformance_cases.c, plus vLLM's vector cases. Data moves through
 * moeint4_memory_alloc / moeint4_memory_copy, so host and device backends
 * run the same code.
 *
 * Environment:
 *   MOEINT4_CONFORMANCE_BACKENDS=cpu,xpu  only these backends (default: all available)
 *   MOEINT4_CONFORMANCE_FILTER=substring  only cases whose name contains it
 *   MOEINT4_CONFORMANCE_SKIP_LARGE=1      skip the full-size model layers
 * Exit status 77 (ctest SKIP_RETURN_CODE) when no selected backend is
 * available here. */
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

#include "conformance_cases.h"
#include "conformance_run.h"
#include "moeint4.h"

#define MAX_BACKENDS 32

typedef struct suite {
    const conf_case *cases;
    int num_cases;
    int backends_run;    /* backends that were available and selected */
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

/* Skips (never passes) a backend that is absent or not selected. */
static void require_backend(const backend_test *bt)
{
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_int_equal(moeint4_backend_query(bt->id, &info), MOEINT4_SUCCESS);
    if (!backend_selected(info.name)) {
        print_message("backend %s: not selected by MOEINT4_CONFORMANCE_BACKENDS\n", info.name);
        skip();
    }
    if (!info.compiled || !info.available) {
        print_message("backend %s: not available: %s\n", info.name, info.reason);
        skip();
    }
}

static void test_matrix(void **state)
{
    backend_test *bt = *state;
    require_backend(bt);
    bt->suite->backends_run++;
    const char *filter = getenv("MOEINT4_CONFORMANCE_FILTER");
    conf_summary summary;
    conf_run_matrix(bt->id, bt->name, bt->suite->cases, bt->suite->num_cases,
                    env_flag("MOEINT4_CONFORMANCE_SKIP_LARGE"), filter, &summary);
    conf_print_summary(bt->name, &summary);
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
    int activations[3] = {0}, dtypes[4] = {0}, scales[4] = {0}, topk[9] = {0};
    int maps = 0, on_input = 0, g_idx = 0, large = 0, formats[4][2] = {{0}}, groups[129] = {0};
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
    assert_true(maps > 0 && on_input > 0 && g_idx > 0 && large > 0);
    assert_true(formats[MOEINT4_FORMAT_GPTQ_SYM][0] > 0 && formats[MOEINT4_FORMAT_GPTQ_ASYM][0] > 0 &&
                formats[MOEINT4_FORMAT_GPTQ_ASYM][1] > 0 && formats[MOEINT4_FORMAT_AWQ][0] > 0);
    assert_true(groups[0] > 0 && groups[32] > 0 && groups[64] > 0 && groups[128] > 0);
    assert_true(tokens_1 > 0 && tokens_300 > 0 && not_multiple_of_16 > 0);
}

int main(void)
{
    moeint4_backend ids[MAX_BACKENDS];
    int count = 0;
    if (moeint4_backend_list(ids, MAX_BACKENDS, &count) != MOEINT4_SUCCESS || count < 1) {
        fprintf(stderr, "moeint4_backend_list failed: %s\n", moeint4_last_error());
        return 1;
    }
    if (count > MAX_BACKENDS)
        count = MAX_BACKENDS;

    suite s = {NULL, 0, 0};
    s.num_cases = conf_build_cases(NULL, 0);
    conf_case *cases = calloc((size_t)s.num_cases, sizeof *cases);
    backend_test *backends = calloc((size_t)count, sizeof *backends);
    struct CMUnitTest *tests = calloc((size_t)count * 2 + 1, sizeof *tests);
    char(*names)[64] = calloc((size_t)count * 2, sizeof *names);
    if (!cases || !backends || !tests || !names)
        return 1;
    conf_build_cases(cases, s.num_cases);
    s.cases = cases;

    for (int b = 0; b < count; b++) {
        moeint4_backend_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        moeint4_backend_query(ids[b], &info);
        backends[b].suite = &s;
        backends[b].id = ids[b];
        snprintf(backends[b].name, sizeof backends[b].name, "%s", info.name);
        snprintf(names[2 * b], sizeof names[0], "%s: %d cases", info.name, s.num_cases);
        snprintf(names[2 * b + 1], sizeof names[0], "%s: vLLM vectors", info.name);
        tests[2 * b].name = names[2 * b];
        tests[2 * b].test_func = test_matrix;
        tests[2 * b].initial_state = &backends[b];
        tests[2 * b + 1].name = names[2 * b + 1];
        tests[2 * b + 1].test_func = test_vectors;
        tests[2 * b + 1].initial_state = &backends[b];
    }
    tests[2 * count].name = "the case matrix covers every axis";
    tests[2 * count].test_func = test_matrix_coverage;
    tests[2 * count].initial_state = &s;
    int failed = _cmocka_run_group_tests("conformance", tests, (size_t)count * 2 + 1, NULL, NULL);
    int ran = s.backends_run;
    free(names);
    free(tests);
    free(backends);
    free(cases);
    if (failed)
        return failed;
    return ran > 0 ? 0 : 77;
}
