/* Concurrency through the public ABI (also run under ThreadSanitizer by
 * scripts/reliability.sh):
 *  - 8 threads running forwards on ONE prepared weights handle and one
 *    context give bit-identical outputs to a single thread, for several
 *    argument sets (dtypes, activations, router weight on the input), with
 *    the context's own worker pool of 1 and of 2 threads;
 *  - contexts created, used and destroyed concurrently;
 *  - backend list / query / name lookup / oracle questions and plugin
 *    loading (mi4_plugin_load) racing from 8 threads, starting with the
 *    registry's very first use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/plugin_loader.h"
#include "registry/registry.h"
#include "moeint4.h"
#include "testkit.h"

#define THREADS 8
#define ROUNDS 3
#define TOKENS 24
#define TOPK 2
#define NUM_CASES 4

typedef struct forward_case {
    moeint4_dtype dtype;
    moeint4_activation activation;
    int on_input;
    void *hidden;
    int32_t ids[TOKENS * TOPK];
    float router[TOKENS * TOPK];
    void *expected; /* one thread's answer */
    size_t out_bytes;
} forward_case;

typedef struct shared_state {
    moeint4_context *ctx;
    moeint4_weights *weights;
    const tk_layer *layer;
    forward_case cases[NUM_CASES];
    pthread_barrier_t barrier;
} shared_state;

typedef struct worker {
    shared_state *shared;
    int index;
    int mismatches, failures;
    char message[256];
} worker;

static moeint4_forward_args case_args(const forward_case *c, void *output)
{
    tk_activation act = { c->activation, 7.0, 1.702, 1.0, c->on_input };
    return tk_forward_args(c->dtype, TOKENS, TOPK, c->hidden, c->ids, c->router, output, &act);
}

static void make_cases(shared_state *s, tk_rng *rng)
{
    static const moeint4_dtype dtypes[NUM_CASES] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_BF16,
                                                     MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
    static const moeint4_activation acts[NUM_CASES] = { MOEINT4_ACTIVATION_SILU,
                                                        MOEINT4_ACTIVATION_SWIGLU_CLAMP,
                                                        MOEINT4_ACTIVATION_GELU,
                                                        MOEINT4_ACTIVATION_SILU };
    size_t elements = (size_t)TOKENS * (size_t)s->layer->hidden_size;
    for (int i = 0; i < NUM_CASES; i++) {
        forward_case *c = &s->cases[i];
        c->dtype = dtypes[i];
        c->activation = acts[i];
        c->on_input = i == 3;
        c->out_bytes = elements * tk_dtype_size(c->dtype);
        c->hidden = malloc(c->out_bytes);
        c->expected = malloc(c->out_bytes);
        assert_non_null(c->hidden);
        assert_non_null(c->expected);
        tk_fill_activations(rng, c->dtype, elements, 1.0, c->hidden);
        tk_route_random(rng, TOKENS, s->layer->num_experts, TOPK, c->ids, c->router);
        tk_poison(c->expected, c->out_bytes);
        moeint4_forward_args args = case_args(c, c->expected);
        assert_int_equal(moeint4_forward(s->ctx, s->weights, &args), MOEINT4_SUCCESS);
        /* a poisoned (NaN) element left means the forward skipped it */
        for (size_t e = 0; e < elements; e++)
            assert_true(tk_load(c->dtype, c->expected, e) == tk_load(c->dtype, c->expected, e));
    }
}

static void free_cases(shared_state *s)
{
    for (int i = 0; i < NUM_CASES; i++) {
        free(s->cases[i].hidden);
        free(s->cases[i].expected);
    }
}

