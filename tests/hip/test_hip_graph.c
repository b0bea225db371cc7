/* The asynchronous forward inside a graph: one forward (M = 1, 8, 64, 128, 512)
 * is captured from a stream (global capture mode: a host sync, host read,
 * allocation or free during the capture fails it), then replayed
 * GRAPH_REPLAYS times with new inputs copied into the captured buffers;
 * every replay's output must equal, bit for bit, an eager synchronous
 * forward of the same inputs. Then a bad id and a non-finite router weight
 * written into the captured buffers are dropped (the output equals an eager
 * forward with those slots' weights set to 0) and moeint4_forward_check
 * names the first one once. The graph calls come from the plugin's test
 * extras (hip_test_extras.hip, through moeint4_backend_get_proc_address),
 * so they run in the plugin's own runtime.
 * Exits 77 (ctest: skipped) when the plugin or a GPU is missing. */
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
#include "moeint4_backend.h"

#define GRAPH_REPLAYS 1000

typedef struct graph_calls {
    int (*stream_create)(void **stream);
    int (*stream_destroy)(void *stream);
    int (*stream_synchronize)(void *stream);
    int (*capture_begin)(void *stream);
    int (*capture_end)(void *stream, void **graph);
    int (*graph_launch)(void *graph, void *stream);
    int (*graph_destroy)(void *graph);
} graph_calls;

/* The plugin's test extras through the public extension lookup (the plugin
 * instance the library loaded). */
static void *extra(const char *name)
{
    void *fn = moeint4_backend_get_proc_address(MOEINT4_BACKEND_HIP, name);
    if (fn == NULL)
        print_error("the hip plugin has no test extra %s (a build without tests?)\n", name);
    assert_non_null(fn);
    return fn;
}

static graph_calls load_graph_calls(void)
{
    graph_calls g;
    void *fn;
#define LOAD(field, name)                                                                          \
    fn = extra(name);                                                                              \
    memcpy(&g.field, &fn, sizeof fn)
    LOAD(stream_create, "hip_test_stream_create");
    LOAD(stream_destroy, "hip_test_stream_destroy");
    LOAD(stream_synchronize, "hip_test_stream_synchronize");
    LOAD(capture_begin, "hip_test_capture_begin");
    LOAD(capture_end, "hip_test_capture_end");
    LOAD(graph_launch, "hip_test_graph_launch");
    LOAD(graph_destroy, "hip_test_graph_destroy");
#undef LOAD
    return g;
}

typedef struct batch {
    int64_t m;
    int topk, k;
    size_t count, slots;
    uint16_t *hidden;
    int32_t *ids;
    float *router;
    void *d_hidden, *d_ids, *d_router, *d_out, *d_eager_out;
} batch;

static void upload_inputs(moeint4_context *ctx, const batch *b)
{
    assert_int_equal(
        moeint4_memory_copy(ctx, b->d_hidden, b->hidden, b->count * 2, MOEINT4_COPY_HOST_TO_DEVICE),
        MOEINT4_SUCCESS);
    assert_int_equal(
        moeint4_memory_copy(ctx, b->d_ids, b->ids, b->slots * 4, MOEINT4_COPY_HOST_TO_DEVICE),
        MOEINT4_SUCCESS);
    assert_int_equal(
        moeint4_memory_copy(ctx, b->d_router, b->router, b->slots * 4, MOEINT4_COPY_HOST_TO_DEVICE),
        MOEINT4_SUCCESS);
}

static void random_inputs(batch *b, int num_experts, uint64_t seed)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, b->count, 1.0, b->hidden);
    tk_route_random(&rng, b->m, num_experts, b->topk, b->ids, b->router);
}

