/* The XPU backend through the public ABI on PoCL's CPU device (OpenCL test
 * mode): the zero-point formats and act-order on every path, bad expert ids
 * and non-finite router weights found on the device (output untouched), the
 * asynchronous forward with a caller workspace, expert_map, determinism
 * across runs and chunkings, the oneDNN path against the reference, memory
 * accounting, and an OpenCL "framework" handing in its own context, queue
 * and SVM memory. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>

#include "moeint4.h"
#include "testkit.h"

enum { E = 8, K = 64, N = 32, GROUP = 32, M = 11, TOPK = 2 };

typedef struct device_io {
    void *hidden, *ids, *weights, *output;
    size_t out_bytes;
} device_io;

/* The backend reads its environment when the core creates its context,
 * lazily at the first prepare: callers prepare before changing it again. */
static moeint4_context *xpu_context(const char *chunk_tokens, const char *onednn_min_tokens)
{
    setenv("MOEINT4_XPU_TEST_CPU_DEVICE", "1", 1);
    setenv("MOEINT4_XPU_CHUNK_TOKENS", chunk_tokens, 1);
    setenv("MOEINT4_XPU_ONEDNN_MIN_TOKENS", onednn_min_tokens, 1);
    moeint4_context_options options = { 0 };
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_XPU;
    moeint4_context *ctx = NULL;
    if (moeint4_context_create(&options, &ctx) != MOEINT4_SUCCESS)
        fail_msg("xpu context: %s", moeint4_last_error());
    return ctx;
}

static int ends_with(const char *text, const char *tail)
{
    size_t a = strlen(text), b = strlen(tail);
    if (a < b || strcmp(text + a - b, tail) != 0) {
        print_message("\"%s\" does not end with \"%s\"\n", text, tail);
        return 0;
    }
    return 1;
}

static void *to_device(moeint4_context *ctx, const void *host, size_t bytes)
{
    void *ptr = NULL;
    assert_int_equal(moeint4_memory_alloc(ctx, bytes, &ptr), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_memory_copy(ctx, ptr, host, bytes, MOEINT4_COPY_HOST_TO_DEVICE),
                     MOEINT4_SUCCESS);
    return ptr;
}

static void io_upload(moeint4_context *ctx, device_io *io, moeint4_dtype dtype, const void *hidden,
                      const int32_t *ids, const float *weights)
{
    size_t esize = tk_dtype_size(dtype);
    io->out_bytes = (size_t)M * K * esize;
    uint8_t *poison = malloc(io->out_bytes);
    memset(poison, 0xff, io->out_bytes);
    io->hidden = to_device(ctx, hidden, (size_t)M * K * esize);
    io->ids = to_device(ctx, ids, M * TOPK * sizeof(int32_t));
    io->weights = to_device(ctx, weights, M * TOPK * sizeof(float));
    io->output = to_device(ctx, poison, io->out_bytes);
    free(poison);
}

static void io_free(moeint4_context *ctx, device_io *io)
{
    moeint4_memory_free(ctx, io->hidden);
    moeint4_memory_free(ctx, io->ids);
    moeint4_memory_free(ctx, io->weights);
    moeint4_memory_free(ctx, io->output);
}

static moeint4_forward_args make_args(const device_io *io, moeint4_dtype dtype)
{
    return tk_forward_args(dtype, M, TOPK, io->hidden, io->ids, io->weights, io->output, NULL);
}

/* A small random layer (E=8, K=64, N=32, group 32); rng continues from it. */
static void make_layer(tk_layer *layer, tk_rng *rng, uint64_t seed, moeint4_format format,
                       moeint4_dtype scales_dtype, int expert_map_mode)
{
    tk_rng_seed(rng, seed);
    assert_int_equal(
        tk_layer_random(layer, format, 0, E, K, N, GROUP, scales_dtype, expert_map_mode, rng), 0);
}

/* A symmetric GPTQ layer (f16 scales, no expert_map) and f32 inputs for it. */
static void make_problem(tk_layer *layer, tk_rng *rng, uint64_t seed, float *hidden, int32_t *ids,
                         float *topk_weights)
{
    make_layer(layer, rng, seed, MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_DTYPE_F16, 0);
    tk_fill_activations(rng, MOEINT4_DTYPE_F32, M * K, 1.0, hidden);
    tk_route_random(rng, M, E, TOPK, ids, topk_weights);
}

