/* Routing of many slots on the HIP backend, on both paths forced with
 * MOEINT4_HIP_ROUTE: the one-block kernel and the multi-block path (count
 * chunks, offsets, scatter). Each path matches the double reference, the two
 * give the same bits, and a bad id at a late slot is reported by its
 * token and slot with the output untouched, after which the same context
 * works. Exits 77 (ctest: skipped) when the plugin or a GPU is missing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hip_test_util.h"

static const char *const route_paths[2] = { "one", "multi" };
static const tk_activation silu_on_output = { MOEINT4_ACTIVATION_SILU, 0.0, 0.0, 0.0, 0 };

static hip_test_case route_case(int64_t m, int topk, uint64_t seed)
{
    return (hip_test_case){ .dtype = MOEINT4_DTYPE_BF16,
                            .num_tokens = m,
                            .topk = topk,
                            .activation = MOEINT4_ACTIVATION_SILU,
                            .seed = seed };
}

/* Both paths against the reference, then against each other byte for byte. */
static void check_both_paths(moeint4_context *ctx, const moeint4_weights *w, const tk_layer *layer,
                             const hip_test_case *c)
{
    size_t count = (size_t)c->num_tokens * (size_t)layer->hidden_size;
    size_t bytes = count * tk_dtype_size(c->dtype);
    void *got[2] = { malloc(bytes), malloc(bytes) };
    double *want = malloc(count * sizeof *want);
    assert_non_null(got[0]);
    assert_non_null(got[1]);
    assert_non_null(want);
    for (int p = 0; p < 2; p++) {
        setenv("MOEINT4_HIP_ROUTE", route_paths[p], 1);
        /* the same seed gives the same inputs; the reference once */
        moeint4_status status = hip_test_forward(ctx, w, layer, c, got[p], p == 0 ? want : NULL);
        if (status != MOEINT4_SUCCESS)
            print_error("moeint4_forward (route %s): %s: %s\n", route_paths[p],
                        moeint4_status_string(status), moeint4_last_error());
        assert_int_equal(status, MOEINT4_SUCCESS);
        double error = tk_relative_l2(c->dtype, got[p], want, count);
        print_message("  route %-5s M %lld topk %d experts %d (local %d): rel L2 %.3e\n",
                      route_paths[p], (long long)c->num_tokens, c->topk, layer->num_experts,
                      layer->num_local_experts, error);
        assert_true(error <= HIP_TOLERANCE);
    }
    assert_memory_equal(got[0], got[1], bytes);
    unsetenv("MOEINT4_HIP_ROUTE");
    free(got[0]);
    free(got[1]);
    free(want);
}

/* A GPTQ-sym layer of the given shape on a fresh context; every case on
 * both paths, on each row tile in `tiles` (NULL: the default choice). */
typedef struct route_layer {
    int num_experts, hidden, intermediate, group_size, expert_map_mode;
    uint64_t seed;
} route_layer;

static void check_layer(const route_layer *l, const hip_test_case *cases, int num_cases,
                        const char *const *tiles, int num_tiles)
{
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, l->num_experts, l->hidden,
                         l->intermediate, l->group_size, l->expert_map_mode, l->seed);
    if (l->expert_map_mode == 1)
        assert_true(layer.num_local_experts < layer.num_experts);
    for (int t = 0; t < num_tiles; t++) {
        if (tiles[t])
            setenv("MOEINT4_HIP_TILE", tiles[t], 1);
        else
            unsetenv("MOEINT4_HIP_TILE");
        print_message("tile %s\n", tiles[t] ? tiles[t] : "(default)");
        for (int i = 0; i < num_cases; i++)
            check_both_paths(ctx, w, &layer, &cases[i]);
    }
    unsetenv("MOEINT4_HIP_TILE");
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* 64 experts of which a third live elsewhere (-1 in expert_map): 8192 slots
 * (4 chunks) and 6000 slots (3 chunks of 2000, the last chunk partial), on
 * the default tile and on 16-row tiles (many tiles per expert). */
static void test_many_slots_expert_map(void **state)
{
    (void)state;
    const route_layer l = { 64, 256, 128, 128, 1, 91 };
    const hip_test_case cases[] = { route_case(1024, 8, 92), route_case(1000, 6, 93) };
    const char *const tiles[] = { NULL, "16" };
    check_layer(&l, cases, 2, tiles, 2);
}

/* 4096 local experts (the most hip supports) cap the multi-block path at 16
 * chunks: 32800 slots give chunks of 2050, so each block takes a second
 * pass over its chunk. */
static void test_many_experts_long_chunks(void **state)
{
    (void)state;
    const route_layer l = { 4096, 64, 32, 32, 0, 101 };
    const hip_test_case cases[] = { route_case(4100, 8, 102) };
    const char *const tiles[] = { NULL };
    check_layer(&l, cases, 1, tiles, 1);
}

/* One forward from host arrays through device buffers; the output buffer
 * starts as `out` and is downloaded back into it, even on failure. The
 * forward's error message goes to `message` (later calls clear it). */
