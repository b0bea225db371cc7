/* The HIP backend's forward through the public ABI against the test kit's
 * double reference: both GEMM variants (matrix cores, plain FMA) on every
 * row-tile configuration, all dtypes and activations, the router weight on
 * either side, expert parallelism, bad ids and non-finite router weights
 * (device record -> INVALID_ARGUMENT, output untouched), bit-for-bit
 * determinism, unaligned inputs, M = 0, the caller workspace.
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

static hip_test_case default_case(moeint4_dtype dtype, int64_t m, int topk, uint64_t seed)
{
    hip_test_case c;
    memset(&c, 0, sizeof c);
    c.dtype = dtype;
    c.num_tokens = m;
    c.topk = topk;
    c.activation = MOEINT4_ACTIVATION_SILU;
    c.seed = seed;
    return c;
}

/* Partial tiles everywhere: K = 200 (not a multiple of BK), N = 72. */
static void test_variants_and_tiles(void **state)
{
    (void)state;
    const char *variants[] = { "mma", "fma" };
    const char *tiles[] = { "16",   "16n",  "64",     "128",  "128d", "256",   "8v",
                            "w128", "w256", "direct", "w64",  "q8",   "q16",   "q32",
                            "q64",  "q128", "d8",     "q256", "qw64", "qw128", "qw32" };
    for (int v = 0; v < 2; v++) {
        moeint4_context *ctx = hip_test_context(variants[v]);
        tk_layer layer;
        moeint4_weights *w =
            hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_ASYM, 8, 200, 72, -1, 0, 11);
        for (int t = 0; t < (int)(sizeof tiles / sizeof tiles[0]); t++) {
            setenv("MOEINT4_HIP_TILE", tiles[t], 1);
            print_message("gemm %s, tile %s\n", variants[v], tiles[t]);
            hip_test_case c = default_case(MOEINT4_DTYPE_BF16, 203, 3, 100 + (uint64_t)t);
            double e = hip_test_error(ctx, w, &layer, &c);
            assert_true(e <= HIP_TOLERANCE);
        }
        unsetenv("MOEINT4_HIP_TILE");
        moeint4_weights_release(w);
        tk_layer_free(&layer);
        moeint4_context_destroy(ctx);
    }
    setenv("MOEINT4_HIP_GEMM", "mma", 1);
}

/* A test extra of the HIP plugin (fails the test when it is missing). */
static void *hip_extra(const char *name)
{
    void *fn = moeint4_backend_get_proc_address(MOEINT4_BACKEND_HIP, name);
    assert_non_null(fn);
    return fn;
}

/* 1 when the plugin has the sm_90a wgmma tiles (a test extra). */
static int wgmma_built(void)
{
    void *fn = hip_extra("hip_test_wgmma_built");
    int (*built)(void);
    memcpy(&built, &fn, sizeof fn);
    return built();
}

/* 1 when the routed decode GEMVs (tile "d8") of a layer of these sizes
 * fit the device (a test extra); 0 on builds without them. */
static int routed_fits(int hidden, int intermediate)
{
    void *fn = hip_extra("hip_test_int4_routed_fits");
    int (*fits)(int, int);
    memcpy(&fits, &fn, sizeof fn);
    return fits(hidden, intermediate);
}

/* The routed decode GEMVs (tile "d8": 8 token rows of one expert an MMA)
 * with the token rows staged in shared memory and riding in the ring
 * (MOEINT4_HIP_ROUTED_X): one row per expert, partial tiles, several tiles
 * per expert; zero points and an expert map, per-channel scales with an
 * intermediate (200) that ends inside a chunk, AWQ; every activation, the
 * router weight on either side, F32 and F16 input. On an sm_90a build the
 * kernels must fit these layers (so the forced tile is the one that ran);
 * elsewhere the forced name takes the 8-row GEMV, checked the same way. */
static void test_int4_routed_decode(void **state)
{
    (void)state;
    const struct {
        moeint4_format format;
        int experts, hidden, intermediate, group, map;
    } layers[] = {
        { MOEINT4_FORMAT_GPTQ_ASYM, 12, 512, 384, 128, 1 },
        { MOEINT4_FORMAT_GPTQ_SYM, 8, 256, 200, -1, 0 },
        { MOEINT4_FORMAT_AWQ, 6, 384, 256, 128, 0 },
    };
    const char *x_modes[] = { "staged", "ring" };
    const moeint4_activation acts[] = { MOEINT4_ACTIVATION_SILU, MOEINT4_ACTIVATION_GELU,
                                        MOEINT4_ACTIVATION_SWIGLU_CLAMP };
    const int64_t sizes[] = { 2, 19, 203 };
    moeint4_context *ctx = hip_test_context("mma");
    setenv("MOEINT4_HIP_TILE", "d8", 1);
    uint64_t seed = 900;
    for (int l = 0; l < 3; l++) {
        if (wgmma_built())
            assert_true(routed_fits(layers[l].hidden, layers[l].intermediate));
        tk_layer layer;
        moeint4_weights *w = hip_test_prepare(ctx, &layer, layers[l].format, layers[l].experts,
                                              layers[l].hidden, layers[l].intermediate,
                                              layers[l].group, layers[l].map, 80 + (uint64_t)l);
        for (int x = 0; x < 2; x++)
            for (int i = 0; i < 3; i++) {
                setenv("MOEINT4_HIP_ROUTED_X", x_modes[x], 1);
                const moeint4_dtype dtype = i == 0   ? MOEINT4_DTYPE_F32
                                            : i == 1 ? MOEINT4_DTYPE_F16
                                                     : MOEINT4_DTYPE_BF16;
                hip_test_case c = default_case(dtype, sizes[i], 3, seed++);
                c.activation = acts[(l + i) % 3];
                c.limit = 1.5f;
                c.alpha = 1.702f;
                c.beta = 1.0f;
                c.on_input = (x + i) % 2;
                print_message("layer %d, x %s, M = %lld\n", l, x_modes[x], (long long)sizes[i]);
                double e = hip_test_error(ctx, w, &layer, &c);
                assert_true(e <= HIP_TOLERANCE);
            }
        moeint4_weights_release(w);
        tk_layer_free(&layer);
    }
    unsetenv("MOEINT4_HIP_ROUTED_X");
    unsetenv("MOEINT4_HIP_TILE");
    moeint4_context_destroy(ctx);
}