static void *forward_body(void *arg)
{
    worker *self = arg;
    shared_state *s = self->shared;
    size_t max_bytes = (size_t)TOKENS * (size_t)s->layer->hidden_size * 4;
    uint8_t *out = malloc(max_bytes);
    pthread_barrier_wait(&s->barrier);
    for (int round = 0; round < ROUNDS && out; round++)
        for (int k = 0; k < NUM_CASES; k++) {
            const forward_case *c = &s->cases[(k + self->index) % NUM_CASES];
            tk_poison(out, max_bytes);
            moeint4_forward_args args = case_args(c, out);
            if (moeint4_forward(s->ctx, s->weights, &args) != MOEINT4_SUCCESS) {
                self->failures++;
                snprintf(self->message, sizeof self->message, "%s", moeint4_last_error());
            } else if (memcmp(out, c->expected, c->out_bytes) != 0) {
                self->mismatches++;
            }
        }
    if (!out)
        self->failures++;
    free(out);
    return NULL;
}

static void run_workers(shared_state *s, void *(*body)(void *), worker *workers)
{
    pthread_t threads[THREADS];
    pthread_barrier_init(&s->barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].shared = s;
        workers[i].index = i;
        assert_int_equal(pthread_create(&threads[i], NULL, body, &workers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&s->barrier);
    for (int i = 0; i < THREADS; i++) {
        if (workers[i].failures)
            fail_msg("thread %d: %d failed calls: %s", i, workers[i].failures, workers[i].message);
        if (workers[i].mismatches)
            fail_msg("thread %d: %d outputs differ from the single-thread answer", i,
                     workers[i].mismatches);
    }
}

static void forwards_on_one_handle(int pool_threads)
{
    tk_rng rng;
    tk_rng_seed(&rng, 1234 + (uint64_t)pool_threads);
    tk_layer layer;
    assert_int_equal(tk_layer_random(&layer, MOEINT4_FORMAT_GPTQ_ASYM, 0, 8, 128, 96, 32,
                                     MOEINT4_DTYPE_F16, 1, &rng),
                     0);
    shared_state s;
    memset(&s, 0, sizeof s);
    s.layer = &layer;
    moeint4_context_options options = {
        sizeof options, MOEINT4_BACKEND_CPU,     0, pool_threads, NULL, NULL,
        NULL,           MOEINT4_GPU_WEIGHTS_AUTO
    };
    assert_int_equal(moeint4_context_create(&options, &s.ctx), MOEINT4_SUCCESS);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    assert_int_equal(moeint4_weights_prepare(s.ctx, &desc, &s.weights), MOEINT4_SUCCESS);
    make_cases(&s, &rng);
    worker workers[THREADS];
    run_workers(&s, forward_body, workers);
    free_cases(&s);
    moeint4_weights_release(s.weights);
    moeint4_context_destroy(s.ctx);
    tk_layer_free(&layer);
}

static void test_forwards_one_handle_pool1(void **state)
{
    (void)state;
    forwards_on_one_handle(1);
}

static void test_forwards_one_handle_pool2(void **state)
{
    (void)state;
    forwards_on_one_handle(2);
}

/* Each thread: create a context (CPU or AUTO), prepare, forward, release,
 * destroy, several times, all at once. */
static void *life_cycle_body(void *arg)
{
    worker *self = arg;
    const tk_layer *layer = self->shared->layer;
    pthread_barrier_wait(&self->shared->barrier);
    for (int round = 0; round < ROUNDS; round++) {
        moeint4_context_options options = { sizeof options,
                                            (self->index + round) % 2 ? MOEINT4_BACKEND_CPU
                                                                      : MOEINT4_BACKEND_AUTO,
                                            0,
                                            1 + round % 2,
                                            NULL,
                                            NULL,
                                            NULL,
                                            MOEINT4_GPU_WEIGHTS_AUTO };
        moeint4_context *ctx = NULL;
        moeint4_weights *weights = NULL;
        moeint4_weights_desc desc = tk_layer_desc(layer);
        float hidden[4 * 64], out[4 * 64];
        int32_t ids[4] = { 0, 1, 2, 3 };
        float router[4] = { 0.5f, 0.25f, 1.0f, 0.75f };
        for (int i = 0; i < 4 * 64; i++)
            hidden[i] = (float)((i * 37 + self->index) % 17) / 8.0f - 1.0f;
        moeint4_forward_args args;
        memset(&args, 0, sizeof args);
        args.struct_size = sizeof args;
        args.dtype = MOEINT4_DTYPE_F32;
        args.num_tokens = 4;
        args.topk = 1;
        args.hidden_states = hidden;
        args.topk_ids = ids;
        args.topk_weights = router;
        args.output = out;
        if (moeint4_context_create(&options, &ctx) != MOEINT4_SUCCESS ||
            moeint4_weights_prepare(ctx, &desc, &weights) != MOEINT4_SUCCESS ||
            moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS) {
            self->failures++;
            snprintf(self->message, sizeof self->message, "%s", moeint4_last_error());
        }
        /* every other round leaves the weights to context_destroy */
        if (round % 2 == 0)
            moeint4_weights_release(weights);
        moeint4_context_destroy(ctx);
    }
    return NULL;
}

static void test_concurrent_context_life_cycles(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 99);
    tk_layer layer;
    assert_int_equal(
        tk_layer_random(&layer, MOEINT4_FORMAT_AWQ, 0, 4, 64, 32, 32, MOEINT4_DTYPE_BF16, 0, &rng),
        0);
    shared_state s;
    memset(&s, 0, sizeof s);
    s.layer = &layer;
    worker workers[THREADS];
    run_workers(&s, life_cycle_body, workers);
    tk_layer_free(&layer);
}

