/* Allocation-failure injection (MOEINT4_FAULT_INJECTION builds only): every
 * host allocation of context creation, weights_prepare and forward is made
 * to fail in turn. Each failing call must answer OUT_OF_MEMORY with a
 * message, leave its outputs untouched, leak nothing (the wrappers' live
 * block count returns to where it was; ASan and valgrind check the same in
 * scripts/reliability.sh), and the next call must work and give the same
 * bits as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "moeint4.h"
#include "testkit.h"

typedef struct layer_case {
    moeint4_format format;
    int zero_offset, num_experts, hidden, inter, group, expert_map_mode;
    moeint4_dtype scales_dtype;
} layer_case;

static const layer_case layer_cases[] = {
    { MOEINT4_FORMAT_GPTQ_SYM, 0, 4, 256, 128, 128, 0, MOEINT4_DTYPE_F16 },
    { MOEINT4_FORMAT_GPTQ_ASYM, 1, 6, 64, 96, 32, 1, MOEINT4_DTYPE_BF16 },
    { MOEINT4_FORMAT_AWQ, 0, 5, 128, 64, -1, 1, MOEINT4_DTYPE_F16 },
};

typedef struct forward_case {
    moeint4_dtype dtype;
    int64_t tokens;
    int topk;
    moeint4_activation activation;
    int on_input;
} forward_case;

static const forward_case forward_cases[] = {
    { MOEINT4_DTYPE_BF16, 1, 2, MOEINT4_ACTIVATION_SILU, 0 },
    { MOEINT4_DTYPE_F32, 5, 3, MOEINT4_ACTIVATION_SWIGLU_CLAMP, 1 },
    { MOEINT4_DTYPE_F16, 70, 2, MOEINT4_ACTIVATION_GELU, 0 },
};

typedef struct fixture {
    tk_layer layer;
    moeint4_context *ctx;
    moeint4_weights *weights;
    void *hidden, *expected, *out;
    int32_t *ids;
    float *router;
    size_t out_bytes;
    moeint4_forward_args args;
} fixture;

static int fallbacks; /* failures a call absorbed (reported, not an error) */

static void make_layer(fixture *f, const layer_case *lc, tk_rng *rng)
{
    assert_int_equal(tk_layer_random(&f->layer, lc->format, lc->zero_offset, lc->num_experts,
                                     lc->hidden, lc->inter, lc->group, lc->scales_dtype,
                                     lc->expert_map_mode, rng),
                     0);
}

static void make_args(fixture *f, const forward_case *fc, tk_rng *rng)
{
    size_t elements = (size_t)fc->tokens * (size_t)f->layer.hidden_size;
    f->out_bytes = elements * tk_dtype_size(fc->dtype);
    f->hidden = malloc(f->out_bytes);
    f->expected = malloc(f->out_bytes);
    f->out = malloc(f->out_bytes);
    f->ids = malloc((size_t)fc->tokens * (size_t)fc->topk * sizeof *f->ids);
    f->router = malloc((size_t)fc->tokens * (size_t)fc->topk * sizeof *f->router);
    assert_true(f->hidden && f->expected && f->out && f->ids && f->router);
    tk_fill_activations(rng, fc->dtype, elements, 1.0, f->hidden);
    tk_route_random(rng, fc->tokens, f->layer.num_experts, fc->topk, f->ids, f->router);
    memset(&f->args, 0, sizeof f->args);
    f->args.struct_size = sizeof f->args;
    f->args.dtype = fc->dtype;
    f->args.num_tokens = fc->tokens;
    f->args.topk = fc->topk;
    f->args.hidden_states = f->hidden;
    f->args.topk_ids = f->ids;
    f->args.topk_weights = f->router;
    f->args.activation = fc->activation;
    f->args.swiglu_limit = 7.0f;
    f->args.swiglu_alpha = 1.702f;
    f->args.swiglu_beta = 1.0f;
    f->args.apply_router_weight_on_input = fc->on_input;
}

static void free_args(fixture *f)
{
    free(f->hidden);
    free(f->expected);
    free(f->out);
    free(f->ids);
    free(f->router);
}

/* Runs the forward into f->out (poisoned first). */
static moeint4_status run_forward(fixture *f, const moeint4_weights *weights)
{
    tk_poison(f->out, f->out_bytes);
    moeint4_forward_args args = f->args;
    args.output = f->out;
    return moeint4_forward(f->ctx, weights, &args);
}

/* A failing call's verdict: OOM with words and no leak, or (a fallback
 * that absorbed the failure) success. Returns 1 when it failed. */
static int check_failed_call(moeint4_status status, long live_before, const char *what, long site)
{
    if (status == MOEINT4_SUCCESS) {
        fallbacks++;
        return 0;
    }
    if (status != MOEINT4_OUT_OF_MEMORY)
        fail_msg("%s, allocation %ld failing: status %s (%s), expected OUT_OF_MEMORY", what, site,
                 moeint4_status_string(status), moeint4_last_error());
    if (moeint4_last_error()[0] == '\0')
        fail_msg("%s, allocation %ld failing: OUT_OF_MEMORY without a message", what, site);
    if (mi4_alloc_live() != live_before)
        fail_msg("%s, allocation %ld failing: %ld blocks leaked", what, site,
                 mi4_alloc_live() - live_before);
    return 1;
}