/* The int4 grouped GEMM's tiles (q8 .. q128; the warp-specialized q256,
 * qw64, qw128 and qw32's gemm2: int4 weights with group 128 or
 * per-channel, K and N multiples of 128;
 * elsewhere the forced name falls back to the default tile) on every batch
 * shape: one row per expert, partial tiles, several tiles per expert (and
 * for the wide tiles, 150 and 300 rows an expert: q256's tiles of 64, 128,
 * 192 and 256 valid rows, the qw tiles' wgmmas of 16 .. 128 rows; the
 * warp-specialized ones also on a grid capped at 2 persistent blocks, so
 * that each block runs many tiles through its stage ring and both tile
 * tables); zero points, an expert map, the router weight on either side,
 * F32 input (converted). That the forced tile is the one
 * taken shows in the workspace bound: a forced expansion tile's (w256, on
 * sm_90a) holds the weights' BF16 copy, a forced q tile's does not. */
/* The workspace bound of w for `tokens` tokens, top 3, bf16. */
static size_t workspace_of(moeint4_weights *w, int64_t tokens)
{
    size_t bytes = 0;
    assert_int_equal(moeint4_forward_workspace_size(w, tokens, 3, MOEINT4_DTYPE_BF16, &bytes),
                     MOEINT4_SUCCESS);
    return bytes;
}

static void test_int4_grouped_gemm_tiles(void **state)
{
    (void)state;
    const char *tiles[] = { "q8", "q16", "q32", "q64", "q128", "q256", "qw32", "qw64", "qw128" };
    const moeint4_format formats[] = { MOEINT4_FORMAT_GPTQ_ASYM, MOEINT4_FORMAT_GPTQ_SYM };
    const int groups[] = { 128, -1 };
    const int64_t sizes[] = { 3, 40, 203, 600, 1200 };
    moeint4_context *ctx = hip_test_context("mma");
    uint64_t seed = 500;
    for (int f = 0; f < 2; f++) {
        tk_layer layer;
        moeint4_weights *w =
            hip_test_prepare(ctx, &layer, formats[f], 12, 256, 384, groups[f], f, 41 + (uint64_t)f);
        /* with int4 weights on sm_90a the expansion's BF16 copy shows in the bound */
        const int expansion_shows = wgmma_built() && !hip_test_weights_env_is("bf16");
        setenv("MOEINT4_HIP_TILE", "w256", 1);
        const size_t expand_bytes = workspace_of(w, 4096);
        for (int t = 0; t < (int)(sizeof tiles / sizeof tiles[0]); t++) {
            setenv("MOEINT4_HIP_TILE", tiles[t], 1);
            const size_t forced_bytes = workspace_of(w, 4096);
            if (expansion_shows)
                assert_true(forced_bytes < expand_bytes);
            /* the warp-specialized tiles (q256 and the qw tiles) also on a grid
             * of 2 persistent blocks: many tiles a block */
            const int persistent = strncmp(tiles[t], "qw", 2) == 0 || strcmp(tiles[t], "q256") == 0;
            const int wide = persistent || strcmp(tiles[t], "q128") == 0;
            for (int capped = 0; capped < (persistent ? 2 : 1); capped++) {
                if (capped)
                    setenv("MOEINT4_HIP_Q256_BLOCKS", "2", 1);
                for (int i = 0; i < (wide ? 5 : 3); i++) {
                    hip_test_case c = default_case(i == 1 ? MOEINT4_DTYPE_F32 : MOEINT4_DTYPE_BF16,
                                                   sizes[i], 3, seed++);
                    c.on_input = i == 2 || i == 4;
                    print_message("format %d, tile %s, M = %lld%s\n", (int)formats[f], tiles[t],
                                  (long long)sizes[i], capped ? ", 2 blocks" : "");
                    double e = hip_test_error(ctx, w, &layer, &c);
                    assert_true(e <= HIP_TOLERANCE);
                }
            }
            unsetenv("MOEINT4_HIP_Q256_BLOCKS");
        }
        /* the default: the warp-specialized tiles from 41 to 511 rows an
         * expert (1200 tokens: 300, q256), no expansion in the bound; from
         * 512 rows (4096 tokens: 1024) the expansion */
        setenv("MOEINT4_HIP_TILE", "w256", 1);
        const size_t expand_1200 = workspace_of(w, 1200);
        unsetenv("MOEINT4_HIP_TILE");
        const size_t default_1200 = workspace_of(w, 1200), default_4096 = workspace_of(w, 4096);
        if (expansion_shows)
            assert_true(default_1200 < expand_1200);
        /* MOEINT4_HIP_INT4_PREFILL=q256 (read at prepare): q256 from 512 rows
         * an expert too, and no expansion in the workspace bound */
        setenv("MOEINT4_HIP_INT4_PREFILL", "q256", 1);
        tk_layer same;
        moeint4_weights *direct =
            hip_test_prepare(ctx, &same, formats[f], 12, 256, 384, groups[f], f, 41 + (uint64_t)f);
        unsetenv("MOEINT4_HIP_INT4_PREFILL");
        const size_t direct_bytes = workspace_of(direct, 4096);
        if (expansion_shows)
            assert_true(direct_bytes < expand_bytes && direct_bytes < default_4096);
        hip_test_case c = default_case(MOEINT4_DTYPE_BF16, 1200, 3, seed++);
        assert_true(hip_test_error(ctx, direct, &same, &c) <= HIP_TOLERANCE);
        moeint4_weights_release(direct);
        tk_layer_free(&same);
        moeint4_weights_release(w);
        tk_layer_free(&layer);
    }
    moeint4_context_destroy(ctx);
}