/* The eager synchronous forward of the uploaded inputs, downloaded. */
static void eager(moeint4_context *ctx, const moeint4_weights *w, const batch *b, void *stream,
                  uint16_t *out)
{
    moeint4_forward_args args = tk_forward_args(MOEINT4_DTYPE_BF16, b->m, b->topk, b->d_hidden,
                                                b->d_ids, b->d_router, b->d_eager_out, NULL);
    args.stream = stream;
    moeint4_status status = moeint4_forward(ctx, w, &args);
    if (status != MOEINT4_SUCCESS)
        print_error("eager forward: %s\n", moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);
    assert_int_equal(
        moeint4_memory_copy(ctx, out, b->d_eager_out, b->count * 2, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
}

static void replay(moeint4_context *ctx, const graph_calls *g, void *graph, void *stream,
                   const batch *b, uint16_t *out)
{
    assert_int_equal(g->graph_launch(graph, stream), 0);
    assert_int_equal(g->stream_synchronize(stream), 0);
    assert_int_equal(
        moeint4_memory_copy(ctx, out, b->d_out, b->count * 2, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
}

static void graph_case(moeint4_context *ctx, const graph_calls *g, const moeint4_weights *w,
                       int num_experts, int64_t m, int topk, int k)
{
    batch b;
    memset(&b, 0, sizeof b);
    b.m = m;
    b.topk = topk;
    b.k = k;
    b.count = (size_t)m * (size_t)k;
    b.slots = (size_t)m * (size_t)topk;
    b.hidden = malloc(b.count * 2);
    b.ids = malloc(b.slots * 4);
    b.router = malloc(b.slots * 4);
    uint16_t *got = malloc(b.count * 2), *want = malloc(b.count * 2);
    assert_true(b.hidden && b.ids && b.router && got && want);
    assert_int_equal(moeint4_memory_alloc(ctx, b.count * 2, &b.d_hidden), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_memory_alloc(ctx, b.slots * 4, &b.d_ids), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_memory_alloc(ctx, b.slots * 4, &b.d_router), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_memory_alloc(ctx, b.count * 2, &b.d_out), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_memory_alloc(ctx, b.count * 2, &b.d_eager_out), MOEINT4_SUCCESS);
    size_t ws_bytes = 0;
    assert_int_equal(moeint4_forward_workspace_size(w, m, topk, MOEINT4_DTYPE_BF16, &ws_bytes),
                     MOEINT4_SUCCESS);
    void *d_ws = NULL;
    assert_int_equal(moeint4_memory_alloc(ctx, ws_bytes, &d_ws), MOEINT4_SUCCESS);
    void *stream = NULL;
    assert_int_equal(g->stream_create(&stream), 0);

    /* Capture with the first inputs in place (the capture runs nothing),
     * after one eager forward of this size, as engines warm up. */
    random_inputs(&b, num_experts, 1000 + (uint64_t)m);
    upload_inputs(ctx, &b);
    eager(ctx, w, &b, stream, want);
    moeint4_forward_args args = tk_forward_args(MOEINT4_DTYPE_BF16, m, topk, b.d_hidden, b.d_ids,
                                                b.d_router, b.d_out, NULL);
    args.stream = stream;
    args.flags = MOEINT4_FORWARD_ASYNC;
    args.workspace = d_ws;
    args.workspace_bytes = ws_bytes;
    assert_int_equal(g->capture_begin(stream), 0);
    moeint4_status status = moeint4_forward(ctx, w, &args);
    void *graph = NULL;
    int captured = g->capture_end(stream, &graph);
    if (status != MOEINT4_SUCCESS)
        print_error("async forward under capture: %s\n", moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);
    assert_int_equal(captured, 0);

    int mismatches = 0;
    for (int r = 0; r < GRAPH_REPLAYS; r++) {
        random_inputs(&b, num_experts, 2000 + (uint64_t)r * 7919 + (uint64_t)m);
        upload_inputs(ctx, &b);
        tk_poison(got, b.count * 2);
        assert_int_equal(
            moeint4_memory_copy(ctx, b.d_out, got, b.count * 2, MOEINT4_COPY_HOST_TO_DEVICE),
            MOEINT4_SUCCESS);
        replay(ctx, g, graph, stream, &b, got);
        eager(ctx, w, &b, stream, want);
        if (memcmp(got, want, b.count * 2) != 0 && mismatches++ < 3)
            print_error("M = %lld replay %d differs from the eager forward\n", (long long)m, r);
    }
    print_message("M = %lld: %d replays, %d differ from eager synchronous forwards\n", (long long)m,
                  GRAPH_REPLAYS, mismatches);
    assert_int_equal(mismatches, 0);
    assert_int_equal(moeint4_forward_check(ctx, w, stream), MOEINT4_SUCCESS);

    /* A bad id at [0][1] (and a later one), then a NaN router weight at the
     * last token's slot 0: dropped, recorded, named by the check once. */
    const int64_t last = m - 1;
    for (int kind = 0; kind < 2; kind++) {
        random_inputs(&b, num_experts, 3000 + (uint64_t)kind + (uint64_t)m);
        /* the bad slots of this round; the second only when it differs */
        const int64_t bad_slots[2] = { kind == 0 ? 1 : last * topk, last * topk };
        const int bad_count = kind == 0 && m > 1 ? 2 : 1;
        int32_t saved_ids[2];
        for (int i = 0; i < bad_count; i++) {
            saved_ids[i] = b.ids[bad_slots[i]];
            if (kind == 0)
                b.ids[bad_slots[i]] = i == 0 ? num_experts + 5 : -3;
            else
                b.router[bad_slots[i]] = NAN;
        }
        upload_inputs(ctx, &b);
        replay(ctx, g, graph, stream, &b, got);
        /* expected: the same slots with a valid id and router weight 0 */
        for (int i = 0; i < bad_count; i++) {
            b.ids[bad_slots[i]] = saved_ids[i];
            b.router[bad_slots[i]] = 0.0f;
        }
        upload_inputs(ctx, &b);
        eager(ctx, w, &b, stream, want);
        assert_memory_equal(got, want, b.count * 2);
        status = moeint4_forward_check(ctx, w, stream);
        print_message("M = %lld, %s: check: %s: %s\n", (long long)m,
                      kind == 0 ? "bad id" : "NaN weight", moeint4_status_string(status),
                      moeint4_last_error());
        assert_int_equal(status, MOEINT4_INVALID_ARGUMENT);
        char expected[96];
        if (kind == 0)
            snprintf(expected, sizeof expected, "topk_ids[0][1] = %d is outside [0, %d)",
                     num_experts + 5, num_experts);
        else
            snprintf(expected, sizeof expected, "topk_weights[%lld][0] = nan is not finite",
                     (long long)last);
        assert_non_null(strstr(moeint4_last_error(), expected));
        /* read and cleared: the next check is clean */
        assert_int_equal(moeint4_forward_check(ctx, w, stream), MOEINT4_SUCCESS);
    }

    assert_int_equal(g->graph_destroy(graph), 0);
    assert_int_equal(g->stream_destroy(stream), 0);
    moeint4_memory_free(ctx, d_ws);
    moeint4_memory_free(ctx, b.d_hidden);
    moeint4_memory_free(ctx, b.d_ids);
    moeint4_memory_free(ctx, b.d_router);
    moeint4_memory_free(ctx, b.d_out);
    moeint4_memory_free(ctx, b.d_eager_out);
    free(b.hidden);
    free(b.ids);
    free(b.router);
    free(got);
    free(want);
}

/* 64 experts, top-10, group 128, K and N multiples of 128: M = 1 takes the
 * direct GEMVs; on sm_90a builds 8 takes the routed decode GEMVs (d8), 64,
 * 128 and 512 the int4 grouped GEMM's qw32 (10 and 20 rows an expert) and qw64 tiles (BF16
 * weights: w64, w64, w64, w256), elsewhere the routed tiles; 512 (5120
 * slots) also the multi-block routing. */
static void test_graph_replay(void **state)
{
    (void)state;
    graph_calls g = load_graph_calls();
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    const int experts = 64, k = 512, n = 256, topk = 10;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, experts, k, n, 128, 0, 61);
    const int64_t sizes[] = { 1, 8, 64, 128, 512 };
    for (int i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
        graph_case(ctx, &g, w, experts, sizes[i], topk, k);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

int main(void)
{
    if (!hip_test_available())
        return HIP_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_replay),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