/* A GPTQ layer (symmetric, or asymmetric with an expert_map) with act-order
 * g_idx: every group still group_size rows, in a shuffled order, g_idx[e][k]
 * = ((7k + e) mod IN) / GROUP. */
static void make_act_order_layer(tk_layer *layer, tk_rng *rng, uint64_t seed, int asym)
{
    tk_rng_seed(rng, seed);
    assert_int_equal(tk_layer_random(layer,
                                     asym ? MOEINT4_FORMAT_GPTQ_ASYM : MOEINT4_FORMAT_GPTQ_SYM, 0,
                                     E, K, N, GROUP, MOEINT4_DTYPE_F16, asym, rng),
                     0);
    assert_int_equal(tk_layer_add_g_idx(layer), 0);
    for (int e = 0; e < layer->w13.num_experts; ++e) { /* the local experts */
        for (int k = 0; k < K; ++k)
            layer->w13.g_idx[e * K + k] = ((7 * k + e) % K) / GROUP;
        for (int n = 0; n < N; ++n)
            layer->w2.g_idx[e * N + n] = ((7 * n + e) % N) / GROUP;
    }
}

static moeint4_weights *prepare(moeint4_context *ctx, const tk_layer *layer)
{
    moeint4_weights_desc desc = tk_layer_desc(layer);
    moeint4_weights *weights = NULL;
    if (moeint4_weights_prepare(ctx, &desc, &weights) != MOEINT4_SUCCESS)
        fail_msg("prepare: %s", moeint4_last_error());
    return weights;
}

static void test_backend_is_listed_available_in_test_mode(void **state)
{
    (void)state;
    setenv("MOEINT4_XPU_TEST_CPU_DEVICE", "1", 1);
    moeint4_backend_info info = { 0 };
    info.struct_size = sizeof info;
    assert_int_equal(moeint4_backend_query(MOEINT4_BACKEND_XPU, &info), MOEINT4_SUCCESS);
    if (!info.compiled || !info.available)
        fail_msg("xpu not available in test mode: %s", info.reason);
    assert_string_equal(info.name, "xpu");
    assert_int_equal(info.device_pointers, 1);
}