/* The warp-specialized exact tiles on rows of 8 and 16 scale groups
 * (inputs 1024 and 2048, group 128): qw32 then takes its scales (and zero
 * points) from a ring its producer fills, 8 chunks a copy
 * (qw_stages_scales); qw64 and qw128 load them themselves. On a grid of 2
 * persistent blocks too, so the scale ring turns over within and across
 * many tiles. */
static void test_ws_staged_scales(void **state)
{
    (void)state;
    const char *tiles[] = { "qw32", "qw64", "qw128" };
    const moeint4_format formats[] = { MOEINT4_FORMAT_GPTQ_ASYM, MOEINT4_FORMAT_GPTQ_SYM };
    const int64_t sizes[] = { 3, 40, 203 };
    moeint4_context *ctx = hip_test_context("mma");
    uint64_t seed = 900;
    for (int f = 0; f < 2; f++) {
        tk_layer layer;
        moeint4_weights *w =
            hip_test_prepare(ctx, &layer, formats[f], 4, 2048, 1024, 128, f, 61 + (uint64_t)f);
        for (int t = 0; t < (int)(sizeof tiles / sizeof tiles[0]); t++) {
            setenv("MOEINT4_HIP_TILE", tiles[t], 1);
            for (int capped = 0; capped < 2; capped++) {
                if (capped)
                    setenv("MOEINT4_HIP_Q256_BLOCKS", "2", 1);
                for (int i = 0; i < 3; i++) {
                    hip_test_case c = default_case(MOEINT4_DTYPE_BF16, sizes[i], 3, seed++);
                    c.on_input = i == 1;
                    print_message("format %d, tile %s, inputs 2048 / 1024, M = %lld%s\n",
                                  (int)formats[f], tiles[t], (long long)sizes[i],
                                  capped ? ", 2 blocks" : "");
                    assert_true(hip_test_error(ctx, w, &layer, &c) <= HIP_TOLERANCE);
                }
            }
            unsetenv("MOEINT4_HIP_Q256_BLOCKS");
        }
        unsetenv("MOEINT4_HIP_TILE");
        moeint4_weights_release(w);
        tk_layer_free(&layer);
    }
    moeint4_context_destroy(ctx);
}

/* The GEMM tiles that read BF16 (the grouped tiles 16 .. 256 and, on
 * sm_90a, the wgmma tiles w64 .. w256) over int4 weights dequantized into
 * their shared weight tiles (MOEINT4_HIP_INT4_PREFILL=dequant, read at
 * prepare) against the same tiles over the expansion to BF16: the same
 * BF16 weight bits in the same MMA order, so the outputs match bit for bit
 * (and the expansion's are checked against the double reference here and
 * elsewhere). Zero points or not, group 128 / 32 / per-channel, K and N
 * not multiples of 64, an expert map, partial tiles, the router weight on
 * either side, f32 input; the FMA variant on one layer. With int4 weights
 * the dequantizing ones need no expansion workspace: the path ran. */
static void test_int4_tile_dequant(void **state)
{
    (void)state;
    const char *tiles[] = { "16", "16n", "64", "128", "128d", "256", "w64", "w128", "w256" };
    const struct {
        moeint4_format format;
        int hidden, intermediate, group, map;
        const char *gemm;
    } layers[] = { { MOEINT4_FORMAT_GPTQ_ASYM, 256, 384, 128, 0, "mma" },
                   { MOEINT4_FORMAT_GPTQ_SYM, 200, 136, -1, 1, "mma" },
                   { MOEINT4_FORMAT_AWQ, 320, 192, 32, 0, "mma" },
                   { MOEINT4_FORMAT_AWQ, 320, 192, 32, 0, "fma" } };
    const int int4 = !hip_test_weights_env_is("bf16");
    uint64_t seed = 700;
    for (int l = 0; l < 4; l++) {
        moeint4_context *ctx = hip_test_context(layers[l].gemm);
        tk_layer layer, same;
        unsetenv("MOEINT4_HIP_INT4_PREFILL");
        moeint4_weights *expanded =
            hip_test_prepare(ctx, &layer, layers[l].format, 8, layers[l].hidden,
                             layers[l].intermediate, layers[l].group, layers[l].map, 70 + l);
        setenv("MOEINT4_HIP_INT4_PREFILL", "dequant", 1);
        moeint4_weights *dequant =
            hip_test_prepare(ctx, &same, layers[l].format, 8, layers[l].hidden,
                             layers[l].intermediate, layers[l].group, layers[l].map, 70 + l);
        unsetenv("MOEINT4_HIP_INT4_PREFILL");
        size_t bytes_expanded = 0, bytes_dequant = 0;
        setenv("MOEINT4_HIP_TILE", "w256", 1); /* a tile that reads BF16 (the default may not) */
        assert_int_equal(
            moeint4_forward_workspace_size(expanded, 512, 4, MOEINT4_DTYPE_BF16, &bytes_expanded),
            MOEINT4_SUCCESS);
        assert_int_equal(
            moeint4_forward_workspace_size(dequant, 512, 4, MOEINT4_DTYPE_BF16, &bytes_dequant),
            MOEINT4_SUCCESS);
        unsetenv("MOEINT4_HIP_TILE");
        print_message("layer %d (%s): workspace %zu (expansion) / %zu (dequantizing tiles)\n", l,
                      layers[l].gemm, bytes_expanded, bytes_dequant);
        if (int4)
            assert_true(bytes_dequant < bytes_expanded);
        else
            assert_true(bytes_dequant == bytes_expanded);
        const int64_t sizes[] = { 7, 64, 203 };
        size_t out_bytes = (size_t)203 * (size_t)layers[l].hidden * sizeof(float);
        void *got_expanded = malloc(out_bytes), *got_dequant = malloc(out_bytes);
        assert_non_null(got_expanded);
        assert_non_null(got_dequant);
        for (int t = 0; t < (int)(sizeof tiles / sizeof tiles[0]); t++) {
            setenv("MOEINT4_HIP_TILE", tiles[t], 1);
            for (int i = 0; i < 3; i++) {
                hip_test_case c = default_case(i == 1 ? MOEINT4_DTYPE_F32 : MOEINT4_DTYPE_BF16,
                                               sizes[i], 4, seed++);
                c.on_input = i == 2;
                print_message("layer %d (%s), tile %s, M = %lld\n", l, layers[l].gemm, tiles[t],
                              (long long)sizes[i]);
                double *want =
                    i == 0 ? malloc((size_t)sizes[i] * layers[l].hidden * sizeof(double)) : NULL;
                assert_int_equal(hip_test_forward(ctx, expanded, &layer, &c, got_expanded, want),
                                 MOEINT4_SUCCESS);
                assert_int_equal(hip_test_forward(ctx, dequant, &same, &c, got_dequant, NULL),
                                 MOEINT4_SUCCESS);
                const size_t used = (size_t)sizes[i] * (size_t)layers[l].hidden *
                                    (c.dtype == MOEINT4_DTYPE_F32 ? 4 : 2);
                assert_memory_equal(got_expanded, got_dequant, used);
                if (want) {
                    double e = tk_relative_l2(c.dtype, got_dequant, want,
                                              (size_t)sizes[i] * layers[l].hidden);
                    assert_true(e <= HIP_TOLERANCE);
                    free(want);
                }
            }
        }
        unsetenv("MOEINT4_HIP_TILE");
        free(got_expanded);
        free(got_dequant);
        moeint4_weights_release(expanded);
        moeint4_weights_release(dequant);
        tk_layer_free(&layer);
        tk_layer_free(&same);
        moeint4_context_destroy(ctx);
    }
}

