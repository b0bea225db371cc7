/* The asynchronous-forward fields of moeint4_forward_args on the CPU
 * backend, which accepts the flag and runs as usual: the same bits with and
 * without MOEINT4_FORWARD_ASYNC (and a workspace, which it ignores), a
 * workspace size of 0, a check that succeeds; a caller struct of the first
 * published size (ending at `stream`) works; unknown flag bits, a
 * workspace_bytes without workspace and bad workspace-size arguments are
 * refused naming the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moeint4.h"
#include "testkit.h"

typedef struct fixture {
    moeint4_context *ctx;
    tk_layer layer;
    moeint4_weights *weights;
} fixture;

static int setup(void **state)
{
    static fixture f;
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_CPU;
    if (moeint4_context_create(&options, &f.ctx) != MOEINT4_SUCCESS)
        return -1;
    tk_rng rng;
    tk_rng_seed(&rng, 7);
    if (tk_layer_random(&f.layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 8, 64, 32, 32, MOEINT4_DTYPE_F16, 0,
                        &rng) != 0)
        return -1;
    moeint4_weights_desc desc = tk_layer_desc(&f.layer);
    if (moeint4_weights_prepare(f.ctx, &desc, &f.weights) != MOEINT4_SUCCESS)
        return -1;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    moeint4_weights_release(f->weights);
    tk_layer_free(&f->layer);
    moeint4_context_destroy(f->ctx);
    return 0;
}

enum { TOKENS = 5, TOPK = 2, HIDDEN = 64 };

typedef struct batch {
    float x[TOKENS * HIDDEN], router[TOKENS * TOPK], out[TOKENS * HIDDEN];
    int32_t ids[TOKENS * TOPK];
} batch;

static void fill(batch *b)
{
    tk_rng rng;
    tk_rng_seed(&rng, 11);
    tk_fill_activations(&rng, MOEINT4_DTYPE_F32, TOKENS * HIDDEN, 1.0, b->x);
    tk_route_random(&rng, TOKENS, 8, TOPK, b->ids, b->router);
}

static void test_async_flag_runs_as_usual(void **state)
{
    fixture *f = *state;
    batch b;
    fill(&b);
    moeint4_forward_args args =
        tk_forward_args(MOEINT4_DTYPE_F32, TOKENS, TOPK, b.x, b.ids, b.router, b.out, NULL);
    assert_int_equal(moeint4_forward(f->ctx, f->weights, &args), MOEINT4_SUCCESS);
    float plain[TOKENS * HIDDEN];
    memcpy(plain, b.out, sizeof plain);
    char scratch[64];
    tk_poison(b.out, sizeof b.out);
    args.flags = MOEINT4_FORWARD_ASYNC;
    args.workspace = scratch;
    args.workspace_bytes = sizeof scratch;
    assert_int_equal(moeint4_forward(f->ctx, f->weights, &args), MOEINT4_SUCCESS);
    assert_memory_equal(b.out, plain, sizeof plain);
    assert_int_equal(moeint4_forward_check(f->ctx, f->weights, NULL), MOEINT4_SUCCESS);
    size_t bytes = 123;
    assert_int_equal(
        moeint4_forward_workspace_size(f->weights, 4096, TOPK, MOEINT4_DTYPE_BF16, &bytes),
        MOEINT4_SUCCESS);
    assert_int_equal(bytes, 0);

    /* A caller compiled against the first published struct (no flags,
     * workspace, workspace_bytes): the tail it lacks reads as 0 / NULL even
     * when the memory behind it holds garbage. */
    union {
        moeint4_forward_args args;
        unsigned char bytes[sizeof(moeint4_forward_args)];
    } old;
    memset(old.bytes, 0xA5, sizeof old.bytes);
    memcpy(old.bytes, &args, MOEINT4_FORWARD_ARGS_MIN_SIZE);
    old.args.struct_size = MOEINT4_FORWARD_ARGS_MIN_SIZE;
    tk_poison(b.out, sizeof b.out);
    assert_int_equal(moeint4_forward(f->ctx, f->weights, &old.args), MOEINT4_SUCCESS);
    assert_memory_equal(b.out, plain, sizeof plain);
}

static void test_bad_async_fields(void **state)
{
    fixture *f = *state;
    batch b;
    fill(&b);
    tk_poison(b.out, sizeof b.out);
    float untouched[TOKENS * HIDDEN];
    memcpy(untouched, b.out, sizeof untouched);
    moeint4_forward_args args =
        tk_forward_args(MOEINT4_DTYPE_F32, TOKENS, TOPK, b.x, b.ids, b.router, b.out, NULL);
    args.flags = 0x6u;
    assert_int_equal(moeint4_forward(f->ctx, f->weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_non_null(strstr(moeint4_last_error(), "args->flags = 0x6"));
    args.flags = 0;
    args.workspace_bytes = 4096;
    assert_int_equal(moeint4_forward(f->ctx, f->weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_non_null(strstr(moeint4_last_error(), "args->workspace_bytes = 4096"));
    args.workspace_bytes = 0;
    args.struct_size = MOEINT4_FORWARD_ARGS_MIN_SIZE - 1;
    assert_int_equal(moeint4_forward(f->ctx, f->weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_memory_equal(b.out, untouched, sizeof untouched);

    size_t bytes = 0;
    assert_int_equal(moeint4_forward_workspace_size(NULL, 1, 1, MOEINT4_DTYPE_BF16, &bytes),
                     MOEINT4_INVALID_ARGUMENT);
    assert_int_equal(moeint4_forward_workspace_size(f->weights, -1, 1, MOEINT4_DTYPE_BF16, &bytes),
                     MOEINT4_INVALID_ARGUMENT);
    assert_non_null(strstr(moeint4_last_error(), "max_tokens = -1"));
    assert_int_equal(moeint4_forward_workspace_size(f->weights, 1, 9, MOEINT4_DTYPE_BF16, &bytes),
                     MOEINT4_INVALID_ARGUMENT);
    assert_non_null(strstr(moeint4_last_error(), "topk = 9"));
    assert_int_equal(moeint4_forward_workspace_size(f->weights, 1, 1, (moeint4_dtype)77, &bytes),
                     MOEINT4_INVALID_ARGUMENT);
    assert_int_equal(moeint4_forward_workspace_size(f->weights, 1, 1, MOEINT4_DTYPE_BF16, NULL),
                     MOEINT4_INVALID_ARGUMENT);
    assert_int_equal(moeint4_forward_check(NULL, f->weights, NULL), MOEINT4_INVALID_ARGUMENT);
    assert_int_equal(moeint4_forward_check(f->ctx, NULL, NULL), MOEINT4_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_flag_runs_as_usual),
        cmocka_unit_test(test_bad_async_fields),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
