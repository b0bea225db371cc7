/* The oracle over fake backends registered next to the CPU backend:
 * first-fit order, forced backends that cannot serve (never a silent
 * fallback), errors coming back from a backend, the probe cache, the
 * decision table and the MOEINT4_BACKEND override. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core_test_util.h"
#include "fake_backend.h"

/* Priorities below XPU's 100 so the fakes come first on every machine. */
static fake_control no_probe = { .name = "fake-noprobe", .priority = 10, .probe_ok = 0 };
static fake_control no_support = { .name = "fake-nosupport", .priority = 20, .probe_ok = 1 };
static fake_control gptq_only = { .name = "fake-gptq",
                                  .priority = 30,
                                  .probe_ok = 1,
                                  .supports_ok = 1,
                                  .only_format = MOEINT4_FORMAT_GPTQ_SYM };
static moeint4_backend no_probe_id, no_support_id, gptq_only_id;

static int register_fakes(void **state)
{
    (void)state;
    moeint4_backend_iface iface = fake_backend_iface(&no_probe);
    if (moeint4_register_backend(&iface, &no_probe_id) != MOEINT4_SUCCESS)
        return -1;
    iface = fake_backend_iface(&no_support);
    if (moeint4_register_backend(&iface, &no_support_id) != MOEINT4_SUCCESS)
        return -1;
    iface = fake_backend_iface(&gptq_only);
    return moeint4_register_backend(&iface, &gptq_only_id) == MOEINT4_SUCCESS ? 0 : -1;
}

static moeint4_problem problem_for(moeint4_format format)
{
    moeint4_problem problem;
    memset(&problem, 0, sizeof problem);
    problem.struct_size = sizeof problem;
    problem.format = format;
    problem.group_size = 32;
    problem.num_experts = 8;
    problem.num_local_experts = 8;
    problem.hidden_size = 64;
    problem.intermediate_size = 32;
    return problem;
}

static void test_first_fit_order(void **state)
{
    (void)state;
    moeint4_backend chosen = MOEINT4_BACKEND_AUTO;
    moeint4_problem gptq = problem_for(MOEINT4_FORMAT_GPTQ_SYM);
    assert_ok(moeint4_oracle_select(&gptq, MOEINT4_BACKEND_AUTO, 0, &chosen));
    assert_int_equal(chosen, gptq_only_id);
    moeint4_problem awq = problem_for(MOEINT4_FORMAT_AWQ);
    assert_ok(moeint4_oracle_select(&awq, MOEINT4_BACKEND_AUTO, 0, &chosen));
    assert_int_equal(chosen, MOEINT4_BACKEND_CPU); /* no plugins in this test's reach */
    /* the ones in front were asked */
    assert_true(no_support.supports_calls > 0);
    assert_int_equal(no_probe.supports_calls, 0); /* never asked: its probe failed */
}

static void test_forced_backend_refuses(void **state)
{
    (void)state;
    moeint4_problem gptq = problem_for(MOEINT4_FORMAT_GPTQ_SYM);
    moeint4_backend chosen = (moeint4_backend)77;
    assert_status_says(moeint4_oracle_select(&gptq, no_probe_id, 0, &chosen),
                       MOEINT4_BACKEND_UNAVAILABLE, "fake device 0 is not plugged in");
    assert_status_says(moeint4_oracle_select(&gptq, no_support_id, 0, &chosen), MOEINT4_UNSUPPORTED,
                       "fake backend serves no problem at all");
    moeint4_problem awq = problem_for(MOEINT4_FORMAT_AWQ);
    assert_status_says(moeint4_oracle_select(&awq, gptq_only_id, 0, &chosen), MOEINT4_UNSUPPORTED,
                       "fake-gptq was requested but cannot serve this problem");
    assert_int_equal(chosen, 77);

    /* through a context: refused at create when absent, at prepare when unable */
    moeint4_context_options options = util_options(no_probe_id);
    moeint4_context *ctx = NULL;
    assert_status_says(moeint4_context_create(&options, &ctx), MOEINT4_BACKEND_UNAVAILABLE,
                       "fake-noprobe");
    assert_null(ctx);

    ctx = util_context(no_support_id);
    tk_layer layer;
    util_make_layer(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 11);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    moeint4_weights *weights = NULL;
    int cpu_contexts_before = gptq_only.contexts_created;
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &weights), MOEINT4_UNSUPPORTED,
                       "serves no problem at all");
    assert_null(weights);
    assert_int_equal(gptq_only.contexts_created, cpu_contexts_before); /* no fallback */
    moeint4_context_destroy(ctx);
    tk_layer_free(&layer);
}