/* The int4 decode kernels (tile "direct" on int4 weights with group 128)
 * at every ring depth (MOEINT4_HIP_DECODE_RING) and with one, three or the
 * chosen number of blocks per slot / token (MOEINT4_HIP_DECODE_BLOCKS: one
 * block walks every output block, its ring running across them), gemm2's
 * token rows in the ring or staged (MOEINT4_HIP_DECODE_X), gemm13's items
 * of two or four output blocks (MOEINT4_HIP_DECODE_ITEM); zero points, an
 * expert map, steps with no chunk (3 chunks over 2 warps; 10 slots over 8
 * warps), the router weight on either side; then a per-channel layer whose
 * intermediate (200) ends inside a chunk (the ring's inputs past it: zeros). */
static void test_decode_rings_and_grids(void **state)
{
    (void)state;
    const char *rings[] = { "4", "6", "8" };
    const char *blocks[] = { "1", "3", "auto" };
    const char *x_modes[] = { "ring", "staged" };
    const char *items[] = { "2", "4" };
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_ASYM, 12, 512, 384, 128, 1, 61);
    setenv("MOEINT4_HIP_TILE", "direct", 1);
    uint64_t seed = 600;
    for (int x = 0; x < 2; x++)
        for (int r = 0; r < 3; r++)
            for (int b = 0; b < 3; b++)
                for (int i = 0; i < 6; i++) {
                    setenv("MOEINT4_HIP_DECODE_X", x_modes[x], 1);
                    setenv("MOEINT4_HIP_DECODE_RING", rings[r], 1);
                    setenv("MOEINT4_HIP_DECODE_BLOCKS", blocks[b], 1);
                    setenv("MOEINT4_HIP_DECODE_ITEM", items[i / 3], 1);
                    hip_test_case c = default_case(MOEINT4_DTYPE_BF16, i % 3 == 0 ? 1 : 6,
                                                   i % 3 == 2 ? 10 : 4, seed++);
                    c.on_input = i % 3 == 1;
                    print_message("x %s, ring %s, blocks %s, item %s, M = %lld, top-k %d\n",
                                  x_modes[x], rings[r], blocks[b], items[i / 3],
                                  (long long)c.num_tokens, c.topk);
                    double e = hip_test_error(ctx, w, &layer, &c);
                    assert_true(e <= HIP_TOLERANCE);
                }
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    unsetenv("MOEINT4_HIP_DECODE_BLOCKS");

    w = hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 8, 256, 200, -1, 0, 62);
    for (int x = 0; x < 2; x++)
        for (int r = 0; r < 3; r += 2)
            for (int i = 0; i < 6; i++) {
                setenv("MOEINT4_HIP_DECODE_X", x_modes[x], 1);
                setenv("MOEINT4_HIP_DECODE_RING", rings[r], 1);
                setenv("MOEINT4_HIP_DECODE_ITEM", items[i / 3], 1);
                hip_test_case c = default_case(MOEINT4_DTYPE_BF16, i % 3 == 0 ? 1 : 3,
                                               i % 3 == 2 ? 3 : 2, seed++);
                print_message("intermediate 200: x %s, ring %s, item %s, M = %lld, top-k %d\n",
                              x_modes[x], rings[r], items[i / 3], (long long)c.num_tokens, c.topk);
                double e = hip_test_error(ctx, w, &layer, &c);
                assert_true(e <= HIP_TOLERANCE);
            }
    unsetenv("MOEINT4_HIP_DECODE_X");
    unsetenv("MOEINT4_HIP_DECODE_RING");
    unsetenv("MOEINT4_HIP_DECODE_ITEM");
    unsetenv("MOEINT4_HIP_TILE");
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