static void fail_each_prepare_allocation(fixture *f)
{
    moeint4_weights_desc desc = tk_layer_desc(&f->layer);
    /* the first prepare also creates the context's CPU state (pool) and the
     * first forward the scratch the context keeps, both as long as the
     * context lives: test_first_prepare_sites and
     * fail_each_forward_allocation cover those */
    assert_int_equal(moeint4_weights_prepare(f->ctx, &desc, &f->weights), MOEINT4_SUCCESS);
    assert_int_equal(run_forward(f, f->weights), MOEINT4_SUCCESS);
    memcpy(f->expected, f->out, f->out_bytes);
    moeint4_weights_release(f->weights);
    mi4_alloc_fail_after(-1);
    long live_before = mi4_alloc_live();
    assert_int_equal(moeint4_weights_prepare(f->ctx, &desc, &f->weights), MOEINT4_SUCCESS);
    long sites = mi4_alloc_count();
    assert_true(sites > 0); /* prepare allocates: otherwise this test proves nothing */
    printf("prepare: %ld allocations, each failed in turn\n", sites);
    moeint4_weights_release(f->weights);
    assert_int_equal(mi4_alloc_live(), live_before);

    for (long site = 0; site < sites; site++) {
        moeint4_weights *const sentinel = (moeint4_weights *)(uintptr_t)0x77;
        moeint4_weights *weights = sentinel;
        mi4_alloc_fail_after(site);
        moeint4_status status = moeint4_weights_prepare(f->ctx, &desc, &weights);
        mi4_alloc_fail_after(-1);
        if (check_failed_call(status, live_before, "weights_prepare", site)) {
            assert_ptr_equal(weights, sentinel);
        } else {
            moeint4_weights_release(weights);
        }
        /* the library still works, with the same bits */
        assert_int_equal(moeint4_weights_prepare(f->ctx, &desc, &weights), MOEINT4_SUCCESS);
        assert_int_equal(run_forward(f, weights), MOEINT4_SUCCESS);
        assert_memory_equal(f->out, f->expected, f->out_bytes);
        moeint4_weights_release(weights);
        assert_int_equal(mi4_alloc_live(), live_before);
    }
}

static void open_context(fixture *f, int threads);

/* Each allocation of a context's first forward fails in turn (that forward
 * allocates the scratch the context then keeps; later forwards allocate
 * nothing), each on a fresh context: OOM with words or a fallback, the
 * output untouched on failure, the next forward right, and nothing left
 * once the context is destroyed. The caller's context is replaced. */
static void fail_each_forward_allocation(fixture *f, int threads)
{
    moeint4_weights_desc desc = tk_layer_desc(&f->layer);
    moeint4_context_destroy(f->ctx);
    f->ctx = NULL;
    mi4_alloc_fail_after(-1);
    long live_empty = mi4_alloc_live();
    long sites = -1;
    for (long site = -1; sites < 0 || site < sites; site++) { /* -1: the reference run */
        open_context(f, threads);
        assert_int_equal(moeint4_weights_prepare(f->ctx, &desc, &f->weights), MOEINT4_SUCCESS);
        mi4_alloc_fail_after(site);
        moeint4_status status = run_forward(f, f->weights);
        long attempted = mi4_alloc_count();
        mi4_alloc_fail_after(-1);
        if (site < 0) {
            assert_int_equal(status, MOEINT4_SUCCESS);
            sites = attempted;
            assert_true(sites > 0); /* the first forward allocates its scratch */
            printf("forward (M = %lld): %ld allocations, each failed in turn\n",
                   (long long)f->args.num_tokens, sites);
            memcpy(f->expected, f->out, f->out_bytes);
        } else if (status == MOEINT4_SUCCESS) {
            fallbacks++;
            assert_memory_equal(f->out, f->expected, f->out_bytes);
        } else {
            if (status != MOEINT4_OUT_OF_MEMORY || moeint4_last_error()[0] == '\0')
                fail_msg("forward, allocation %ld failing: status %s (%s), expected "
                         "OUT_OF_MEMORY with a message",
                         site, moeint4_status_string(status), moeint4_last_error());
            if (!tk_still_poisoned(f->out, f->out_bytes))
                fail_msg("forward, allocation %ld failing: output written", site);
        }
        /* the library still works, with the same bits */
        assert_int_equal(run_forward(f, f->weights), MOEINT4_SUCCESS);
        assert_memory_equal(f->out, f->expected, f->out_bytes);
        moeint4_weights_release(f->weights);
        moeint4_context_destroy(f->ctx);
        f->ctx = NULL;
        assert_int_equal(mi4_alloc_live(), live_empty);
    }
    open_context(f, threads);
}

static void open_context(fixture *f, int threads)
{
    moeint4_context_options options = {
        sizeof options, MOEINT4_BACKEND_CPU, 0, threads, NULL, NULL, NULL, MOEINT4_GPU_WEIGHTS_AUTO
    };
    assert_int_equal(moeint4_context_create(&options, &f->ctx), MOEINT4_SUCCESS);
}