static void run_forward(moeint4_context *ctx, moeint4_weights *weights, float *output,
                        moeint4_status expected, const char *words)
{
    enum { M = 3, K = 64, TOPK = 2 };
    float hidden[M * K];
    int32_t ids[M * TOPK];
    float router[M * TOPK];
    util_random_batch(5, MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, router);
    moeint4_forward_args args = util_args(MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, router, output);
    if (expected == MOEINT4_SUCCESS)
        assert_ok(moeint4_forward(ctx, weights, &args));
    else
        assert_status_says(moeint4_forward(ctx, weights, &args), expected, words);
}

/* An AUTO context binds to its first weights' backend: later weights and
 * the memory helpers use it too (memory from moeint4_memory_alloc always
 * suits the forward), and a problem it cannot serve is refused, saying why. */
static void test_auto_context_binds_to_its_first_weights(void **state)
{
    (void)state;
    moeint4_context *ctx = util_context(MOEINT4_BACKEND_AUTO);
    tk_layer gptq, awq;
    util_make_layer(&gptq, MOEINT4_FORMAT_GPTQ_SYM, 0, 21);
    util_make_layer(&awq, MOEINT4_FORMAT_AWQ, 0, 22);
    moeint4_weights_desc desc = tk_layer_desc(&gptq);
    moeint4_weights *on_fake = NULL, *refused = NULL;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &on_fake));
    moeint4_backend backend;
    assert_ok(moeint4_weights_backend(on_fake, &backend));
    assert_int_equal(backend, gptq_only_id);
    /* not the first available backend (fake-nosupport): the weights' one */
    assert_ok(moeint4_context_backend(ctx, &backend));
    assert_int_equal(backend, gptq_only_id);
    desc = tk_layer_desc(&awq);
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &refused), MOEINT4_UNSUPPORTED,
                       "this AUTO context is bound to backend fake-gptq (by its first prepared "
                       "weights");
    assert_null(refused);
    assert_true(strstr(moeint4_last_error(), "fake backend serves one format only") != NULL);

    float output[3 * 64];
    for (int i = 0; i < 3 * 64; i++)
        output[i] = NAN;
    run_forward(ctx, on_fake, output, MOEINT4_SUCCESS, NULL);
    for (int i = 0; i < 3 * 64; i++)
        assert_true(output[i] == FAKE_OUTPUT_VALUE);
    /* destroy releases what is still alive */
    int released = gptq_only.weights_released;
    moeint4_context_destroy(ctx);
    assert_int_equal(gptq_only.weights_released, released + 1);
    assert_int_equal(gptq_only.contexts_destroyed, gptq_only.contexts_created);

    /* AWQ on a fresh AUTO context goes to the CPU, and so do its helpers */
    ctx = util_context(MOEINT4_BACKEND_AUTO);
    moeint4_weights *on_cpu = NULL;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &on_cpu));
    assert_ok(moeint4_weights_backend(on_cpu, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU);
    assert_ok(moeint4_context_backend(ctx, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU);
    void *memory = NULL;
    assert_ok(moeint4_memory_alloc(ctx, 64, &memory)); /* host memory, as the CPU forward needs */
    moeint4_memory_free(ctx, memory);
    for (int i = 0; i < 3 * 64; i++)
        output[i] = NAN;
    run_forward(ctx, on_cpu, output, MOEINT4_SUCCESS, NULL);
    for (int i = 0; i < 3 * 64; i++)
        assert_true(isfinite(output[i]) && output[i] != FAKE_OUTPUT_VALUE);
    moeint4_context_destroy(ctx);

    /* a memory helper before any prepare binds to the first available
     * backend, which then must serve the weights */
    ctx = util_context(MOEINT4_BACKEND_AUTO);
    assert_ok(moeint4_context_backend(ctx, &backend));
    assert_int_equal(backend, no_support_id);
    desc = tk_layer_desc(&gptq);
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &refused), MOEINT4_UNSUPPORTED,
                       "bound to backend fake-nosupport (by a memory helper called before any "
                       "weights were prepared");
    assert_null(refused);
    moeint4_context_destroy(ctx);
    tk_layer_free(&gptq);
    tk_layer_free(&awq);
}