static void test_dtypes_and_activations(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w = hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_AWQ, 16, 256, 128, 64, 0, 21);
    const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
    const moeint4_activation acts[] = { MOEINT4_ACTIVATION_SILU, MOEINT4_ACTIVATION_GELU,
                                        MOEINT4_ACTIVATION_SWIGLU_CLAMP };
    uint64_t seed = 200;
    for (int d = 0; d < 3; d++)
        for (int a = 0; a < 3; a++)
            for (int on_input = 0; on_input < 2; on_input++) {
                hip_test_case c = default_case(dtypes[d], 9, 4, seed++);
                c.activation = acts[a];
                c.limit = 1.5f; /* small enough that the clamp is hit */
                c.alpha = 1.702f;
                c.beta = 1.0f;
                c.on_input = on_input;
                double e = hip_test_error(ctx, w, &layer, &c);
                assert_true(e <= HIP_TOLERANCE);
            }
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

static void test_expert_parallel(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 32, 256, 128, 128, 1, 31);
    assert_true(layer.num_local_experts < layer.num_experts);
    int64_t sizes[] = { 1, 7, 150 };
    for (int forced = 0; forced < 2; forced++) {
        if (forced) /* the direct decode GEMVs (auto: only at M = 1) at every size */
            setenv("MOEINT4_HIP_TILE", "direct", 1);
        for (int i = 0; i < 3; i++) {
            hip_test_case c = default_case(MOEINT4_DTYPE_BF16, sizes[i], 4, 300 + (uint64_t)i);
            double e = hip_test_error(ctx, w, &layer, &c);
            assert_true(e <= HIP_TOLERANCE);
        }
    }
    unsetenv("MOEINT4_HIP_TILE");
    /* Memory report: the local experts' weights (bf16, or int4 codes with
     * one 16-bit scale per 128 weights) plus the map. */
    size_t host_bytes = 0, device_bytes = 0;
    assert_int_equal(moeint4_weights_memory(w, &host_bytes, &device_bytes), MOEINT4_SUCCESS);
    size_t weights = (size_t)layer.num_local_experts * 3 * 256 * 128;
    size_t expected =
        hip_test_weights_env_is("bf16") ? weights * 2 : weights / 2 + weights / 128 * 2;
    assert_true(device_bytes >= expected && device_bytes <= expected + 4096);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* Act-order GPTQ (every group still group_size rows, shuffled: g_idx[e][k]
 * = ((7k + e) mod IN) / group) in the environment's weights mode: int4 holds
 * the layout module's sorted copy and converts each slot's input row in its
 * expert's order, BF16 dequantizes through g_idx. Against the double
 * reference (each column's group from g_idx) at every tile choice the
 * token counts reach (the direct and routed GEMVs at 1, the int4 GEMM at
 * 150), with the router weight on the output and on the input, and an
 * expert_map. */
static void test_act_order(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    const int hidden = 256, intermediate = 128, group = 32;
    for (int asym = 0; asym < 2; asym++) {
        tk_layer layer;
        tk_rng rng;
        tk_rng_seed(&rng, 900 + (uint64_t)asym);
        assert_int_equal(
            tk_layer_random(&layer, asym ? MOEINT4_FORMAT_GPTQ_ASYM : MOEINT4_FORMAT_GPTQ_SYM, asym,
                            16, hidden, intermediate, group, MOEINT4_DTYPE_F16, asym, &rng),
            0);
        assert_int_equal(tk_layer_add_g_idx(&layer), 0);
        for (int e = 0; e < layer.w13.num_experts; e++) {
            for (int k = 0; k < hidden; k++)
                layer.w13.g_idx[e * hidden + k] = ((7 * k + e) % hidden) / group;
            for (int n = 0; n < intermediate; n++)
                layer.w2.g_idx[e * intermediate + n] = ((7 * n + e) % intermediate) / group;
        }
        moeint4_weights_desc desc = tk_layer_desc(&layer);
        moeint4_weights *w = NULL;
        if (moeint4_weights_prepare(ctx, &desc, &w) != MOEINT4_SUCCESS)
            fail_msg("prepare: %s", moeint4_last_error());
        int64_t sizes[] = { 1, 7, 150 };
        for (int i = 0; i < 3; i++)
            for (int on_input = 0; on_input < 2; on_input++) {
                hip_test_case c = default_case(MOEINT4_DTYPE_BF16, sizes[i], 4,
                                               950 + (uint64_t)(2 * i + on_input));
                c.on_input = on_input;
                double e = hip_test_error(ctx, w, &layer, &c);
                assert_true(e <= HIP_TOLERANCE);
            }
        moeint4_weights_release(w);
        tk_layer_free(&layer);
    }
    moeint4_context_destroy(ctx);
}

/* A bad id raises the device flag: INVALID_ARGUMENT naming the id, and the
 * (poisoned) output comes back byte for byte as it was. */
static void test_bad_ids(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 16, 128, 64, 32, 0, 41);
    const int64_t m = 6;
    const int topk = 2, k = 128;
    const int32_t bad_values[] = { 16, -1, 1 << 30 };
    /* 6 tokens take the routed decode GEMV, then tile 64, then the direct
     * GEMVs (no routing kernel: gemm2 checks the ids) */
    for (int b = 0; b < 9; b++) {
        if (b == 3)
            setenv("MOEINT4_HIP_TILE", "64", 1);
        if (b == 6)
            setenv("MOEINT4_HIP_TILE", "direct", 1);
        int32_t ids[12];
        float router[12];
        uint16_t hidden[6 * 128], out[6 * 128], poison[6 * 128];
        tk_rng rng;
        tk_rng_seed(&rng, 50 + (uint64_t)b);
        int32_t bad = bad_values[b % 3];
        tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, (size_t)(m * k), 1.0, hidden);
        tk_route_random(&rng, m, 16, topk, ids, router);
        ids[3 * topk + 1] = bad;
        ids[5 * topk + 0] = bad; /* a later bad slot: the first one is named */
        void *d_hidden, *d_ids, *d_router, *d_out;
        assert_int_equal(moeint4_memory_alloc(ctx, sizeof hidden, &d_hidden), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_alloc(ctx, sizeof ids, &d_ids), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_alloc(ctx, sizeof router, &d_router), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_alloc(ctx, sizeof out, &d_out), MOEINT4_SUCCESS);
        tk_poison(poison, sizeof poison);
        moeint4_memory_copy(ctx, d_hidden, hidden, sizeof hidden, MOEINT4_COPY_HOST_TO_DEVICE);
        moeint4_memory_copy(ctx, d_ids, ids, sizeof ids, MOEINT4_COPY_HOST_TO_DEVICE);
        moeint4_memory_copy(ctx, d_router, router, sizeof router, MOEINT4_COPY_HOST_TO_DEVICE);
        moeint4_memory_copy(ctx, d_out, poison, sizeof poison, MOEINT4_COPY_HOST_TO_DEVICE);
        moeint4_forward_args args =
            tk_forward_args(MOEINT4_DTYPE_BF16, m, topk, d_hidden, d_ids, d_router, d_out, NULL);
        moeint4_status status = moeint4_forward(ctx, w, &args);
        print_message("bad id %d: %s: %s\n", bad, moeint4_status_string(status),
                      moeint4_last_error());
        assert_int_equal(status, MOEINT4_INVALID_ARGUMENT);
        char expected[64];
        snprintf(expected, sizeof expected, "topk_ids[3][1] = %d", bad);
        assert_non_null(strstr(moeint4_last_error(), expected));
        moeint4_memory_copy(ctx, out, d_out, sizeof out, MOEINT4_COPY_DEVICE_TO_HOST);
        assert_memory_equal(out, poison, sizeof out);
        /* The same buffers with the ids repaired work (no sticky state). */
        ids[3 * topk + 1] = (ids[3 * topk] + 1) % 16;
        ids[5 * topk + 0] = (ids[5 * topk + 1] + 1) % 16;
        moeint4_memory_copy(ctx, d_ids, ids, sizeof ids, MOEINT4_COPY_HOST_TO_DEVICE);
        assert_int_equal(moeint4_forward(ctx, w, &args), MOEINT4_SUCCESS);
        moeint4_memory_copy(ctx, out, d_out, sizeof out, MOEINT4_COPY_DEVICE_TO_HOST);
        for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
            assert_true(isfinite(tk_bf16_to_f32(out[i])));
        moeint4_memory_free(ctx, d_hidden);
        moeint4_memory_free(ctx, d_ids);
        moeint4_memory_free(ctx, d_router);
        moeint4_memory_free(ctx, d_out);
    }
    unsetenv("MOEINT4_HIP_TILE");
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* A non-finite router weight: INVALID_ARGUMENT naming the first such slot
 * (as the CPU backend's host check), the output untouched, on the routed
 * GEMV, a tile, the direct GEMVs and the multi-block routing. */
static void test_bad_router_weights(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 16, 128, 64, 32, 0, 42);
    const int64_t m = 6;
    const int topk = 2, k = 128;
    const float bad_values[] = { NAN, INFINITY, -INFINITY };
    /* the last one routes with the multi-block kernels */
    const char *tiles[] = { "8v", "64", "direct", "8v" };
    for (int t = 0; t < 4; t++) {
        setenv("MOEINT4_HIP_TILE", tiles[t], 1);
        setenv("MOEINT4_HIP_ROUTE", t == 3 ? "multi" : "auto", 1);
        for (int b = 0; b < 3; b++) {
            int32_t ids[12];
            float router[12];
            uint16_t hidden[6 * 128], out[6 * 128], poison[6 * 128];
            tk_rng rng;
            tk_rng_seed(&rng, 90 + (uint64_t)(t * 3 + b));
            tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, (size_t)(m * k), 1.0, hidden);
            tk_route_random(&rng, m, 16, topk, ids, router);
            router[2 * topk + 1] = bad_values[b];
            router[4 * topk + 0] = bad_values[b]; /* a later one: the first is named */
            void *d_hidden = hip_test_upload(ctx, hidden, sizeof hidden);
            void *d_ids = hip_test_upload(ctx, ids, sizeof ids);
            void *d_router = hip_test_upload(ctx, router, sizeof router);
            tk_poison(poison, sizeof poison);
            void *d_out = hip_test_upload(ctx, poison, sizeof poison);
            moeint4_forward_args args = tk_forward_args(MOEINT4_DTYPE_BF16, m, topk, d_hidden,
                                                        d_ids, d_router, d_out, NULL);
            moeint4_status status = moeint4_forward(ctx, w, &args);
            print_message("tile %s, route %s, weight %g: %s: %s\n", tiles[t],
                          t == 3 ? "multi" : "auto", (double)bad_values[b],
                          moeint4_status_string(status), moeint4_last_error());
            assert_int_equal(status, MOEINT4_INVALID_ARGUMENT);
            assert_non_null(strstr(moeint4_last_error(), "topk_weights[2][1] = "));
            assert_non_null(strstr(moeint4_last_error(), "is not finite"));
            moeint4_memory_copy(ctx, out, d_out, sizeof out, MOEINT4_COPY_DEVICE_TO_HOST);
            assert_memory_equal(out, poison, sizeof out);
            moeint4_memory_free(ctx, d_hidden);
            moeint4_memory_free(ctx, d_ids);
            moeint4_memory_free(ctx, d_router);
            moeint4_memory_free(ctx, d_out);
        }
    }
    unsetenv("MOEINT4_HIP_TILE");
    unsetenv("MOEINT4_HIP_ROUTE");
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* A synchronous forward on a caller workspace (4 bytes off alignment) gives
 * the pool's bits; a workspace too small (256 bytes) is refused naming
 * workspace_bytes, the output untouched; an asynchronous forward without a
 * workspace is refused. */