static void test_bad_expert_id_found_on_device_output_untouched(void **state)
{
    (void)state;
    moeint4_context *ctx = xpu_context("0", "64");
    tk_rng rng;
    tk_layer layer;
    make_layer(&layer, &rng, 2, MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_DTYPE_F16, 0);
    moeint4_weights *weights = prepare(ctx, &layer);
    float hidden[M * K], topk_weights[M * TOPK];
    int32_t ids[M * TOPK];
    tk_fill_activations(&rng, MOEINT4_DTYPE_F32, M * K, 1.0, hidden);
    tk_route_random(&rng, M, E, TOPK, ids, topk_weights);
    ids[3 * TOPK + 1] = 130;
    ids[7 * TOPK + 0] = -4;
    device_io io;
    io_upload(ctx, &io, MOEINT4_DTYPE_F32, hidden, ids, topk_weights);
    moeint4_forward_args args = make_args(&io, MOEINT4_DTYPE_F32);
    assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_true(ends_with(moeint4_last_error(), "topk_ids[3][1] = 130 is outside [0, 8)"));
    uint8_t *out = malloc(io.out_bytes);
    assert_int_equal(
        moeint4_memory_copy(ctx, out, io.output, io.out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    for (size_t i = 0; i < io.out_bytes; ++i)
        assert_int_equal(out[i], 0xff);
    /* also when the bad id sits in a later chunk than the first */
    moeint4_context *chunked = xpu_context("2", "64");
    moeint4_weights *chunked_weights = prepare(chunked, &layer);
    device_io io2;
    ids[3 * TOPK + 1] = 1;
    io_upload(chunked, &io2, MOEINT4_DTYPE_F32, hidden, ids, topk_weights);
    args = make_args(&io2, MOEINT4_DTYPE_F32);
    assert_int_equal(moeint4_forward(chunked, chunked_weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_true(ends_with(moeint4_last_error(), "topk_ids[7][0] = -4 is outside [0, 8)"));
    assert_int_equal(
        moeint4_memory_copy(chunked, out, io2.output, io2.out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    for (size_t i = 0; i < io2.out_bytes; ++i)
        assert_int_equal(out[i], 0xff);
    free(out);
    io_free(chunked, &io2);
    moeint4_weights_release(chunked_weights);
    moeint4_context_destroy(chunked);
    io_free(ctx, &io);
    moeint4_weights_release(weights);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* A non-finite router weight is INVALID_ARGUMENT naming the first bad slot,
 * whatever the path: one chunk, several chunks (the bad slot in a later
 * one), every expert through oneDNN; the output stays untouched. */
static void test_non_finite_router_weight_output_untouched(void **state)
{
    (void)state;
    const char *configs[][2] = { { "0", "64" }, { "2", "64" }, { "3", "1" } };
    tk_rng rng;
    tk_layer layer;
    float hidden[M * K], topk_weights[M * TOPK];
    int32_t ids[M * TOPK];
    make_problem(&layer, &rng, 3, hidden, ids, topk_weights);
    topk_weights[9 * TOPK + 1] = INFINITY;
    topk_weights[6 * TOPK + 0] = NAN;
    ids[10 * TOPK] = E; /* a bad id after the first bad weight: the weight is reported */
    uint8_t *out = malloc((size_t)M * K * 4);
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; ++c) {
        moeint4_context *ctx = xpu_context(configs[c][0], configs[c][1]);
        moeint4_weights *weights = prepare(ctx, &layer);
        device_io io;
        io_upload(ctx, &io, MOEINT4_DTYPE_F32, hidden, ids, topk_weights);
        moeint4_forward_args args = make_args(&io, MOEINT4_DTYPE_F32);
        assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_INVALID_ARGUMENT);
        const char *message = moeint4_last_error();
        if (!strstr(message, "topk_weights[6][0] = ") || !strstr(message, "nan is not finite"))
            fail_msg("chunks %s, oneDNN from %s: \"%s\"", configs[c][0], configs[c][1], message);
        assert_int_equal(
            moeint4_memory_copy(ctx, out, io.output, io.out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
            MOEINT4_SUCCESS);
        for (size_t i = 0; i < io.out_bytes; ++i)
            assert_int_equal(out[i], 0xff);
        io_free(ctx, &io);
        moeint4_weights_release(weights);
        moeint4_context_destroy(ctx);
    }
    free(out);
    tk_layer_free(&layer);
}

/* MOEINT4_FORWARD_ASYNC on PoCL: the forward only enqueues into the caller's
 * workspace (one chunk, then 3-token chunks); the output equals the
 * synchronous one bit for bit once the queue is done. A bad id or weight
 * then contributes nothing, the other tokens are computed as usual, the
 * forward returns SUCCESS and moeint4_forward_check reports the first bad
 * slot once, with the synchronous message. No workspace, or one too small:
 * INVALID_ARGUMENT. */
static void test_async_forward_with_workspace(void **state)
{
    (void)state;
    const char *chunkings[] = { "0", "3" };
    tk_rng rng;
    tk_layer layer;
    float hidden[M * K], topk_weights[M * TOPK];
    int32_t ids[M * TOPK];
    make_problem(&layer, &rng, 5, hidden, ids, topk_weights);
    size_t row = (size_t)K * 4;
    uint8_t *sync_out = malloc((size_t)M * row), *async_out = malloc((size_t)M * row);
    /* c = 2, 3: an act-order layer, whose workspace holds the gathered inputs too */
    for (int c = 0; c < 4; ++c) {
        if (c == 2) {
            tk_layer_free(&layer);
            make_act_order_layer(&layer, &rng, 6, 1);
        }
        moeint4_context *ctx = xpu_context(chunkings[c % 2], "64");
        moeint4_weights *weights = prepare(ctx, &layer);
        device_io io;
        io_upload(ctx, &io, MOEINT4_DTYPE_F32, hidden, ids, topk_weights);
        moeint4_forward_args args = make_args(&io, MOEINT4_DTYPE_F32);
        if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS)
            fail_msg("sync: %s", moeint4_last_error());
        assert_int_equal(moeint4_memory_copy(ctx, sync_out, io.output, (size_t)M * row,
                                             MOEINT4_COPY_DEVICE_TO_HOST),
                         MOEINT4_SUCCESS);
        size_t bytes = 0;
        assert_int_equal(
            moeint4_forward_workspace_size(weights, M, TOPK, MOEINT4_DTYPE_F32, &bytes),
            MOEINT4_SUCCESS);
        assert_true(bytes > 0);
        void *workspace = NULL;
        assert_int_equal(moeint4_memory_alloc(ctx, bytes + 1, &workspace), MOEINT4_SUCCESS);
        args.flags = MOEINT4_FORWARD_ASYNC;
        assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_INVALID_ARGUMENT);
        assert_non_null(strstr(moeint4_last_error(), "args->workspace is required"));
        args.workspace = (uint8_t *)workspace + 1; /* any alignment */
        args.workspace_bytes = bytes - 1;
        assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_INVALID_ARGUMENT);
        args.workspace_bytes = bytes;
        uint8_t *poison = malloc((size_t)M * row);
        memset(poison, 0xff, (size_t)M * row);
        assert_int_equal(moeint4_memory_copy(ctx, io.output, poison, (size_t)M * row,
                                             MOEINT4_COPY_HOST_TO_DEVICE),
                         MOEINT4_SUCCESS);
        if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS)
            fail_msg("async: %s", moeint4_last_error());
        assert_int_equal(moeint4_forward_check(ctx, weights, NULL), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_copy(ctx, async_out, io.output, (size_t)M * row,
                                             MOEINT4_COPY_DEVICE_TO_HOST),
                         MOEINT4_SUCCESS);
        assert_memory_equal(async_out, sync_out, (size_t)M * row);

        /* token 7's first slot gets a bad id, token 2's second a NaN weight */
        int32_t bad_ids[M * TOPK];
        float bad_weights[M * TOPK];
        memcpy(bad_ids, ids, sizeof bad_ids);
        memcpy(bad_weights, topk_weights, sizeof bad_weights);
        bad_ids[7 * TOPK] = -3;
        bad_weights[2 * TOPK + 1] = NAN;
        assert_int_equal(
            moeint4_memory_copy(ctx, io.ids, bad_ids, sizeof bad_ids, MOEINT4_COPY_HOST_TO_DEVICE),
            MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_copy(ctx, io.weights, bad_weights, sizeof bad_weights,
                                             MOEINT4_COPY_HOST_TO_DEVICE),
                         MOEINT4_SUCCESS);
        assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_SUCCESS); /* sticky */
        assert_int_equal(moeint4_forward_check(ctx, weights, NULL), MOEINT4_INVALID_ARGUMENT);
        assert_true(ends_with(moeint4_last_error(), "topk_weights[2][1] = nan is not finite"));
        assert_int_equal(moeint4_forward_check(ctx, weights, NULL), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_copy(ctx, async_out, io.output, (size_t)M * row,
                                             MOEINT4_COPY_DEVICE_TO_HOST),
                         MOEINT4_SUCCESS);
        for (int m = 0; m < M; ++m)
            if (m != 2 && m != 7)
                assert_memory_equal(async_out + m * row, sync_out + m * row, row);
        free(poison);
        moeint4_memory_free(ctx, workspace);
        io_free(ctx, &io);
        moeint4_weights_release(weights);
        moeint4_context_destroy(ctx);
    }
    free(sync_out);
    free(async_out);
    tk_layer_free(&layer);
}

/* Runs one forward on a fresh context with the given chunking and oneDNN
 * crossover; returns the output bytes (malloc'd). */
static uint8_t *run_once(const char *chunk_tokens, const char *onednn_min_tokens,
                         const tk_layer *layer, moeint4_dtype dtype, const void *hidden,
                         const int32_t *ids, const float *topk_weights, int on_input)
{
    moeint4_context *ctx = xpu_context(chunk_tokens, onednn_min_tokens);
    moeint4_weights *weights = prepare(ctx, layer);
    device_io io;
    io_upload(ctx, &io, dtype, hidden, ids, topk_weights);
    moeint4_forward_args args = make_args(&io, dtype);
    args.apply_router_weight_on_input = on_input;
    if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS)
        fail_msg("forward: %s", moeint4_last_error());
    uint8_t *out = malloc(io.out_bytes);
    assert_int_equal(
        moeint4_memory_copy(ctx, out, io.output, io.out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    io_free(ctx, &io);
    moeint4_weights_release(weights);
    moeint4_context_destroy(ctx);
    return out;
}

static void test_expert_map_determinism_and_onednn(void **state)
{
    (void)state;
    tk_rng rng;
    tk_layer layer;
    make_layer(&layer, &rng, 3, MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_DTYPE_BF16, 1);
    assert_non_null(layer.expert_map);
    float hidden[M * K], topk_weights[M * TOPK];
    int32_t ids[M * TOPK];
    tk_fill_activations(&rng, MOEINT4_DTYPE_F32, M * K, 1.0, hidden);
    tk_route_random(&rng, M, E, TOPK, ids, topk_weights);
    /* token 4: only non-local experts -> zeros */
    int placed = 0;
    for (int e = 0; e < E && placed < TOPK; ++e)
        if (layer.expert_map[e] < 0)
            ids[4 * TOPK + placed++] = e;
    assert_int_equal(placed, TOPK);
    double want[M * K];
    tk_activation act = { MOEINT4_ACTIVATION_SILU, 0, 0, 0, 1 };
    tk_reference_moe(&layer, MOEINT4_DTYPE_F32, hidden, M, TOPK, ids, topk_weights, &act, NULL, M,
                     want);

    moeint4_dtype f32 = MOEINT4_DTYPE_F32;
    uint8_t *first = run_once("0", "0", &layer, f32, hidden, ids, topk_weights, 1);
    uint8_t *second = run_once("0", "0", &layer, f32, hidden, ids, topk_weights, 1);
    uint8_t *third = run_once("3", "0", &layer, f32, hidden, ids, topk_weights, 1);
    uint8_t *dnnl = run_once("0", "1", &layer, f32, hidden, ids, topk_weights, 1);
    size_t bytes = (size_t)M * K * 4;
    assert_memory_equal(first, second, bytes);
    assert_memory_equal(first, third, bytes);
    const float *out = (const float *)first;
    for (int k = 0; k < K; ++k)
        assert_true(out[4 * K + k] == 0.0f);
    /* f32 accumulation over K and N terms: far below 1e-5 (see conformance) */
    double err_kernels = tk_relative_l2(MOEINT4_DTYPE_F32, first, want, (size_t)M * K);
    double err_onednn = tk_relative_l2(MOEINT4_DTYPE_F32, dnnl, want, (size_t)M * K);
    print_message("relative L2: int4 kernels %.3g, oneDNN path %.3g\n", err_kernels, err_onednn);
    assert_true(err_kernels < 1e-5);
    assert_true(err_onednn < 1e-5);
    if (getenv("MOEINT4_XPU_TEST_ANY_GPU")) /* a non-Intel GPU: oneDNN has no engine there */
        assert_memory_equal(first, dnnl, bytes);
    else
        assert_memory_not_equal(first, dnnl, bytes); /* the other path really ran */
    free(first), free(second), free(third), free(dnnl);
    tk_layer_free(&layer);
}

/* A random f32 batch for `layer` (rng continues) and its double reference
 * (SiLU, router weight on the output). */
static void make_batch(const tk_layer *layer, tk_rng *rng, float *hidden, int32_t *ids,
                       float *topk_weights, double *want)
{
    tk_fill_activations(rng, MOEINT4_DTYPE_F32, M * K, 1.0, hidden);
    tk_route_random(rng, M, E, TOPK, ids, topk_weights);
    tk_activation act = { MOEINT4_ACTIVATION_SILU, 0, 0, 0, 0 };
    tk_reference_moe(layer, MOEINT4_DTYPE_F32, hidden, M, TOPK, ids, topk_weights, &act, NULL, M,
                     want);
}

/* The forward (f32, router weight on the output) through the GEMMs (one
 * chunk), one-token chunks (the GEMVs) and the oneDNN path, each within f32
 * sums (relative L2 1e-5) of `want`. */
static void expect_every_path(const tk_layer *layer, const float *hidden, const int32_t *ids,
                              const float *topk_weights, const double *want, const char *label)
{
    const char *paths[3][2] = { { "0", "0" }, { "1", "0" }, { "0", "1" } };
    for (int p = 0; p < 3; ++p) {
        uint8_t *out = run_once(paths[p][0], paths[p][1], layer, MOEINT4_DTYPE_F32, hidden, ids,
                                topk_weights, 0);
        double err = tk_relative_l2(MOEINT4_DTYPE_F32, out, want, (size_t)M * K);
        print_message("%s, path %d: relative L2 %.3g\n", label, p, err);
        assert_true(err < 1e-5);
        free(out);
    }
}

/* GPTQ asymmetric (zero points as stored and AutoGPTQ v1's zero - 1) and
 * AWQ through the zero-point kernels: the GEMMs (11 tokens in one chunk),
 * the one-token GEMVs (chunks of one token; the rows GEMVs by default, the
 * staged ones under the walk and lanes entries, which have no zero-point
 * variant) and the oneDNN path, each against the double reference. */
static void test_zero_point_formats_every_path(void **state)
{
    (void)state;
    struct {
        moeint4_format format;
        int zero_offset;
    } cases[] = { { MOEINT4_FORMAT_GPTQ_ASYM, 0 },
                  { MOEINT4_FORMAT_GPTQ_ASYM, 1 },
                  { MOEINT4_FORMAT_AWQ, 0 } };
    for (int c = 0; c < 3; ++c) {
        tk_rng rng;
        tk_layer layer;
        tk_rng_seed(&rng, 40 + (uint64_t)c);
        assert_int_equal(tk_layer_random(&layer, cases[c].format, cases[c].zero_offset, E, K, N,
                                         GROUP, c == 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16,
                                         c == 1, &rng),
                         0);
        float hidden[M * K], topk_weights[M * TOPK];
        int32_t ids[M * TOPK];
        double want[M * K];
        make_batch(&layer, &rng, hidden, ids, topk_weights, want);
        char label[64];
        snprintf(label, sizeof label, "format %d zero_offset %d", (int)cases[c].format,
                 cases[c].zero_offset);
        expect_every_path(&layer, hidden, ids, topk_weights, want, label);
        tk_layer_free(&layer);
    }
}

/* Act-order layers (make_act_order_layer), GPTQ symmetric and asymmetric:
 * the XPU backend sorts the weights at prepare and gathers x on the device;
 * on the GEMMs, one-token chunks and the oneDNN path its output matches the
 * double reference (each column's group from g_idx) within f32 sums, and so
 * does the CPU backend's, which sorts likewise. */
static void test_act_order_every_path(void **state)
{
    (void)state;
    for (int asym = 0; asym < 2; ++asym) {
        tk_rng rng;
        tk_layer layer;
        make_act_order_layer(&layer, &rng, 60 + (uint64_t)asym, asym);
        float hidden[M * K], topk_weights[M * TOPK], want[M * K];
        int32_t ids[M * TOPK];
        double reference[M * K];
        make_batch(&layer, &rng, hidden, ids, topk_weights, reference);
        moeint4_context_options o = { .struct_size = sizeof o, .backend = MOEINT4_BACKEND_CPU };
        moeint4_context *cpu;
        assert_int_equal(moeint4_context_create(&o, &cpu), MOEINT4_SUCCESS);
        moeint4_weights *weights = prepare(cpu, &layer);
        moeint4_forward_args args =
            tk_forward_args(MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, topk_weights, want, NULL);
        assert_int_equal(moeint4_forward(cpu, weights, &args), MOEINT4_SUCCESS);
        moeint4_weights_release(weights);
        moeint4_context_destroy(cpu);
        double cpu_err = tk_relative_l2(MOEINT4_DTYPE_F32, want, reference, (size_t)M * K);
        print_message("act-order %s, the CPU backend: relative L2 %.3g\n", asym ? "asym" : "sym",
                      cpu_err);
        assert_true(cpu_err < 1e-5);
        expect_every_path(&layer, hidden, ids, topk_weights, reference,
                          asym ? "act-order asym" : "act-order sym");
        tk_layer_free(&layer);
    }
}

static void test_memory_accounting(void **state)
{
    (void)state;
    moeint4_context *ctx = xpu_context("0", "64");
    tk_rng rng;
    tk_layer layer;
    make_layer(&layer, &rng, 4, MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_DTYPE_F16, 0);
    moeint4_weights *weights = prepare(ctx, &layer);
    size_t host = 0, device = 0;
    assert_int_equal(moeint4_weights_memory(weights, &host, &device), MOEINT4_SUCCESS);
    size_t w13 = (size_t)E * 2 * N * (K / 2) + (size_t)E * 2 * N * (K / GROUP) * 2;
    size_t w2 = (size_t)E * K * (N / 2) + (size_t)E * K * (N / GROUP) * 2;
    assert_int_equal(device,
                     w13 + w2 + E * sizeof(int32_t) + 6 * sizeof(int32_t)); /* + error records */
    moeint4_backend backend = MOEINT4_BACKEND_AUTO;
    assert_int_equal(moeint4_weights_backend(weights, &backend), MOEINT4_SUCCESS);
    assert_int_equal(backend, MOEINT4_BACKEND_XPU);
    moeint4_weights_release(weights);
    tk_layer_free(&layer);
    /* AWQ: one byte of zero point per scale more */
    make_layer(&layer, &rng, 5, MOEINT4_FORMAT_AWQ, MOEINT4_DTYPE_F16, 0);
    weights = prepare(ctx, &layer);
    size_t zeros = (size_t)E * 2 * N * (K / GROUP) + (size_t)E * K * (N / GROUP);
    assert_int_equal(moeint4_weights_memory(weights, &host, &device), MOEINT4_SUCCESS);
    assert_int_equal(device, w13 + w2 + zeros + E * sizeof(int32_t) + 6 * sizeof(int32_t));
    moeint4_weights_release(weights);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* PoCL's CPU device, as a framework would have found it; with
 * MOEINT4_XPU_TEST_ANY_GPU=1 (a non-Intel GPU, e.g. the H200) the first GPU. */
static cl_device_id framework_device(void)
{
    cl_platform_id platforms[8];
    cl_uint count = 0;
    cl_device_type type =
        getenv("MOEINT4_XPU_TEST_ANY_GPU") ? CL_DEVICE_TYPE_GPU : CL_DEVICE_TYPE_CPU;
    assert_int_equal(clGetPlatformIDs(8, platforms, &count), CL_SUCCESS);
    for (cl_uint p = 0; p < count; ++p) {
        cl_device_id device;
        cl_uint devices = 0;
        if (clGetDeviceIDs(platforms[p], type, 1, &device, &devices) == CL_SUCCESS && devices > 0)
            return device;
    }
    fail_msg("no OpenCL %s device", type == CL_DEVICE_TYPE_GPU ? "GPU" : "CPU (PoCL)");
    return NULL;
}

static void *svm_copy_in(cl_context context, cl_command_queue queue, const void *host, size_t bytes,
                         size_t offset)
{
    uint8_t *block = clSVMAlloc(context, CL_MEM_READ_WRITE, bytes + offset, 0);
    assert_non_null(block);
    assert_int_equal(clEnqueueSVMMemcpy(queue, CL_TRUE, block + offset, host, bytes, 0, NULL, NULL),
                     CL_SUCCESS);
    return block;
}

static void test_native_opencl_handles_and_svm_used_in_place(void **state)
{
    (void)state;
    tk_rng rng;
    tk_layer layer;
    make_layer(&layer, &rng, 5, MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_DTYPE_F16, 0);
    uint16_t hidden[M * K];
    float topk_weights[M * TOPK];
    int32_t ids[M * TOPK];
    tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, M * K, 1.0, hidden);
    tk_route_random(&rng, M, E, TOPK, ids, topk_weights);
    uint8_t *expected =
        run_once("0", "0", &layer, MOEINT4_DTYPE_BF16, hidden, ids, topk_weights, 0);

    cl_int rc;
    cl_device_id device = framework_device();
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
    assert_int_equal(rc, CL_SUCCESS);
    cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, NULL, &rc);
    cl_command_queue stream = clCreateCommandQueueWithProperties(context, device, NULL, &rc);
    assert_int_equal(rc, CL_SUCCESS);
    setenv("MOEINT4_XPU_RUNTIME", "opencl", 1);
    moeint4_context *ctx = xpu_context("0", "0");
    moeint4_context_destroy(ctx); /* the plain one; now with the framework's handles */
    moeint4_context_options options = { 0 };
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_XPU;
    options.native_context = context;
    options.native_device = device;
    options.native_queue = queue;
    assert_int_equal(moeint4_context_create(&options, &ctx), MOEINT4_SUCCESS);
    moeint4_weights *weights = prepare(ctx, &layer);
    unsetenv("MOEINT4_XPU_RUNTIME");

    /* the framework's own SVM allocations, tensors at offsets inside them */
    size_t out_bytes = (size_t)M * K * 2;
    uint8_t *poison = malloc(out_bytes);
    memset(poison, 0xff, out_bytes);
    uint8_t *hidden_block = svm_copy_in(context, queue, hidden, sizeof hidden, 256);
    void *ids_block = svm_copy_in(context, queue, ids, sizeof ids, 0);
    uint8_t *weights_block = svm_copy_in(context, queue, topk_weights, sizeof topk_weights, 64);
    uint8_t *out_block = svm_copy_in(context, queue, poison, out_bytes, 128);
    moeint4_forward_args args = { 0 };
    args.struct_size = sizeof args;
    args.dtype = MOEINT4_DTYPE_BF16;
    args.num_tokens = M;
    args.topk = TOPK;
    args.hidden_states = hidden_block + 256;
    args.topk_ids = ids_block;
    args.topk_weights = (const float *)(weights_block + 64);
    args.output = out_block + 128;
    args.stream = stream;
    if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS)
        fail_msg("forward on the framework's queue: %s", moeint4_last_error());
    uint8_t *got = malloc(out_bytes);
    assert_int_equal(
        clEnqueueSVMMemcpy(stream, CL_TRUE, got, out_block + 128, out_bytes, 0, NULL, NULL),
        CL_SUCCESS);
    assert_memory_equal(got, expected, out_bytes);

    /* a queue of another context is refused, output untouched */
    cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
    cl_command_queue foreign = clCreateCommandQueueWithProperties(other, device, NULL, &rc);
    assert_int_equal(rc, CL_SUCCESS);
    args.stream = foreign;
    assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_true(ends_with(moeint4_last_error(),
                          "stream is not a cl_command_queue of the backend's OpenCL context"));

    /* an out-of-order queue would let the kernels overtake each other */
    cl_queue_properties out_of_order[] = { CL_QUEUE_PROPERTIES,
                                           CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0 };
    cl_command_queue unordered =
        clCreateCommandQueueWithProperties(context, device, out_of_order, &rc);
    assert_int_equal(rc, CL_SUCCESS);
    args.stream = unordered;
    assert_int_equal(moeint4_forward(ctx, weights, &args), MOEINT4_INVALID_ARGUMENT);
    assert_true(ends_with(moeint4_last_error(), "stream must be an in-order cl_command_queue"));
    clReleaseCommandQueue(unordered);

    moeint4_weights_release(weights);
    moeint4_context_destroy(ctx);
    clReleaseCommandQueue(foreign);
    clReleaseContext(other);
    clSVMFree(context, hidden_block);
    clSVMFree(context, ids_block);
    clSVMFree(context, weights_block);
    clSVMFree(context, out_block);
    clReleaseCommandQueue(stream);
    clReleaseCommandQueue(queue);
    clReleaseContext(context);
    free(poison), free(got), free(expected);
    tk_layer_free(&layer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_is_listed_available_in_test_mode),
        cmocka_unit_test(test_bad_expert_id_found_on_device_output_untouched),
        cmocka_unit_test(test_non_finite_router_weight_output_untouched),
        cmocka_unit_test(test_async_forward_with_workspace),
        cmocka_unit_test(test_expert_map_determinism_and_onednn),
        cmocka_unit_test(test_zero_point_formats_every_path),
        cmocka_unit_test(test_act_order_every_path),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_native_opencl_handles_and_svm_used_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