/* Threads racing to bind one AUTO context with problems the oracle sends to
 * different backends: one binding wins, every success is on it, every
 * prepare it cannot serve is refused saying so. */
typedef struct racer {
    moeint4_context *ctx;
    const moeint4_weights_desc *desc;
    moeint4_weights *weights;
    moeint4_status status;
    char message[512];
} racer;

static void *race_prepare(void *arg)
{
    racer *r = arg;
    r->status = moeint4_weights_prepare(r->ctx, r->desc, &r->weights);
    snprintf(r->message, sizeof r->message, "%s", moeint4_last_error());
    return NULL;
}

static void test_racing_prepares_bind_once(void **state)
{
    (void)state;
    tk_layer gptq, awq;
    util_make_layer(&gptq, MOEINT4_FORMAT_GPTQ_SYM, 0, 31);
    util_make_layer(&awq, MOEINT4_FORMAT_AWQ, 0, 32);
    moeint4_weights_desc descs[2] = { tk_layer_desc(&gptq), tk_layer_desc(&awq) };
    for (int round = 0; round < 20; round++) {
        moeint4_context *ctx = util_context(MOEINT4_BACKEND_AUTO);
        enum { RACERS = 6 };
        racer racers[RACERS];
        pthread_t threads[RACERS];
        for (int i = 0; i < RACERS; i++) {
            memset(&racers[i], 0, sizeof racers[i]);
            racers[i].ctx = ctx;
            racers[i].desc = &descs[(i + round) % 2];
            assert_int_equal(pthread_create(&threads[i], NULL, race_prepare, &racers[i]), 0);
        }
        for (int i = 0; i < RACERS; i++)
            pthread_join(threads[i], NULL);
        moeint4_backend bound;
        assert_ok(moeint4_context_backend(ctx, &bound));
        assert_true(bound == gptq_only_id || bound == MOEINT4_BACKEND_CPU);
        int served = 0;
        for (int i = 0; i < RACERS; i++) {
            if (racers[i].status == MOEINT4_SUCCESS) {
                moeint4_backend backend;
                assert_ok(moeint4_weights_backend(racers[i].weights, &backend));
                assert_int_equal(backend, bound);
                served++;
            } else {
                assert_int_equal(racers[i].status, MOEINT4_UNSUPPORTED);
                assert_non_null(strstr(racers[i].message, "this AUTO context is bound to"));
                assert_null(racers[i].weights);
            }
        }
        /* the CPU serves both problems; the fake only GPTQ */
        assert_int_equal(served, bound == MOEINT4_BACKEND_CPU ? RACERS : RACERS / 2);
        moeint4_context_destroy(ctx);
    }
    tk_layer_free(&gptq);
    tk_layer_free(&awq);
}

static void test_backend_errors_reach_the_caller(void **state)
{
    (void)state;
    moeint4_context *ctx = util_context(gptq_only_id);
    tk_layer layer;
    util_make_layer(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 31);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    moeint4_weights *weights = NULL;

    gptq_only.prepare_status = MOEINT4_DEVICE_ERROR;
    gptq_only.error_message = "fake device fell over";
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &weights), MOEINT4_DEVICE_ERROR,
                       "fake-gptq backend: fake device fell over");
    assert_null(weights);
    gptq_only.prepare_status = MOEINT4_SUCCESS;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &weights));

    gptq_only.forward_status = MOEINT4_OUT_OF_MEMORY;
    gptq_only.error_message = "fake scratch of 12345 bytes";
    float output[3 * 64];
    memset(output, 0xff, sizeof output);
    run_forward(ctx, weights, output, MOEINT4_OUT_OF_MEMORY, "fake scratch of 12345 bytes");
    for (int i = 0; i < 3 * 64; i++)
        assert_true(isnan(output[i]));
    gptq_only.forward_status = (moeint4_status)42; /* outside the enum */
    run_forward(ctx, weights, output, MOEINT4_INTERNAL_ERROR,
                "fake-gptq backend returned status 42: fake scratch");
    gptq_only.forward_status = MOEINT4_SUCCESS;
    run_forward(ctx, weights, output, MOEINT4_SUCCESS, NULL);
    assert_string_equal(moeint4_last_error(), "");

    moeint4_weights_release(weights);
    moeint4_context_destroy(ctx);
    tk_layer_free(&layer);
}