static void test_caller_workspace(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w = hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_AWQ, 16, 256, 128, 64, 0, 43);
    const int64_t sizes[] = { 1, 8, 64, 300 };
    const int topk = 4, k = 256;
    size_t bound = 0;
    assert_int_equal(moeint4_forward_workspace_size(w, 300, topk, MOEINT4_DTYPE_BF16, &bound),
                     MOEINT4_SUCCESS);
    assert_true(bound > 0);
    for (int i = 0; i < 4; i++) {
        const int64_t m = sizes[i];
        size_t count = (size_t)m * k, slots = (size_t)m * topk;
        uint16_t *hidden = malloc(count * 2), *pooled = malloc(count * 2),
                 *mine = malloc(count * 2), *poison = malloc(count * 2);
        int32_t *ids = malloc(slots * 4);
        float *router = malloc(slots * 4);
        tk_rng rng;
        tk_rng_seed(&rng, 500 + (uint64_t)i);
        tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, count, 1.0, hidden);
        tk_route_random(&rng, m, 16, topk, ids, router);
        void *d_hidden = hip_test_upload(ctx, hidden, count * 2);
        void *d_ids = hip_test_upload(ctx, ids, slots * 4);
        void *d_router = hip_test_upload(ctx, router, slots * 4);
        tk_poison(poison, count * 2);
        void *d_out = hip_test_upload(ctx, poison, count * 2);
        void *d_ws = NULL;
        assert_int_equal(moeint4_memory_alloc(ctx, bound, &d_ws), MOEINT4_SUCCESS);
        moeint4_forward_args args =
            tk_forward_args(MOEINT4_DTYPE_BF16, m, topk, d_hidden, d_ids, d_router, d_out, NULL);
        assert_int_equal(moeint4_forward(ctx, w, &args), MOEINT4_SUCCESS);
        moeint4_memory_copy(ctx, pooled, d_out, count * 2, MOEINT4_COPY_DEVICE_TO_HOST);
        /* unaligned by 4 bytes: rounded up inside, the bound includes it */
        args.workspace = (char *)d_ws + 4;
        args.workspace_bytes = bound - 4;
        assert_int_equal(moeint4_forward(ctx, w, &args), MOEINT4_SUCCESS);
        moeint4_memory_copy(ctx, mine, d_out, count * 2, MOEINT4_COPY_DEVICE_TO_HOST);
        assert_memory_equal(mine, pooled, count * 2);
        /* too small: refused before anything runs */
        moeint4_memory_copy(ctx, d_out, poison, count * 2, MOEINT4_COPY_HOST_TO_DEVICE);
        args.workspace = d_ws;
        args.workspace_bytes = 256;
        assert_int_equal(moeint4_forward(ctx, w, &args), MOEINT4_INVALID_ARGUMENT);
        assert_non_null(strstr(moeint4_last_error(), "workspace_bytes = 256"));
        args.workspace = NULL;
        args.workspace_bytes = 0;
        args.flags = MOEINT4_FORWARD_ASYNC;
        assert_int_equal(moeint4_forward(ctx, w, &args), MOEINT4_INVALID_ARGUMENT);
        assert_non_null(strstr(moeint4_last_error(), "workspace is NULL"));
        moeint4_memory_copy(ctx, mine, d_out, count * 2, MOEINT4_COPY_DEVICE_TO_HOST);
        assert_memory_equal(mine, poison, count * 2);
        moeint4_memory_free(ctx, d_ws);
        moeint4_memory_free(ctx, d_hidden);
        moeint4_memory_free(ctx, d_ids);
        moeint4_memory_free(ctx, d_router);
        moeint4_memory_free(ctx, d_out);
        free(hidden);
        free(pooled);
        free(mine);
        free(poison);
        free(ids);
        free(router);
    }
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* Same inputs, same bits: for both variants, over many tiles and experts. */
static void test_determinism(void **state)
{
    (void)state;
    const char *variants[] = { "mma", "fma" };
    for (int v = 0; v < 2; v++) {
        moeint4_context *ctx = hip_test_context(variants[v]);
        tk_layer layer;
        moeint4_weights *w =
            hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 16, 256, 128, 128, 0, 61);
        /* 700 tokens: tiled GEMMs; 5 tokens: the routed decode GEMV, then
         * the direct GEMVs (which sum a token's slots themselves) */
        const int64_t sizes[] = { 700, 5, 5 };
        for (int i = 0; i < 3; i++) {
            if (i == 2)
                setenv("MOEINT4_HIP_TILE", "direct", 1);
            hip_test_case c = default_case(MOEINT4_DTYPE_F32, sizes[i], 4, 62);
            size_t bytes = (size_t)c.num_tokens * 256 * sizeof(float);
            void *first = malloc(bytes), *second = malloc(bytes);
            assert_non_null(first);
            assert_non_null(second);
            assert_int_equal(hip_test_forward(ctx, w, &layer, &c, first, NULL), MOEINT4_SUCCESS);
            assert_int_equal(hip_test_forward(ctx, w, &layer, &c, second, NULL), MOEINT4_SUCCESS);
            assert_memory_equal(first, second, bytes);
            free(first);
            free(second);
        }
        unsetenv("MOEINT4_HIP_TILE");
        moeint4_weights_release(w);
        tk_layer_free(&layer);
        moeint4_context_destroy(ctx);
    }
    setenv("MOEINT4_HIP_GEMM", "mma", 1);
}

