/* Threads: the registry's first use raced from many threads, a per-thread
 * last error, concurrent context create/prepare/forward/destroy, and one
 * context whose backend context is created once under concurrent prepares. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_test_util.h"
#include "fake_backend.h"

#define THREADS 8

static pthread_barrier_t barrier;

typedef struct worker {
    int index;
    int failures;
    int count;
    char message[256];
    moeint4_context *shared;
    const tk_layer *layer;
} worker;

static void run_threads(void *(*body)(void *), worker *workers)
{
    pthread_t threads[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        workers[i].index = i;
        assert_int_equal(pthread_create(&threads[i], NULL, body, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < THREADS; i++)
        if (workers[i].failures)
            fail_msg("thread %d: %s", i, workers[i].message);
}

static void *first_use_body(void *arg)
{
    worker *self = arg;
    pthread_barrier_wait(&barrier);
    if (moeint4_backend_list(NULL, 0, &self->count) != MOEINT4_SUCCESS)
        self->failures++;
    return NULL;
}

static void test_registry_first_use_race(void **state)
{
    (void)state;
    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    run_threads(first_use_body, workers);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(workers[i].count, workers[0].count);
    assert_true(workers[0].count >= 3);
}

static void *last_error_body(void *arg)
{
    worker *self = arg;
    char name[32];
    snprintf(name, sizeof name, "no-such-backend-%d", self->index);
    moeint4_backend id;
    moeint4_backend_from_name(name, &id);
    pthread_barrier_wait(&barrier); /* everyone has failed in their own way */
    if (self->index % 2 == 0)
        moeint4_backend_from_name("cpu", &id); /* success clears this thread's only */
    pthread_barrier_wait(&barrier);
    snprintf(self->message, sizeof self->message, "%s", moeint4_last_error());
    if (self->index % 2 == 0 ? self->message[0] != '\0' : !strstr(self->message, name))
        self->failures++;
    return NULL;
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    moeint4_backend id;
    moeint4_backend_from_name("main-thread-error", &id);
    run_threads(last_error_body, workers);
    assert_non_null(strstr(moeint4_last_error(), "main-thread-error"));
}

/* A whole life cycle per iteration, all threads at once, against the result
 * of the same forward computed once beforehand. */
enum { M = 4, K = 64, TOPK = 2, ROUNDS = 20 };

static void forward_once(moeint4_context *ctx, const moeint4_weights *weights, float *output,
                         moeint4_status *status)
{
    float hidden[M * K];
    int32_t ids[M * TOPK];
    float router[M * TOPK];
    util_random_batch(77, MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, router);
    moeint4_forward_args args = util_args(MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, router, output);
    *status = moeint4_forward(ctx, weights, &args);
}

static float expected_output[M * K];

static void *life_cycle_body(void *arg)
{
    worker *self = arg;
    pthread_barrier_wait(&barrier);
    for (int round = 0; round < ROUNDS && !self->failures; round++) {
        moeint4_context_options options = util_options(MOEINT4_BACKEND_CPU);
        options.num_threads = 1;
        moeint4_context *ctx = NULL;
        moeint4_weights *weights = NULL;
        moeint4_weights_desc desc = tk_layer_desc(self->layer);
        moeint4_status status = moeint4_context_create(&options, &ctx);
        if (status == MOEINT4_SUCCESS)
            status = moeint4_weights_prepare(ctx, &desc, &weights);
        float output[M * K];
        if (status == MOEINT4_SUCCESS)
            forward_once(ctx, weights, output, &status);
        if (status != MOEINT4_SUCCESS) {
            snprintf(self->message, sizeof self->message, "%s", moeint4_last_error());
            self->failures++;
        } else if (memcmp(output, expected_output, sizeof output) != 0) {
            snprintf(self->message, sizeof self->message, "round %d: output differs", round);
            self->failures++;
        }
        if (round % 2)
            moeint4_weights_release(weights); /* else destroy releases it */
        moeint4_context_destroy(ctx);
    }
    return NULL;
}

static void test_concurrent_life_cycles(void **state)
{
    (void)state;
    tk_layer layer;
    util_make_layer(&layer, MOEINT4_FORMAT_GPTQ_ASYM, 1, 123);
    moeint4_context *ctx = util_context(MOEINT4_BACKEND_CPU);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    moeint4_weights *weights = NULL;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &weights));
    moeint4_status status;
    forward_once(ctx, weights, expected_output, &status);
    assert_ok(status);
    moeint4_context_destroy(ctx);

    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    for (int i = 0; i < THREADS; i++)
        workers[i].layer = &layer;
    run_threads(life_cycle_body, workers);
    tk_layer_free(&layer);
}

static fake_control shared_fake = {
    .name = "fake-shared", .priority = 5, .probe_ok = 1, .supports_ok = 1
};

static void *shared_prepare_body(void *arg)
{
    worker *self = arg;
    moeint4_weights_desc desc = tk_layer_desc(self->layer);
    moeint4_weights *weights = NULL;
    pthread_barrier_wait(&barrier);
    if (moeint4_weights_prepare(self->shared, &desc, &weights) != MOEINT4_SUCCESS) {
        snprintf(self->message, sizeof self->message, "%s", moeint4_last_error());
        self->failures++;
    } else if (self->index % 2) {
        moeint4_weights_release(weights);
    }
    return NULL;
}

static void test_one_context_many_preparers(void **state)
{
    (void)state;
    moeint4_backend_iface iface = fake_backend_iface(&shared_fake);
    moeint4_backend id;
    assert_ok(moeint4_register_backend(&iface, &id));
    tk_layer layer;
    util_make_layer(&layer, MOEINT4_FORMAT_AWQ, 0, 321);
    moeint4_context *ctx = util_context(id);
    worker workers[THREADS];
    memset(workers, 0, sizeof workers);
    for (int i = 0; i < THREADS; i++) {
        workers[i].shared = ctx;
        workers[i].layer = &layer;
    }
    run_threads(shared_prepare_body, workers);
    assert_int_equal(shared_fake.contexts_created, 1);
    moeint4_context_destroy(ctx); /* releases the even threads' weights */
    assert_int_equal(shared_fake.contexts_destroyed, 1);
    tk_layer_free(&layer);
}

int main(void)
{
    setenv("MOEINT4_BACKEND_PATH", "", 1);
    unsetenv("MOEINT4_BACKEND");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_first_use_race), /* must run first */
        cmocka_unit_test(test_last_error_is_per_thread),
        cmocka_unit_test(test_concurrent_life_cycles),
        cmocka_unit_test(test_one_context_many_preparers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