static moeint4_status forward_from_host(moeint4_context *ctx, const moeint4_weights *w, int64_t m,
                                        int topk, int hidden_size, const uint16_t *hidden,
                                        const int32_t *ids, const float *router, uint16_t *out,
                                        char *message, size_t message_cap)
{
    size_t slots = (size_t)m * (size_t)topk, count = (size_t)m * (size_t)hidden_size;
    const void *host[4] = { hidden, ids, router, out };
    const size_t bytes[4] = { count * sizeof *hidden, slots * sizeof *ids, slots * sizeof *router,
                              count * sizeof *out };
    void *device[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(moeint4_memory_alloc(ctx, bytes[i], &device[i]), MOEINT4_SUCCESS);
        assert_int_equal(
            moeint4_memory_copy(ctx, device[i], host[i], bytes[i], MOEINT4_COPY_HOST_TO_DEVICE),
            MOEINT4_SUCCESS);
    }
    moeint4_forward_args args = tk_forward_args(MOEINT4_DTYPE_BF16, m, topk, device[0], device[1],
                                                device[2], device[3], &silu_on_output);
    moeint4_status status = moeint4_forward(ctx, w, &args);
    snprintf(message, message_cap, "%s", moeint4_last_error());
    assert_int_equal(
        moeint4_memory_copy(ctx, out, device[3], bytes[3], MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    for (int i = 0; i < 4; i++)
        moeint4_memory_free(ctx, device[i]);
    return status;
}

/* 9600 slots (5 chunks of 1920 on the multi-block path): bad ids at slots
 * 7003 (chunk 3), 7500 (chunk 3) and 9000 (chunk 4). The smallest is named
 * (token 875, k 3), the poisoned output comes back as it was, and then the
 * repaired ids run on the same context and match the reference. */
static void test_late_bad_id(void **state)
{
    (void)state;
    enum { M = 1200, TOPK = 8, K = 256, E = 64 };
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, E, K, 128, 128, 1, 111);
    const size_t slots = (size_t)M * TOPK, count = (size_t)M * K;
    uint16_t *hidden = malloc(count * sizeof *hidden);
    uint16_t *out = malloc(count * sizeof *out), *poison = malloc(count * sizeof *poison);
    int32_t *ids = malloc(slots * sizeof *ids);
    float *router = malloc(slots * sizeof *router);
    double *want = malloc(count * sizeof *want);
    assert_true(hidden && out && poison && ids && router && want);
    tk_rng rng;
    tk_rng_seed(&rng, 112);
    tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, count, 1.0, hidden);
    tk_route_random(&rng, M, E, TOPK, ids, router);
    tk_poison(poison, count * sizeof *poison);
    const size_t bad_slots[3] = { 7003, 7500, 9000 };
    const int32_t bad_values[3] = { E, -1, 1 << 30 };
    int32_t saved[3];
    char message[512];
    for (int i = 0; i < 3; i++)
        saved[i] = ids[bad_slots[i]];

    for (int p = 0; p < 2; p++) {
        setenv("MOEINT4_HIP_ROUTE", route_paths[p], 1);
        for (int b = 0; b < 3; b++) {
            for (int i = 0; i < 3; i++)
                ids[bad_slots[i]] = bad_values[(b + i) % 3];
            memcpy(out, poison, count * sizeof *out);
            moeint4_status status = forward_from_host(ctx, w, M, TOPK, K, hidden, ids, router, out,
                                                      message, sizeof message);
            print_message("route %s, bad id %d: %s: %s\n", route_paths[p], bad_values[b],
                          moeint4_status_string(status), message);
            assert_int_equal(status, MOEINT4_INVALID_ARGUMENT);
            char expected[64];
            snprintf(expected, sizeof expected, "topk_ids[875][3] = %d", bad_values[b]);
            assert_non_null(strstr(message, expected));
            assert_memory_equal(out, poison, count * sizeof *out);
        }
        /* The same context with the ids repaired: a good forward. */
        for (int i = 0; i < 3; i++)
            ids[bad_slots[i]] = saved[i];
        memcpy(out, poison, count * sizeof *out);
        moeint4_status status = forward_from_host(ctx, w, M, TOPK, K, hidden, ids, router, out,
                                                  message, sizeof message);
        if (status != MOEINT4_SUCCESS)
            print_error("repaired ids (route %s): %s\n", route_paths[p], message);
        assert_int_equal(status, MOEINT4_SUCCESS);
        if (p == 0)
            tk_reference_moe(&layer, MOEINT4_DTYPE_BF16, hidden, M, TOPK, ids, router,
                             &silu_on_output, NULL, 0, want);
        double error = tk_relative_l2(MOEINT4_DTYPE_BF16, out, want, count);
        print_message("route %s, repaired ids: rel L2 %.3e\n", route_paths[p], error);
        assert_true(error <= HIP_TOLERANCE);
    }
    unsetenv("MOEINT4_HIP_ROUTE");
    free(hidden);
    free(out);
    free(poison);
    free(ids);
    free(router);
    free(want);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

int main(void)
{
    if (!hip_test_available())
        return HIP_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_slots_expert_map),
        cmocka_unit_test(test_many_experts_long_chunks),
        cmocka_unit_test(test_late_bad_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