/* A bf16 input that is not 16-byte aligned takes the conversion path. */
static void test_unaligned_input_and_empty_batch(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_SYM, 8, 128, 64, 64, 0, 71);
    hip_test_case c = default_case(MOEINT4_DTYPE_BF16, 5, 2, 72);
    c.misalign = 1;
    assert_true(hip_test_error(ctx, w, &layer, &c) <= HIP_TOLERANCE);
    c.misalign = 0;
    c.num_tokens = 0;
    uint16_t dummy[1];
    assert_int_equal(hip_test_forward(ctx, w, &layer, &c, dummy, NULL), MOEINT4_SUCCESS);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* The status of a context made with environment variable `name` = `value`
 * (and, where the core makes backend contexts lazily, of a prepare on it),
 * its message in `message`; `name` gets its earlier value (or none) back. */
static moeint4_status context_with_knob(const char *name, const char *value, char *message,
                                        size_t cap)
{
    char *earlier = hip_test_env_save(name);
    setenv(name, value, 1);
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_HIP;
    moeint4_context *ctx = NULL;
    moeint4_status status = moeint4_context_create(&options, &ctx);
    snprintf(message, cap, "%s", moeint4_last_error());
    if (status == MOEINT4_SUCCESS) {
        tk_layer layer;
        tk_rng rng;
        tk_rng_seed(&rng, 81);
        assert_int_equal(tk_layer_random(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 4, 64, 32, 32,
                                         MOEINT4_DTYPE_F16, 0, &rng),
                         0);
        moeint4_weights_desc desc = tk_layer_desc(&layer);
        moeint4_weights *w = NULL;
        status = moeint4_weights_prepare(ctx, &desc, &w);
        /* read before the next calls clear it */
        snprintf(message, cap, "%s", moeint4_last_error());
        moeint4_weights_release(w);
        tk_layer_free(&layer);
        moeint4_context_destroy(ctx);
    }
    hip_test_env_restore(name, earlier);
    print_message("%s=%s: %s: %s\n", name, value, moeint4_status_string(status), message);
    return status;
}

