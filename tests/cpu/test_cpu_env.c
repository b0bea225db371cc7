/* The CPU backend's environment knobs are read at moeint4_context_create
 * (README "Choosing a backend"): changing them between create and the first
 * prepare changes nothing on that context; a new context sees the change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/handles.h"
#include "moeint4.h"
#include "testkit.h"

/* The kernel table of ctx's CPU backend state (made at create). */
static const char *cpu_kernels_of(moeint4_context *ctx)
{
    for (int i = 0; i < ctx->num_slots; i++)
        if (ctx->slots[i].entry->id == MOEINT4_BACKEND_CPU)
            return ((mi4_cpu_context *)ctx->slots[i].backend_context)->kernels->name;
    return NULL;
}

static moeint4_context *create(moeint4_backend backend)
{
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = backend;
    options.num_threads = 2;
    moeint4_context *ctx = NULL;
    assert_int_equal(moeint4_context_create(&options, &ctx), MOEINT4_SUCCESS);
    return ctx;
}

static void prepare_and_release(moeint4_context *ctx)
{
    tk_layer layer;
    tk_rng rng;
    tk_rng_seed(&rng, 5);
    assert_int_equal(tk_layer_random(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 4, 64, 32, 32,
                                     MOEINT4_DTYPE_F16, 0, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    moeint4_weights *weights = NULL;
    assert_int_equal(moeint4_weights_prepare(ctx, &desc, &weights), MOEINT4_SUCCESS);
    moeint4_weights_release(weights);
    tk_layer_free(&layer);
}

static void check_kernel_read_at_create(moeint4_backend backend)
{
    const char *best = mi4_cpu_kernels_select()->name; /* with the variable unset */
    setenv("MOEINT4_CPU_KERNEL", "scalar", 1);
    moeint4_context *ctx = create(backend);
    unsetenv("MOEINT4_CPU_KERNEL");
    assert_non_null(cpu_kernels_of(ctx));
    assert_string_equal(cpu_kernels_of(ctx), "scalar");
    prepare_and_release(ctx); /* the first prepare does not read it again */
    assert_string_equal(cpu_kernels_of(ctx), "scalar");
    moeint4_context_destroy(ctx);

    ctx = create(backend); /* a new context sees the variable gone */
    assert_string_equal(cpu_kernels_of(ctx), best);
    moeint4_context_destroy(ctx);
}

static void test_forced_cpu_context(void **state)
{
    (void)state;
    check_kernel_read_at_create(MOEINT4_BACKEND_CPU);
}

/* With no GPU backend here, the CPU is the first available backend: an AUTO
 * context makes its state at create too. */
static void test_auto_context(void **state)
{
    (void)state;
    check_kernel_read_at_create(MOEINT4_BACKEND_AUTO);
}

int main(void)
{
    unsetenv("MOEINT4_CPU_KERNEL");
    unsetenv("MOEINT4_BACKEND");
    setenv("MOEINT4_BACKEND_PATH", "", 1); /* no GPU plugin: the CPU comes first */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forced_cpu_context),
        cmocka_unit_test(test_auto_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