/* Everything that reads the registry, plus loading a plugin file, at once. */
static void *registry_body(void *arg)
{
    worker *self = arg;
    pthread_barrier_wait(&self->shared->barrier);
    for (int round = 0; round < 20; round++) {
        moeint4_backend ids[MI4_MAX_BACKENDS];
        int count = 0;
        if (moeint4_backend_list(ids, MI4_MAX_BACKENDS, &count) != MOEINT4_SUCCESS || count < 1) {
            self->failures++;
            continue;
        }
        for (int i = 0; i < count && i < MI4_MAX_BACKENDS; i++) {
            moeint4_backend_info info;
            memset(&info, 0, sizeof info);
            info.struct_size = sizeof info;
            if (moeint4_backend_query(ids[i], &info) != MOEINT4_SUCCESS)
                self->failures++;
            moeint4_backend by_name;
            if (moeint4_backend_from_name(info.name, &by_name) != MOEINT4_SUCCESS ||
                by_name != ids[i])
                self->failures++;
        }
        moeint4_problem problem = {
            sizeof problem, MOEINT4_FORMAT_GPTQ_SYM, 128, 8, 8, 0, 256, 128, 0, 0, 0
        };
        moeint4_backend chosen;
        char table[1024];
        if (moeint4_oracle_select(&problem, MOEINT4_BACKEND_AUTO, 0, &chosen) != MOEINT4_SUCCESS ||
            moeint4_oracle_explain(&problem, MOEINT4_BACKEND_AUTO, 0, table, sizeof table, NULL) !=
                MOEINT4_SUCCESS)
            self->failures++;
        char reason[MI4_REASON_CAPACITY];
        const moeint4_backend_iface *plugin =
            mi4_plugin_load("libmoeint4-hip.so", MOEINT4_BACKEND_HIP, reason, sizeof reason);
        /* the fuzz plugin answers no table until told otherwise: refused, with words */
        if (plugin || reason[0] == '\0')
            self->failures++;
    }
    if (self->failures)
        snprintf(self->message, sizeof self->message, "registry answers: %s", moeint4_last_error());
    return NULL;
}

static void test_concurrent_registry_and_plugins(void **state)
{
    (void)state;
    shared_state s;
    memset(&s, 0, sizeof s);
    worker workers[THREADS];
    run_workers(&s, registry_body, workers);
}

int main(void)
{
    /* the registry's first use is part of the race: nothing before it */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_registry_and_plugins),
        cmocka_unit_test(test_forwards_one_handle_pool1),
        cmocka_unit_test(test_forwards_one_handle_pool2),
        cmocka_unit_test(test_concurrent_context_life_cycles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