/* Unknown values of the context's knobs are refused with the knob's name. */
static void test_bad_knobs(void **state)
{
    (void)state;
    const struct {
        const char *name, *value;
    } bad[] = {
        { "MOEINT4_HIP_GEMM", "wmma" },
        { "MOEINT4_HIP_MULTIPROCESSORS", "0" },
        { "MOEINT4_HIP_MULTIPROCESSORS", "-4" },
        { "MOEINT4_HIP_MULTIPROCESSORS", "12abc" },
        { "MOEINT4_HIP_MULTIPROCESSORS", "100000" },
    };
    char message[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(context_with_knob(bad[i].name, bad[i].value, message, sizeof message),
                             MOEINT4_SUCCESS);
        assert_non_null(strstr(message, bad[i].name));
    }
}

/* MOEINT4_HIP_MULTIPROCESSORS=3: the persistent grids sized for 3 SMs
 * (every block walks many items and tiles) give the double reference's
 * results: each size's own tiles (direct decode, warp-specialized GEMMs),
 * then the routed decode forced with staged and ring token rows. */
static void test_few_multiprocessors(void **state)
{
    (void)state;
    setenv("MOEINT4_HIP_MULTIPROCESSORS", "3", 1);
    moeint4_context *ctx = hip_test_context("mma");
    tk_layer layer;
    moeint4_weights *w = hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_ASYM, 12, 512, 384,
                                          128, 1, 91);
    unsetenv("MOEINT4_HIP_MULTIPROCESSORS"); /* read by then, however lazily */
    const int64_t sizes[] = { 1, 6, 40, 300 };
    for (int i = 0; i < 4; i++) {
        hip_test_case c = default_case(MOEINT4_DTYPE_BF16, sizes[i], 3, 700 + (uint64_t)i);
        print_message("3 SMs, M = %lld\n", (long long)sizes[i]);
        assert_true(hip_test_error(ctx, w, &layer, &c) <= HIP_TOLERANCE);
    }
    const char *x_modes[] = { "staged", "ring" };
    setenv("MOEINT4_HIP_TILE", "d8", 1);
    for (int i = 1; i < 3; i++)
        for (int x = 0; x < 2; x++) {
            setenv("MOEINT4_HIP_ROUTED_X", x_modes[x], 1);
            hip_test_case c = default_case(MOEINT4_DTYPE_BF16, sizes[i], 3, 710 + (uint64_t)i);
            print_message("3 SMs, d8, x %s, M = %lld\n", x_modes[x], (long long)sizes[i]);
            assert_true(hip_test_error(ctx, w, &layer, &c) <= HIP_TOLERANCE);
        }
    unsetenv("MOEINT4_HIP_ROUTED_X");
    unsetenv("MOEINT4_HIP_TILE");
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

int main(void)
{
    if (!hip_test_available())
        return HIP_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants_and_tiles),
        cmocka_unit_test(test_int4_grouped_gemm_tiles),
        cmocka_unit_test(test_ws_staged_scales),
        cmocka_unit_test(test_int4_routed_decode),
        cmocka_unit_test(test_int4_tile_dequant),
        cmocka_unit_test(test_decode_rings_and_grids),
        cmocka_unit_test(test_dtypes_and_activations),
        cmocka_unit_test(test_expert_parallel),
        cmocka_unit_test(test_act_order),
        cmocka_unit_test(test_bad_ids),
        cmocka_unit_test(test_bad_router_weights),
        cmocka_unit_test(test_caller_workspace),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_unaligned_input_and_empty_batch),
        cmocka_unit_test(test_bad_knobs),
        cmocka_unit_test(test_few_multiprocessors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