/* One worker thread: allocations happen in one order, so "the i-th" is
 * the same site every run. */
static void test_prepare_and_forward_sites(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 2026);
    for (size_t l = 0; l < sizeof layer_cases / sizeof layer_cases[0]; l++)
        for (size_t c = 0; c < sizeof forward_cases / sizeof forward_cases[0]; c++) {
            fixture f;
            memset(&f, 0, sizeof f);
            make_layer(&f, &layer_cases[l], &rng);
            make_args(&f, &forward_cases[c], &rng);
            open_context(&f, 1);
            fail_each_prepare_allocation(&f);
            fail_each_forward_allocation(&f, 1);
            moeint4_context_destroy(f.ctx);
            free_args(&f);
            tk_layer_free(&f.layer);
        }
    printf("allocation failures absorbed by a fallback: %d\n", fallbacks);
}

/* Two workers: the order may vary, the verdicts must not. */
static void test_sites_with_two_workers(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 7);
    fixture f;
    memset(&f, 0, sizeof f);
    make_layer(&f, &layer_cases[1], &rng);
    make_args(&f, &forward_cases[2], &rng);
    open_context(&f, 2);
    fail_each_prepare_allocation(&f);
    fail_each_forward_allocation(&f, 2);
    moeint4_context_destroy(f.ctx);
    free_args(&f);
    tk_layer_free(&f.layer);
}

static void test_context_create_sites(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        moeint4_context_options options = {
            sizeof options, MOEINT4_BACKEND_CPU,     0, threads, NULL, NULL,
            NULL,           MOEINT4_GPU_WEIGHTS_AUTO
        };
        mi4_alloc_fail_after(-1);
        long live_before = mi4_alloc_live();
        moeint4_context *ctx = NULL;
        assert_int_equal(moeint4_context_create(&options, &ctx), MOEINT4_SUCCESS);
        long sites = mi4_alloc_count();
        moeint4_context_destroy(ctx);
        assert_int_equal(mi4_alloc_live(), live_before);
        for (long site = 0; site < sites; site++) {
            moeint4_context *const sentinel = (moeint4_context *)(uintptr_t)0x99;
            ctx = sentinel;
            mi4_alloc_fail_after(site);
            moeint4_status status = moeint4_context_create(&options, &ctx);
            mi4_alloc_fail_after(-1);
            if (check_failed_call(status, live_before, "context_create", site))
                assert_ptr_equal(ctx, sentinel);
            else
                moeint4_context_destroy(ctx);
            assert_int_equal(moeint4_context_create(&options, &ctx), MOEINT4_SUCCESS);
            moeint4_context_destroy(ctx);
            assert_int_equal(mi4_alloc_live(), live_before);
        }
    }
}

/* The first prepare on a fresh context (the forced CPU backend's state was
 * made by context_create; the prepare makes the weights and what the
 * backend sets up on first use): whatever fails, destroying the context
 * frees everything. */
static void test_first_prepare_sites(void **state)
{
    (void)state;
    tk_rng rng;
    tk_rng_seed(&rng, 11);
    fixture f;
    memset(&f, 0, sizeof f);
    make_layer(&f, &layer_cases[0], &rng);
    moeint4_weights_desc desc = tk_layer_desc(&f.layer);
    for (int threads = 1; threads <= 2; threads++) {
        mi4_alloc_fail_after(-1);
        long live_before = mi4_alloc_live();
        open_context(&f, threads);
        long after_create = mi4_alloc_count();
        assert_int_equal(moeint4_weights_prepare(f.ctx, &desc, &f.weights), MOEINT4_SUCCESS);
        long sites = mi4_alloc_count() - after_create;
        moeint4_context_destroy(f.ctx);
        assert_int_equal(mi4_alloc_live(), live_before);
        for (long site = 0; site < sites; site++) {
            open_context(&f, threads);
            moeint4_weights *weights = NULL;
            mi4_alloc_fail_after(site);
            moeint4_status status = moeint4_weights_prepare(f.ctx, &desc, &weights);
            mi4_alloc_fail_after(-1);
            if (status == MOEINT4_SUCCESS)
                fallbacks++;
            else if (status != MOEINT4_OUT_OF_MEMORY || moeint4_last_error()[0] == '\0')
                fail_msg("first prepare, allocation %ld failing: %s (%s)", site,
                         moeint4_status_string(status), moeint4_last_error());
            /* still works on the same context */
            moeint4_weights *again = NULL;
            assert_int_equal(moeint4_weights_prepare(f.ctx, &desc, &again), MOEINT4_SUCCESS);
            moeint4_context_destroy(f.ctx); /* releases what is left */
            assert_int_equal(mi4_alloc_live(), live_before);
        }
    }
    tk_layer_free(&f.layer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_context_create_sites),
        cmocka_unit_test(test_first_prepare_sites),
        cmocka_unit_test(test_prepare_and_forward_sites),
        cmocka_unit_test(test_sites_with_two_workers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
