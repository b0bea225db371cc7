#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core_test_util.h"

void util_make_layer(tk_layer *layer, moeint4_format format, int expert_map_mode, uint64_t seed)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    int zero_offset = 0;
    if (tk_layer_random(layer, format, zero_offset, UTIL_EXPERTS, UTIL_HIDDEN, 32, 32,
                        MOEINT4_DTYPE_F16, expert_map_mode, &rng) != 0)
        fail_msg("tk_layer_random failed");
}

moeint4_context_options util_options(moeint4_backend backend)
{
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = backend;
    options.num_threads = 2;
    return options;
}

void util_random_batch(uint64_t seed, moeint4_dtype dtype, int64_t m, int topk, void *hidden,
                       int32_t *ids, float *router)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    tk_fill_activations(&rng, dtype, (size_t)m * UTIL_HIDDEN, 1.0, hidden);
    tk_route_random(&rng, m, UTIL_EXPERTS, topk, ids, router);
}

moeint4_forward_args util_args(moeint4_dtype dtype, int64_t m, int topk, const void *hidden,
                               const int32_t *ids, const float *router, void *output)
{
    return tk_forward_args(dtype, m, topk, hidden, ids, router, output, NULL);
}

moeint4_context *util_context(moeint4_backend backend)
{
    moeint4_context_options options = util_options(backend);
    moeint4_context *ctx = NULL;
    assert_ok(moeint4_context_create(&options, &ctx));
    return ctx;
}