static void test_probe_is_cached_per_device(void **state)
{
    (void)state;
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_ok(moeint4_backend_query(no_probe_id, &info));
    int calls = no_probe.probe_calls;
    assert_true(calls >= 1);
    for (int i = 0; i < 5; i++)
        assert_ok(moeint4_backend_query(no_probe_id, &info));
    assert_int_equal(no_probe.probe_calls, calls);
    moeint4_problem gptq = problem_for(MOEINT4_FORMAT_GPTQ_SYM);
    moeint4_backend chosen;
    assert_status_says(moeint4_oracle_select(&gptq, no_probe_id, 3, &chosen),
                       MOEINT4_BACKEND_UNAVAILABLE, "fake device 3 is not plugged in");
    assert_int_equal(no_probe.probe_calls, calls + 1);
    assert_status_says(moeint4_oracle_select(&gptq, no_probe_id, 3, &chosen),
                       MOEINT4_BACKEND_UNAVAILABLE, "fake device 3");
    assert_int_equal(no_probe.probe_calls, calls + 1);
}

static void test_explain_table(void **state)
{
    (void)state;
    moeint4_problem gptq = problem_for(MOEINT4_FORMAT_GPTQ_SYM);
    size_t length = 0;
    assert_ok(moeint4_oracle_explain(&gptq, MOEINT4_BACKEND_AUTO, 0, NULL, 0, &length));
    assert_true(length > 100);
    char *table = malloc(length + 1);
    size_t again = 0;
    assert_ok(moeint4_oracle_explain(&gptq, MOEINT4_BACKEND_AUTO, 0, table, length + 1, &again));
    assert_int_equal(again, length);
    assert_int_equal(strlen(table), length);
    assert_non_null(strstr(table, "requested: auto"));
    assert_non_null(strstr(table, "fake-noprobe"));
    assert_non_null(strstr(table, "fake device 0 is not plugged in"));
    assert_non_null(strstr(table, "fake backend serves no problem at all"));
    assert_non_null(strstr(table, "libmoeint4-hip.so not found"));
    const char *chosen_line = strstr(table, "<- chosen");
    assert_non_null(chosen_line);
    assert_true(strstr(table, "fake-gptq") < chosen_line);
    assert_non_null(strstr(table, "chosen: fake-gptq (first in priority order"));
    /* how an AUTO context binds is said too */
    assert_non_null(strstr(table, "binding: an AUTO context binds to fake-gptq at its first "
                                  "prepare"));
    assert_non_null(strstr(table, "before any prepare bind it to the first available backend "
                                  "(fake-nosupport)"));
    /* one line per backend + requested + chosen + binding */
    int count = 0, lines = 0;
    assert_ok(moeint4_backend_list(NULL, 0, &count));
    for (size_t i = 0; i < length; i++)
        lines += table[i] == '\n';
    assert_int_equal(lines, count + 3);

    char small[16];
    memset(small, 'x', sizeof small);
    assert_ok(moeint4_oracle_explain(&gptq, MOEINT4_BACKEND_AUTO, 0, small, sizeof small, &again));
    assert_int_equal(again, length);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, table, sizeof small - 1);

    assert_ok(moeint4_oracle_explain(&gptq, no_support_id, 0, table, length + 1, NULL));
    assert_non_null(strstr(table, "requested: fake-nosupport (explicit)"));
    assert_non_null(strstr(table, "chosen: none (the requested backend cannot serve"));
    free(table);
    assert_status_says(moeint4_oracle_explain(&gptq, MOEINT4_BACKEND_AUTO, 0, NULL, 5, NULL),
                       MOEINT4_INVALID_ARGUMENT, "buffer");
}

static void test_bad_problems(void **state)
{
    (void)state;
    moeint4_backend chosen;
    moeint4_problem problem = problem_for(MOEINT4_FORMAT_GPTQ_SYM);
    problem.struct_size = 4;
    assert_status_says(moeint4_oracle_select(&problem, MOEINT4_BACKEND_AUTO, 0, &chosen),
                       MOEINT4_INVALID_ARGUMENT, "problem->struct_size = 4");
    problem = problem_for((moeint4_format)9);
    assert_status_says(moeint4_oracle_select(&problem, MOEINT4_BACKEND_AUTO, 0, &chosen),
                       MOEINT4_INVALID_ARGUMENT, "problem->format = 9");
    problem = problem_for(MOEINT4_FORMAT_AWQ);
    problem.num_local_experts = 9;
    assert_status_says(moeint4_oracle_select(&problem, MOEINT4_BACKEND_AUTO, 0, &chosen),
                       MOEINT4_INVALID_ARGUMENT, "num_local_experts = 9");
    problem = problem_for(MOEINT4_FORMAT_AWQ);
    assert_status_says(moeint4_oracle_select(&problem, MOEINT4_BACKEND_AUTO, -1, &chosen),
                       MOEINT4_INVALID_ARGUMENT, "device_index = -1");
    assert_status_says(moeint4_oracle_select(&problem, (moeint4_backend)40, 0, &chosen),
                       MOEINT4_INVALID_ARGUMENT, "backend = 40");
    assert_status_says(moeint4_oracle_select(NULL, MOEINT4_BACKEND_AUTO, 0, &chosen),
                       MOEINT4_INVALID_ARGUMENT, "problem");
}

static void test_environment_override(void **state)
{
    (void)state;
    moeint4_problem gptq = problem_for(MOEINT4_FORMAT_GPTQ_SYM);
    moeint4_backend chosen;
    setenv("MOEINT4_BACKEND", "cpu", 1);
    assert_ok(moeint4_oracle_select(&gptq, MOEINT4_BACKEND_AUTO, 0, &chosen));
    assert_int_equal(chosen, MOEINT4_BACKEND_CPU);
    /* an explicit argument wins over the environment */
    assert_ok(moeint4_oracle_select(&gptq, gptq_only_id, 0, &chosen));
    assert_int_equal(chosen, gptq_only_id);

    moeint4_context *ctx = util_context(MOEINT4_BACKEND_AUTO);
    moeint4_backend backend;
    assert_ok(moeint4_context_backend(ctx, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU);
    tk_layer layer;
    util_make_layer(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 41);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    moeint4_weights *weights = NULL;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &weights));
    assert_ok(moeint4_weights_backend(weights, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU);
    moeint4_context_destroy(ctx);

    size_t length;
    char table[4096];
    assert_ok(moeint4_oracle_explain(&gptq, MOEINT4_BACKEND_AUTO, 0, table, sizeof table, &length));
    assert_non_null(strstr(table, "requested: cpu (from MOEINT4_BACKEND)"));

    setenv("MOEINT4_BACKEND", "Fake-NoSupport", 1);
    ctx = util_context(MOEINT4_BACKEND_AUTO);
    assert_status_says(moeint4_weights_prepare(ctx, &desc, &weights), MOEINT4_UNSUPPORTED,
                       "fake-nosupport was requested");
    moeint4_context_destroy(ctx);

    moeint4_context_options options = util_options(MOEINT4_BACKEND_AUTO);
    ctx = NULL;
    setenv("MOEINT4_BACKEND", "hip", 1);
    assert_status_says(moeint4_context_create(&options, &ctx), MOEINT4_BACKEND_UNAVAILABLE,
                       "libmoeint4-hip.so not found");
    setenv("MOEINT4_BACKEND", "gpu-please", 1);
    assert_status_says(moeint4_context_create(&options, &ctx), MOEINT4_INVALID_ARGUMENT,
                       "MOEINT4_BACKEND = \"gpu-please\"");
    assert_null(ctx);
    options.backend = MOEINT4_BACKEND_CPU; /* explicit wins: the env is not even read */
    assert_ok(moeint4_context_create(&options, &ctx));
    moeint4_context_destroy(ctx);
    setenv("MOEINT4_BACKEND", "AUTO", 1);
    assert_ok(moeint4_oracle_select(&gptq, MOEINT4_BACKEND_AUTO, 0, &chosen));
    assert_int_equal(chosen, gptq_only_id);
    unsetenv("MOEINT4_BACKEND");
    tk_layer_free(&layer);
}

int main(void)
{
    setenv("MOEINT4_BACKEND_PATH", "", 1);
    unsetenv("MOEINT4_BACKEND");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_fit_order),
        cmocka_unit_test(test_forced_backend_refuses),
        cmocka_unit_test(test_auto_context_binds_to_its_first_weights),
        cmocka_unit_test(test_racing_prepares_bind_once),
        cmocka_unit_test(test_backend_errors_reach_the_caller),
        cmocka_unit_test(test_probe_is_cached_per_device),
        cmocka_unit_test(test_explain_table),
        cmocka_unit_test(test_bad_problems),
        cmocka_unit_test(test_environment_override),
    };
    return cmocka_run_group_tests(tests, register_fakes, NULL);
}
