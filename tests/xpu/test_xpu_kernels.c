/* The XPU kernels one at a time on PoCL (OpenCL test mode) against scalar
 * double computations: routing (counts, offsets, sort, expert_map, tile
 * list, bad ids and non-finite router weights in the error record),
 * the w13 GEMM with each fused activation, the w2 GEMM with the router
 * weight, the GEMVs (staged, walking, lanes, rows), the zero-point twins
 * (AWQ, GPTQ asymmetric), and the combine (bit-exact: fixed summation
 * order). */
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testkit.h"
#include "xpu_test_util.h"

/* ---- routing ---- */

/* up to 320 local experts and 512 slots */
typedef struct route_result {
    int32_t route[4 * 320 + 2];
    int32_t slot_expert[512];
    int32_t sorted[512];
    int32_t errors[2];
} route_result;

static void run_routing(mi4_xpu_runtime *rt, const int32_t *ids, const float *weights,
                        int num_slots, const int32_t *map, int num_experts, int num_local,
                        int dnnl_min_rows, int tile_rows, route_result *out)
{
    size_t route_ints = 4 * (size_t)num_local + 2;
    void *ids_d = xt_upload(rt, ids, (size_t)num_slots * 4);
    void *weights_d = xt_upload(rt, weights, (size_t)num_slots * 4);
    void *map_d = xt_upload(rt, map, (size_t)num_experts * 4);
    void *route_d = xt_upload(rt, NULL, route_ints * 4);
    void *errors_d = xt_upload(rt, NULL, 2 * 4);
    void *slot_expert_d = xt_upload(rt, NULL, (size_t)num_slots * 4);
    void *sorted_d = xt_upload(rt, NULL, (size_t)num_slots * 4);
    int slot_base = 0, gated = 1, reset = 1, sort = 1;
    mi4_xpu_arg args[] = { MI4_XPU_PTR(ids_d),         MI4_XPU_PTR(weights_d),
                           MI4_XPU_PTR(map_d),         MI4_XPU_INT(num_slots),
                           MI4_XPU_INT(slot_base),     MI4_XPU_INT(num_experts),
                           MI4_XPU_INT(num_local),     MI4_XPU_INT(dnnl_min_rows),
                           MI4_XPU_INT(tile_rows),     MI4_XPU_INT(gated),
                           MI4_XPU_INT(reset),         MI4_XPU_INT(sort),
                           MI4_XPU_PTR(slot_expert_d), MI4_XPU_PTR(route_d),
                           MI4_XPU_PTR(sorted_d),      MI4_XPU_PTR(errors_d) };
    xt_launch(rt, MI4_XPU_ROUTE, MI4_XPU_GROUP, 1, 16, args);
    xt_download(rt, out->route, route_d, route_ints * 4);
    xt_download(rt, out->slot_expert, slot_expert_d, (size_t)num_slots * 4);
    xt_download(rt, out->sorted, sorted_d, (size_t)num_slots * 4);
    xt_download(rt, out->errors, errors_d, 2 * 4);
    void *all[] = { ids_d, weights_d, map_d, route_d, errors_d, slot_expert_d, sorted_d };
    for (int i = 0; i < 7; ++i)
        rt->ops->free(rt, all[i]);
}

static void ones(float *weights, int count)
{
    for (int i = 0; i < count; ++i)
        weights[i] = 1.0f;
}

static int compare_ints(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A random expert_map: about a third of the global experts are not local. */
static int random_map(tk_rng *rng, int num_experts, int32_t *map)
{
    int local = 0;
    for (int e = 0; e < num_experts; ++e)
        map[e] = tk_rng_uniform(rng) < 0.35 ? -1 : local++;
    for (int e = num_experts - 1; e > 0; --e) { /* shuffle the local ids among the locals */
        int other = (int)(tk_rng_next(rng) % (uint64_t)(e + 1));
        if (map[e] >= 0 && map[other] >= 0) {
            int32_t t = map[e];
            map[e] = map[other];
            map[other] = t;
        }
    }
    return local;
}

/* The routing kernel against the host's count and sort: E experts, S slots
 * (at most 320 and 512), with and without an expert_map, tiles of
 * tile_rows slots. */
static void check_routing(mi4_xpu_runtime *rt, int E, int S, int tile_rows, uint64_t seed)
{
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    static int32_t map[320], ids[512], expected[512], got[512];
    static float weights[512];
    static route_result r;
    for (int with_map = 0; with_map < 2; ++with_map) {
        int num_local = E;
        for (int e = 0; e < E; ++e)
            map[e] = e;
        if (with_map)
            num_local = random_map(&rng, E, map);
        for (int s = 0; s < S; ++s)
            ids[s] = (int32_t)(tk_rng_next(&rng) % (uint64_t)E);
        ones(weights, S);
        /* with the map, experts with >= 10 slots (S / E / 2 when more) get no tiles */
        int dnnl_min_rows = with_map ? (S / E / 2 > 10 ? S / E / 2 : 10) : INT_MAX;
        run_routing(rt, ids, weights, S, map, E, num_local, dnnl_min_rows, tile_rows, &r);
        int running = 0, tiles = 0;
        for (int e = 0; e < num_local; ++e) {
            int n = 0;
            for (int s = 0; s < S; ++s)
                if (map[ids[s]] == e)
                    expected[n++] = s;
            assert_int_equal(r.route[e], n);
            assert_int_equal(r.route[num_local + e], running);
            memcpy(got, r.sorted + running, (size_t)n * sizeof(int));
            qsort(got, (size_t)n, sizeof(int), compare_ints);
            assert_memory_equal(got, expected, (size_t)n * sizeof(int));
            assert_int_equal(r.route[3 * num_local + 1 + e], tiles); /* tile offsets */
            running += n;
            if (n < dnnl_min_rows)
                tiles += (n + tile_rows - 1) / tile_rows;
        }
        assert_int_equal(r.route[2 * num_local], running);
        assert_int_equal(r.route[4 * num_local + 1], tiles);
        assert_int_equal(r.errors[0], INT_MAX);
        assert_int_equal(r.errors[1], INT_MAX);
        for (int s = 0; s < S; ++s)
            assert_int_equal(r.slot_expert[s], map[ids[s]]);
    }
}

static void test_routing_sorts_by_expert(void **state)
{
    (void)state;
    mi4_xpu_runtime *rt = xt_runtime();
    /* not an Intel GPU: no ocloc binary fits, the program is built from text,
     * with the options the piece-major entry sets (else that entry would
     * quietly test the default layout again) */
    const char *options = getenv("MOEINT4_XPU_BUILD_OPTIONS");
    if (xt_level_zero()) { /* the stand-in driver refuses the ocloc binaries */
        assert_string_equal(rt->kernels_from, "SPIR-V");
    } else if (options && *options) {
        assert_memory_equal(rt->kernels_from, "OpenCL C text built with ", 25);
        assert_non_null(strstr(rt->kernels_from, options));
    } else {
        assert_string_equal(rt->kernels_from, "OpenCL C text");
    }
    check_routing(rt, 12, 41 * 3, MI4_XPU_TILE_ROWS, 11);
    check_routing(rt, 12, 41 * 3, 1, 14); /* the GEMVs' tiles of one slot */
    /* more experts and slots than the routing work-group has work-items */
    check_routing(rt, 300, 100 * 4, MI4_XPU_TILE_ROWS, 12);
    check_routing(rt, 5, 1, MI4_XPU_TILE_ROWS, 13);
    rt->ops->destroy(rt);
}

static void test_routing_flags_first_bad_id_and_weight(void **state)
{
    (void)state;
    mi4_xpu_runtime *rt = xt_runtime();
    enum { E = 8, S = 30 };
    int32_t map[E], ids[S];
    float weights[S];
    for (int e = 0; e < E; ++e)
        map[e] = e;
    for (int s = 0; s < S; ++s)
        ids[s] = (s * 5 + 1) % E;
    ones(weights, S);
    ids[22] = -1;
    ids[9] = E;
    ids[27] = INT_MAX;
    weights[25] = INFINITY;
    weights[14] = NAN;
    weights[3] = -INFINITY;
    route_result r;
    run_routing(rt, ids, weights, S, map, E, E, INT_MAX, MI4_XPU_TILE_ROWS, &r);
    assert_int_equal(r.errors[0], 9);
    assert_int_equal(r.errors[1], 3);
    assert_int_equal(r.slot_expert[9], -1);
    assert_int_equal(r.slot_expert[22], -1);
    assert_int_equal(r.slot_expert[27], -1);
    assert_int_equal(r.slot_expert[3], -1); /* a non-finite weight contributes nothing */
    assert_int_equal(r.slot_expert[14], -1);
    assert_int_equal(r.slot_expert[25], -1);
    assert_int_equal(r.route[2 * E], S - 6);
    assert_int_equal(r.route[4 * E + 1], 0); /* no GEMM tile once the record is set */
    rt->ops->destroy(rt);
}

/* ---- GEMMs ---- */

typedef struct gemm_setup {
    int num_local, num_tokens, topk, num_slots, num_tiles;
    int32_t route[4 * 8 + 2];
    int32_t sorted[128];
    int32_t slot_local[128];
    float weights[128];
} gemm_setup;

/* Slots spread over experts; the host plays the routing kernel (tiles of
 * tile_rows slots). */
static void make_setup(tk_rng *rng, int num_local, int num_tokens, int topk, int tile_rows,
                       gemm_setup *g)
{
    memset(g, 0, sizeof *g);
    g->num_local = num_local;
    g->num_tokens = num_tokens;
    g->topk = topk;
    g->num_slots = num_tokens * topk;
    for (int s = 0; s < g->num_slots; ++s) {
        g->slot_local[s] = (int32_t)(tk_rng_next(rng) % (uint64_t)num_local);
        g->weights[s] = (float)tk_rng_range(rng, 0.1, 1.0);
    }
    int row = 0;
    for (int e = 0; e < num_local; ++e) {
        g->route[num_local + e] = row;
        g->route[3 * num_local + 1 + e] = g->num_tiles;
        int first = row;
        for (int s = 0; s < g->num_slots; ++s)
            if (g->slot_local[s] == e)
                g->sorted[row++] = s;
        g->route[e] = row - first;
        g->num_tiles += (row - first + tile_rows - 1) / tile_rows;
    }
    g->route[2 * num_local] = row;
    g->route[4 * num_local + 1] = g->num_tiles;
    /* several tokens in tiles of 8: some expert needs a second, partial tile */
    assert_true(num_tokens == 1 || tile_rows == 1 || g->num_tiles > num_local);
}

/* A GEMM test's shape: experts, K, N, tokens, top-k, the team size,
 * whether the one-row kernels (GEMVs, tiles of one slot) run, and walk > 0:
 * the walking GEMVs instead, with this many work-groups per tile (each
 * then walks several rounds of columns); lanes > 0 likewise the lanes
 * GEMVs (kernels/gemv_lanes.cl, which choose their own team), rows > 0
 * the rows GEMVs (kernels/gemv_rows.cl, with `team`). */
typedef struct gemm_dims {
    int E, K, N, M, topk, team, gemv, walk, lanes, rows;
    int zp; /* 1: AWQ weights through the zero-point kernels (_zp), 2: GPTQ asymmetric */
} gemm_dims;

/* The kernel and global[0] of a GEMM test's launch over `columns`. */
static mi4_xpu_kernel gemm_kernel(gemm_dims d, int w13)
{
    if (d.zp && d.rows > 0)
        return w13 ? MI4_XPU_W13_GEMV_ROWS_ZP : MI4_XPU_W2_GEMV_ROWS_ZP;
    if (d.zp)
        return d.gemv ? (w13 ? MI4_XPU_W13_GEMV_ZP : MI4_XPU_W2_GEMV_ZP)
                      : (w13 ? MI4_XPU_W13_GEMM_ZP : MI4_XPU_W2_GEMM_ZP);
    if (d.lanes > 0)
        return mi4_xpu_lanes_kernel(w13 ? d.K : d.N, w13);
    if (d.rows > 0)
        return w13 ? MI4_XPU_W13_GEMV_ROWS : MI4_XPU_W2_GEMV_ROWS;
    if (d.walk > 0)
        return w13 ? MI4_XPU_W13_GEMV_WALK : MI4_XPU_W2_GEMV_WALK;
    if (d.gemv)
        return w13 ? MI4_XPU_W13_GEMV : MI4_XPU_W2_GEMV;
    return w13 ? MI4_XPU_W13_GEMM : MI4_XPU_W2_GEMM;
}

static size_t gemm_width(gemm_dims d, int columns)
{
    if (d.lanes > 0)
        return (size_t)d.lanes * MI4_XPU_GROUP;
    if (d.rows > 0)
        return (size_t)d.rows * MI4_XPU_GROUP;
    return d.walk > 0 ? (size_t)d.walk * MI4_XPU_GROUP : mi4_xpu_gemm_width(columns, d.team);
}

/* The walking GEMVs add every sum in the GEMV's order: on PoCL (one
 * compiler, no choice of contraction between the two) their results are
 * the GEMV's bits. Runs the GEMV with the walk's arguments (the last one,
 * the output, replaced) and compares. */
static void expect_gemv_bits(mi4_xpu_runtime *rt, gemm_dims d, int w13, int columns, size_t tiles,
                             int num_args, mi4_xpu_arg *args, const float *got, size_t bytes)
{
    if (d.walk <= 0 || !rt->is_test_cpu_device)
        return;
    gemm_dims gemv = d;
    gemv.walk = 0, gemv.gemv = 1;
    void *out_d = xt_upload(rt, NULL, bytes);
    float *want = malloc(bytes);
    assert_non_null(want);
    args[num_args - 1] = MI4_XPU_PTR(out_d);
    xt_launch(rt, gemm_kernel(gemv, w13), gemm_width(gemv, columns), tiles, num_args, args);
    xt_download(rt, want, out_d, bytes);
    assert_memory_equal(got, want, bytes);
    free(want);
    rt->ops->free(rt, out_d);
}

typedef struct xpu_matrix {
    tk_matrix m;
    void *packed_d, *scales_d, *zeros_d; /* zeros_d: NULL without zero points */
} xpu_matrix;

/* zp as gemm_dims.zp: 0 GPTQ symmetric, 1 AWQ, 2 GPTQ asymmetric with
 * AutoGPTQ v1's zero_offset 1 (the value subtracted is the stored zero + 1) */
static void make_matrix(mi4_xpu_runtime *rt, tk_rng *rng, xpu_matrix *x, int num_local, int in,
                        int out, int group_size, moeint4_dtype scales_dtype, int zp)
{
    moeint4_format format = zp == 1   ? MOEINT4_FORMAT_AWQ
                            : zp == 2 ? MOEINT4_FORMAT_GPTQ_ASYM
                                      : MOEINT4_FORMAT_GPTQ_SYM;
    assert_int_equal(tk_matrix_random(&x->m, format, zp == 2, num_local, in, out, group_size,
                                      scales_dtype, 0.04, 0, rng),
                     0);
    int groups = group_size == -1 ? 1 : in / group_size;
    size_t packed_bytes = (size_t)num_local * out * in / 2;
    size_t zero_bytes = (size_t)num_local * out * groups;
    uint8_t *packed = malloc(packed_bytes);
    uint16_t *scales = malloc(2 * zero_bytes);
    uint8_t *zeros = malloc(zero_bytes);
    assert_true(packed && scales && zeros);
    moeint4_quant_matrix view = tk_matrix_view(&x->m);
    if (zp)
        assert_int_equal(moeint4_layout_to_xpu(&view, packed, scales, zeros), MOEINT4_SUCCESS);
    else
        assert_int_equal(moeint4_layout_gptq_to_xpu(&view, packed, scales), MOEINT4_SUCCESS);
    x->packed_d = xt_upload(rt, packed, packed_bytes);
    x->scales_d = xt_upload(rt, scales, 2 * zero_bytes);
    x->zeros_d = zp ? xt_upload(rt, zeros, zero_bytes) : NULL;
    free(packed);
    free(scales);
    free(zeros);
}

static void free_matrix(mi4_xpu_runtime *rt, xpu_matrix *x)
{
    rt->ops->free(rt, x->packed_d);
    rt->ops->free(rt, x->scales_d);
    rt->ops->free(rt, x->zeros_d);
    tk_matrix_free(&x->m);
}

static double ref_activation(int kind, double g, double u, double limit, double alpha, double beta)
{
    if (kind == MOEINT4_ACTIVATION_SILU)
        return g / (1.0 + exp(-g)) * u;
    if (kind == MOEINT4_ACTIVATION_GELU)
        return 0.5 * g * (1.0 + erf(g / sqrt(2.0))) * u;
    double gc = g < limit ? g : limit;
    double uc = u < -limit ? -limit : (u > limit ? limit : u);
    return (uc + beta) * gc / (1.0 + exp(-alpha * gc));
}

/* The most roundings a term of a row of `in` codes goes through (the n of
 * xt_sum_error_bound): in the rows GEMVs, a piece's chain of 32 FMAs, its
 * group scale, a work-item's chain over its pieces, one more a staged
 * block of 4096 or more codes, the team's sum and the router weight, so
 * that one piece left out of a row of 14336 codes shows (in + 8 lets it
 * pass); the other kernels' orders: one a term. */
static int rows_gemv_depth(gemm_dims d, int in, int team)
{
    return d.rows > 0 ? 32 + 1 + (in / 32 + team - 1) / team + in / 4096 + 1 + team + 1 + 2
                      : in + 8;
}

static void check_w13(gemm_dims d, moeint4_dtype dtype, int act_kind, int on_input, int group_size,
                      moeint4_dtype scales_dtype, uint64_t seed)
{
    const int E = d.E, K = d.K, N = d.N, M = d.M, TOPK = d.topk;
    const float limit = 1.5f, alpha = 1.702f, beta = 0.5f;
    mi4_xpu_runtime *rt = xt_runtime();
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    gemm_setup g;
    make_setup(&rng, E, M, TOPK, d.gemv || d.walk || d.lanes || d.rows ? 1 : MI4_XPU_TILE_ROWS, &g);
    xpu_matrix w13;
    make_matrix(rt, &rng, &w13, E, K, 2 * N, group_size, scales_dtype, d.zp);
    size_t esize = tk_dtype_size(dtype);
    uint8_t *hidden = malloc((size_t)M * K * 4);
    float *got = malloc((size_t)M * TOPK * N * 4);
    assert_true(hidden && got);
    tk_fill_activations(&rng, dtype, M * K, 1.0, hidden);
    void *hidden_d = xt_upload(rt, hidden, M * K * esize);
    void *route_d = xt_upload(rt, g.route, sizeof g.route);
    void *sorted_d = xt_upload(rt, g.sorted, sizeof g.sorted);
    void *weights_d = xt_upload(rt, g.weights, sizeof g.weights);
    void *act_d = xt_upload(rt, NULL, (size_t)g.num_slots * N * 4);
    int num_local = E, dt = (int)dtype, topk = TOPK, k_dim = K, n_dim = N, act = act_kind;
    int team = d.lanes > 0 ? mi4_xpu_lanes_team(K) : d.team;
    int gs = group_size == -1 ? K : group_size, bf16 = scales_dtype == MOEINT4_DTYPE_BF16;
    mi4_xpu_arg args[] = {
        MI4_XPU_PTR(route_d),      MI4_XPU_INT(num_local), MI4_XPU_PTR(sorted_d),
        MI4_XPU_PTR(hidden_d),     MI4_XPU_INT(dt),        MI4_XPU_PTR(weights_d),
        MI4_XPU_INT(on_input),     MI4_XPU_INT(topk),      MI4_XPU_PTR(w13.packed_d),
        MI4_XPU_PTR(w13.scales_d), MI4_XPU_INT(bf16),      MI4_XPU_INT(k_dim),
        MI4_XPU_INT(n_dim),        MI4_XPU_INT(gs),        MI4_XPU_INT(act),
        MI4_XPU_FLOAT(limit),      MI4_XPU_FLOAT(alpha),   MI4_XPU_FLOAT(beta),
        MI4_XPU_INT(team),         MI4_XPU_PTR(act_d),     MI4_XPU_PTR(w13.zeros_d)
    };
    /* two groups past the last tile: they must write nothing; the zeros
     * only for the _zp kernels */
    xt_launch(rt, gemm_kernel(d, 1), gemm_width(d, N), (size_t)g.num_tiles + 2, d.zp ? 21 : 20,
              args);
    xt_download(rt, got, act_d, (size_t)g.num_slots * N * 4);
    int depth = rows_gemv_depth(d, K, team);
    expect_gemv_bits(rt, d, 1, N, (size_t)g.num_tiles + 2, 20, args, got,
                     (size_t)g.num_slots * N * 4);
    for (int s = 0; s < g.num_slots; ++s) {
        int e = g.slot_local[s], token = s / TOPK;
        double scale = on_input ? g.weights[s] : 1.0;
        for (int n = 0; n < N; ++n) {
            double gate = 0, up = 0, gate_abs = 0, up_abs = 0;
            for (int k = 0; k < K; ++k) {
                double x = tk_load(dtype, hidden, (size_t)token * K + k);
                double a = tk_matrix_value(&w13.m, e, n, k) * x;
                double b = tk_matrix_value(&w13.m, e, N + n, k) * x;
                gate += a, up += b, gate_abs += fabs(a), up_abs += fabs(b);
            }
            gate *= scale, up *= scale, gate_abs *= scale, up_abs *= scale;
            double want = ref_activation(act_kind, gate, up, limit, alpha, beta);
            /* f32 sums (rows_gemv_depth roundings a term), then the
             * activation's sensitivity to each input and its own few ulps */
            double gate_err = xt_sum_error_bound(depth, gate_abs);
            double up_err = xt_sum_error_bound(depth, up_abs);
            /* |d act / d gate| <= 1.13 |up| for SiLU and GELU; SwiGLU's
             * (u + beta) g sigmoid(alpha g) adds alpha |g| / 4 */
            double d_gate =
                act_kind == MOEINT4_ACTIVATION_SWIGLU_CLAMP
                    ? 1.2 * (fabs(up) + fabs(beta) + up_err) * (1.0 + alpha * fabs(gate))
                    : 1.2 * (fabs(up) + up_err);
            double d_up = fabs(gate) + gate_err;
            double bound = gate_err * d_gate + up_err * d_up + 4e-6 * fabs(want) + 1e-7;
            double diff = fabs((double)got[s * N + n] - want);
            if (!(diff <= bound))
                fail_msg(
                    "w13 slot %d n %d: got %.9g want %.9g (bound %.3g) dtype %d act %d team %d", s,
                    n, (double)got[s * N + n], want, bound, (int)dtype, act_kind, team);
        }
    }
    void *all[] = { hidden_d, route_d, sorted_d, weights_d, act_d };
    for (int i = 0; i < 5; ++i)
        rt->ops->free(rt, all[i]);
    free_matrix(rt, &w13);
    free(hidden);
    free(got);
    rt->ops->destroy(rt);
}

static void test_w13_every_activation_and_dtype(void **state)
{
    (void)state;
    uint64_t seed = 100;
    moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
    /* K = 640: 20 pieces of 32 codes, uneven over the team's work-items; 8-row
     * tiles stage it in two blocks; ~13 slots per expert: 2 tiles each */
    gemm_dims dims = { 3, 640, 24, 20, 2, 8, 0, 0, 0, 0, 0 };
    for (int d = 0; d < 3; ++d)
        for (int act = 0; act < 3; ++act) {
            dims.team = 4 << (act + d) % 4; /* 4, 8, 16, 32 */
            dims.gemv = act == d;           /* the GEMV on every dtype */
            check_w13(dims, dtypes[d], act, act == 1, act == 2 ? -1 : 32,
                      d == 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16, seed++);
        }
}

/* Rows not a multiple of 32 codes (one word at a time), and one token with
 * rows longer than one staged block of activations. */
static void test_w13_word_path_and_long_rows(void **state)
{
    (void)state;
    gemm_dims words = { 3, 616, 40, 20, 2, 8, 0, 0, 0, 0, 0 }; /* 77 words; per-channel scales */
    check_w13(words, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SILU, 0, -1, MOEINT4_DTYPE_F16, 110);
    words.gemv = 1;
    check_w13(words, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SILU, 0, -1, MOEINT4_DTYPE_F16, 113);
    gemm_dims short_rows = { 3, 32, 96, 20, 2, 4, 0, 0, 0, 0, 0 }; /* one piece per row */
    check_w13(short_rows, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_SILU, 0, 32, MOEINT4_DTYPE_BF16,
              112);
    for (int gemv = 0; gemv < 2; ++gemv) {
        gemm_dims one_token = {
            4, 4352, 40, 1, 2, 16, gemv, 0, 0, 0, 0
        }; /* 4352 > 4096: two blocks */
        check_w13(one_token, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 0, 128,
                  MOEINT4_DTYPE_BF16, 111);
    }
}

static void check_w2(gemm_dims d, int on_input, int group_size, moeint4_dtype scales_dtype,
                     uint64_t seed)
{
    const int E = d.E, K = d.K, N = d.N, M = d.M, TOPK = d.topk;
    mi4_xpu_runtime *rt = xt_runtime();
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    gemm_setup g;
    make_setup(&rng, E, M, TOPK, d.gemv || d.walk || d.lanes || d.rows ? 1 : MI4_XPU_TILE_ROWS, &g);
    xpu_matrix w2;
    make_matrix(rt, &rng, &w2, E, N, K, group_size, scales_dtype, d.zp);
    size_t act_bytes = (size_t)M * TOPK * N * 4;
    float *act = malloc(act_bytes), *got = malloc((size_t)M * TOPK * K * 4);
    assert_true(act && got);
    for (int i = 0; i < M * TOPK * N; ++i)
        act[i] = (float)tk_rng_normal(&rng);
    void *act_d = xt_upload(rt, act, act_bytes);
    void *route_d = xt_upload(rt, g.route, sizeof g.route);
    void *sorted_d = xt_upload(rt, g.sorted, sizeof g.sorted);
    void *weights_d = xt_upload(rt, g.weights, sizeof g.weights);
    void *out_d = xt_upload(rt, NULL, (size_t)g.num_slots * K * 4);
    int num_local = E, k_dim = K, n_dim = N, team = d.lanes > 0 ? mi4_xpu_lanes_team(N) : d.team;
    int gs = group_size == -1 ? N : group_size, bf16 = scales_dtype == MOEINT4_DTYPE_BF16;
    mi4_xpu_arg args[] = {
        MI4_XPU_PTR(route_d),     MI4_XPU_INT(num_local),   MI4_XPU_PTR(sorted_d),
        MI4_XPU_PTR(act_d),       MI4_XPU_PTR(weights_d),   MI4_XPU_INT(on_input),
        MI4_XPU_PTR(w2.packed_d), MI4_XPU_PTR(w2.scales_d), MI4_XPU_INT(bf16),
        MI4_XPU_INT(k_dim),       MI4_XPU_INT(n_dim),       MI4_XPU_INT(gs),
        MI4_XPU_INT(team),        MI4_XPU_PTR(out_d),       MI4_XPU_PTR(w2.zeros_d)
    };
    xt_launch(rt, gemm_kernel(d, 0), gemm_width(d, K), (size_t)g.num_tiles + 2, d.zp ? 15 : 14,
              args);
    xt_download(rt, got, out_d, (size_t)g.num_slots * K * 4);
    int depth = rows_gemv_depth(d, N, team);
    expect_gemv_bits(rt, d, 0, K, (size_t)g.num_tiles + 2, 14, args, got,
                     (size_t)g.num_slots * K * 4);
    for (int s = 0; s < g.num_slots; ++s) {
        double scale = on_input ? 1.0 : g.weights[s];
        for (int k = 0; k < K; ++k) {
            double want = 0, sum_abs = 0;
            for (int n = 0; n < N; ++n) {
                double term = tk_matrix_value(&w2.m, g.slot_local[s], k, n) * act[s * N + n];
                want += term, sum_abs += fabs(term);
            }
            want *= scale;
            double bound = xt_sum_error_bound(depth, sum_abs * scale);
            double diff = fabs((double)got[s * K + k] - want);
            if (!(diff <= bound))
                fail_msg("w2 slot %d k %d: got %.9g want %.9g (bound %.3g) team %d", s, k,
                         (double)got[s * K + k], want, bound, team);
        }
    }
    void *all[] = { act_d, route_d, sorted_d, weights_d, out_d };
    for (int i = 0; i < 5; ++i)
        rt->ops->free(rt, all[i]);
    free_matrix(rt, &w2);
    free(act);
    free(got);
    rt->ops->destroy(rt);
}

static void test_w2_router_weight_and_groups(void **state)
{
    (void)state;
    /* N = 320: 10 pieces of 32 codes; K = 40 columns, not a whole number of
     * work-groups for any team; ~11 slots per expert: 2 tiles */
    gemm_dims dims = { 4, 40, 320, 15, 3, 4, 0, 0, 0, 0, 0 };
    check_w2(dims, 0, 32, MOEINT4_DTYPE_F16, 200);
    dims.team = 32;
    check_w2(dims, 1, 64, MOEINT4_DTYPE_BF16, 201);
    dims.team = 8;
    check_w2(dims, 0, -1, MOEINT4_DTYPE_F16, 202);
    dims.gemv = 1;
    check_w2(dims, 1, 32, MOEINT4_DTYPE_F16, 205);
    gemm_dims words = { 4, 40, 328, 15, 3, 8, 0, 0, 0, 0, 0 }; /* 41 words: one at a time */
    check_w2(words, 0, -1, MOEINT4_DTYPE_F16, 203);
    gemm_dims one_token = { 4, 72, 4608, 1, 3, 32, 1, 0, 0, 0, 0 }; /* 4608 > 4096: two blocks */
    check_w2(one_token, 1, 128, MOEINT4_DTYPE_F16, 204);
}

/* The walking GEMVs (kernels/gemv_walk.cl) with few work-groups per tile,
 * so each walks several rounds of columns: the 16-byte path with one and
 * two staged blocks, rows of one to three pieces (a work-item's pieces
 * cross from one column to the next within a batch), the word path, every
 * team size, columns past the end in the last round. Run under each
 * variant's build options by the test_xpu_kernels_variant_* entries. */
static void test_gemv_walk(void **state)
{
    (void)state;
    gemm_dims pieces = {
        4, 640, 200, 1, 2, 4, 0, 1, 0, 0, 0
    }; /* 20 pieces, 4 rounds of 64 columns */
    check_w13(pieces, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_SILU, 0, 32, MOEINT4_DTYPE_F16, 400);
    pieces.team = 32, pieces.walk = 3, pieces.topk = 3;
    check_w13(pieces, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SWIGLU_CLAMP, 1, -1,
              MOEINT4_DTYPE_BF16, 401);
    gemm_dims two_blocks = { 4, 4352, 40, 1, 2, 16, 0, 1, 0, 0, 0 };
    check_w13(two_blocks, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 0, 128, MOEINT4_DTYPE_BF16,
              402);
    gemm_dims words = { 4, 616, 40, 1, 2, 8, 0, 2, 0, 0, 0 }; /* per-channel scales of 616: words */
    check_w13(words, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SILU, 0, -1, MOEINT4_DTYPE_F16, 403);
    gemm_dims one_piece = { 4, 32, 96, 1, 2, 4, 0, 1, 0, 0, 0 };
    check_w13(one_piece, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_GELU, 0, 32, MOEINT4_DTYPE_F16, 404);
    gemm_dims three_pieces = { 4, 96, 100, 1, 3, 8, 0, 1, 0, 0, 0 };
    check_w13(three_pieces, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_SILU, 1, 32, MOEINT4_DTYPE_BF16,
              405);

    gemm_dims w2_pieces = { 4, 200, 320, 1, 3, 4, 0, 1, 0, 0, 0 }; /* 10 pieces, 200 columns */
    check_w2(w2_pieces, 0, 32, MOEINT4_DTYPE_F16, 410);
    gemm_dims w2_blocks = { 4, 72, 4608, 1, 3, 32, 0, 2, 0, 0, 0 };
    check_w2(w2_blocks, 1, 128, MOEINT4_DTYPE_F16, 411);
    gemm_dims w2_words = { 4, 40, 328, 1, 3, 8, 0, 1, 0, 0, 0 };
    check_w2(w2_words, 0, -1, MOEINT4_DTYPE_BF16, 412);
    gemm_dims w2_short = { 4, 100, 32, 1, 2, 4, 0, 1, 0, 0, 0 };
    check_w2(w2_short, 1, 32, MOEINT4_DTYPE_F16, 413);

    /* the host's grid: groups per compute unit spread over the tiles, at
     * least one per tile, never more than the GEMV's own launch */
    const size_t G = MI4_XPU_GROUP;
    assert_int_equal(mi4_xpu_gemv_walk_width(14336, 16, 2, 2, 132), 132 * G); /* Mixtral w13 */
    assert_int_equal(mi4_xpu_gemv_walk_width(768, 16, 8, 2, 132), 33 * G);    /* Qwen3 w13 */
    assert_int_equal(mi4_xpu_gemv_walk_width(40, 8, 1, 4, 132), mi4_xpu_gemm_width(40, 8));
    assert_int_equal(mi4_xpu_gemv_walk_width(100000, 4, 1, 2, 0), 128 * G); /* 64 units */
    assert_int_equal(mi4_xpu_gemv_walk_width(100000, 4, 300, 1, 8), G);
}

/* The lanes GEMVs (kernels/gemv_lanes.cl) with few work-groups per tile,
 * so each walks several batches, the last one past the end: teams of 8 to
 * 256 work-items, some idle (rows of 1, 10, 20, 136 pieces), rows of more
 * pieces than work-items (each holds two: 288 and 448 pieces), per-channel
 * scales, every activation and dtype. */
static void test_gemv_lanes(void **state)
{
    (void)state;
    gemm_dims pieces20 = { 4, 640, 200, 1, 2, 0, 0, 0, 1, 0, 0 }; /* team 32: 7 batches of 32 */
    check_w13(pieces20, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_SILU, 0, 32, MOEINT4_DTYPE_F16, 500);
    gemm_dims pieces136 = { 4, 4352, 40, 1, 3, 0, 0, 0, 3, 0, 0 }; /* team 256: batches of 4 */
    check_w13(pieces136, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SWIGLU_CLAMP, 1, 128,
              MOEINT4_DTYPE_BF16, 501);
    gemm_dims one_piece = { 4, 32, 96, 1, 2, 0, 0, 0, 1, 0, 0 }; /* team 8 */
    check_w13(one_piece, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_GELU, 0, 32, MOEINT4_DTYPE_F16, 502);
    gemm_dims channel = { 4, 256, 50, 1, 2, 0, 0, 0, 2, 0, 0 };
    check_w13(channel, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 0, -1, MOEINT4_DTYPE_F16, 503);
    gemm_dims two_each = { 3, 9216, 24, 1, 2, 0, 0, 0, 2, 0, 0 }; /* 288 pieces: two for some */
    check_w13(two_each, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SILU, 1, 64, MOEINT4_DTYPE_BF16, 504);

    gemm_dims w2_pieces = { 4, 200, 320, 1, 3, 0, 0, 0, 1, 0, 0 }; /* team 16 */
    check_w2(w2_pieces, 0, 32, MOEINT4_DTYPE_F16, 510);
    gemm_dims w2_long = { 4, 72, 4608, 1, 3, 0, 0, 0, 2, 0, 0 };
    check_w2(w2_long, 1, 128, MOEINT4_DTYPE_BF16, 511);
    gemm_dims w2_two_each = {
        3, 40, 14336, 1, 2, 0, 0, 0, 1, 0, 0
    }; /* Mixtral's rows: 448 pieces */
    check_w2(w2_two_each, 0, 128, MOEINT4_DTYPE_F16, 512);
    gemm_dims w2_channel = { 4, 100, 768, 1, 2, 0, 0, 0, 3, 0, 0 };
    check_w2(w2_channel, 1, -1, MOEINT4_DTYPE_BF16, 513);

    /* which rows fit, the teams, and the host's grid */
    assert_true(mi4_xpu_lanes_fit(14336, 128));
    assert_true(mi4_xpu_lanes_fit(16384, 32));
    assert_false(mi4_xpu_lanes_fit(16416, 32)); /* 513 pieces */
    assert_false(mi4_xpu_lanes_fit(616, 616));  /* not whole pieces */
    assert_false(mi4_xpu_lanes_fit(640, 16));   /* groups of half a piece */
    assert_int_equal(mi4_xpu_lanes_team(32), 8);
    assert_int_equal(mi4_xpu_lanes_team(768), 32);
    assert_int_equal(mi4_xpu_lanes_team(4096), 128);
    assert_int_equal(mi4_xpu_lanes_team(14336), 256);
    const size_t G = MI4_XPU_GROUP;
    /* Mixtral w13: 8 columns per group and batch, 1792 batches */
    assert_int_equal(mi4_xpu_gemv_lanes_width(14336, 4096, 2, 2, 2, 132), 132 * G);
    /* Qwen3 w2 (768 inputs: team 32, 64 rows a batch): 32 batches, 8 tiles */
    assert_int_equal(mi4_xpu_gemv_lanes_width(2048, 768, 1, 8, 2, 132), 32 * G);
}

/* The rows GEMVs (kernels/gemv_rows.cl) with few work-groups per tile,
 * so each walks several chunks, the last one past the end: teams of 4 to
 * 32 work-items, some idle (rows of 1 and 20 pieces), rows staged in
 * several blocks of activations, the last one partial (4352, 4608, 9216
 * and Mixtral's 14336 codes), per-channel scales, every activation and
 * dtype. */
static void test_gemv_rows(void **state)
{
    (void)state;
    gemm_dims pieces20 = { 4, 640, 200, 1, 2, 8, 0, 0, 0, 1, 0 }; /* 2 or 3 pieces a work-item */
    check_w13(pieces20, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_SILU, 0, 32, MOEINT4_DTYPE_F16, 520);
    gemm_dims blocks2 = { 4, 4352, 40, 1, 3, 16, 0, 0, 0, 3, 0 };
    check_w13(blocks2, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SWIGLU_CLAMP, 1, 128,
              MOEINT4_DTYPE_BF16, 521);
    gemm_dims one_piece = { 4, 32, 96, 1, 2, 4, 0, 0, 0, 1, 0 };
    check_w13(one_piece, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_GELU, 0, 32, MOEINT4_DTYPE_F16, 522);
    gemm_dims channel = { 4, 256, 50, 1, 2, 32, 0, 0, 0, 2, 0 };
    check_w13(channel, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 0, -1, MOEINT4_DTYPE_F16, 523);
    gemm_dims blocks3 = { 3, 9216, 24, 1, 2, 8, 0, 0, 0, 2, 0 };
    check_w13(blocks3, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SILU, 1, 64, MOEINT4_DTYPE_BF16, 524);

    gemm_dims w2_short = { 4, 200, 320, 1, 3, 4, 0, 0, 0, 1, 0 };
    check_w2(w2_short, 0, 32, MOEINT4_DTYPE_F16, 530);
    gemm_dims w2_blocks2 = { 4, 72, 4608, 1, 3, 8, 0, 0, 0, 2, 0 };
    check_w2(w2_blocks2, 1, 128, MOEINT4_DTYPE_BF16, 531);
    gemm_dims w2_mixtral = { 3, 40, 14336, 1, 2, 16, 0, 0, 0, 1, 0 };
    check_w2(w2_mixtral, 0, 128, MOEINT4_DTYPE_F16, 532);
    gemm_dims w2_channel = { 4, 100, 768, 1, 2, 32, 0, 0, 0, 3, 0 };
    check_w2(w2_channel, 1, -1, MOEINT4_DTYPE_BF16, 533);

    /* which rows fit, the team, and the host's grid */
    assert_true(mi4_xpu_rows_fit(14336, 128));
    assert_true(mi4_xpu_rows_fit(32, 32));
    assert_false(mi4_xpu_rows_fit(616, 616)); /* not whole pieces */
    assert_false(mi4_xpu_rows_fit(640, 16));  /* groups of half a piece */
    assert_false(mi4_xpu_rows_fit(0, 32));
    assert_int_equal(mi4_xpu_rows_team(0), 8);
    assert_int_equal(mi4_xpu_rows_team(32), 32);
    assert_int_equal(mi4_xpu_rows_team(64), 8);
    const size_t G = MI4_XPU_GROUP;
    /* Mixtral w13, team 8: 16 columns a chunk, 896 chunks a tile */
    assert_int_equal(mi4_xpu_gemv_rows_width(14336, 8, 2, 2, 4, 132), 264 * G);
    /* Qwen3 w2, team 8: 32 rows a chunk, 64 chunks a tile, 8 tiles */
    assert_int_equal(mi4_xpu_gemv_rows_width(2048, 8, 1, 8, 4, 132), 64 * G);
    assert_int_equal(mi4_xpu_gemv_rows_width(2048, 8, 1, 8, 1, 132), 17 * G);
}

/* The zero-point kernels (_zp: the GEMMs, the staged GEMVs, the rows
 * GEMVs) on AWQ and GPTQ asymmetric weights (zeros 0-16): the 16-byte path
 * with one and two staged blocks, the word path, per-channel scales, every
 * activation and dtype; run under each variant's build options (codes in
 * place, piece-major) by the test_xpu_kernels_variant_* entries. */
static void test_zero_point_kernels(void **state)
{
    (void)state;
    gemm_dims gemm = { 3, 640, 24, 20, 2, 8, 0, 0, 0, 0, 1 };
    check_w13(gemm, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 0, 32, MOEINT4_DTYPE_F16, 600);
    gemm.zp = 2, gemm.team = 16;
    check_w13(gemm, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SWIGLU_CLAMP, 1, -1, MOEINT4_DTYPE_BF16,
              601);
    gemm_dims words = { 3, 616, 40, 20, 2, 8, 0, 0, 0, 0, 2 }; /* 77 words, per-channel */
    check_w13(words, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_GELU, 0, -1, MOEINT4_DTYPE_F16, 602);
    words.gemv = 1, words.zp = 1;
    check_w13(words, MOEINT4_DTYPE_F16, MOEINT4_ACTIVATION_SILU, 0, -1, MOEINT4_DTYPE_F16, 603);
    gemm_dims gemv = { 4, 4352, 40, 1, 2, 16, 1, 0, 0, 0, 1 }; /* two staged blocks */
    check_w13(gemv, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 0, 128, MOEINT4_DTYPE_BF16, 604);
    gemm_dims rows = { 4, 4352, 40, 1, 3, 16, 0, 0, 0, 3, 2 };
    check_w13(rows, MOEINT4_DTYPE_BF16, MOEINT4_ACTIVATION_SILU, 1, 64, MOEINT4_DTYPE_F16, 605);
    rows.K = 640, rows.team = 8, rows.zp = 1;
    check_w13(rows, MOEINT4_DTYPE_F32, MOEINT4_ACTIVATION_GELU, 0, 32, MOEINT4_DTYPE_BF16, 606);

    gemm_dims w2 = { 4, 40, 320, 15, 3, 4, 0, 0, 0, 0, 1 };
    check_w2(w2, 0, 32, MOEINT4_DTYPE_F16, 610);
    w2.zp = 2, w2.gemv = 1;
    check_w2(w2, 1, 64, MOEINT4_DTYPE_BF16, 611);
    gemm_dims w2_words = { 4, 40, 328, 15, 3, 8, 0, 0, 0, 0, 1 };
    check_w2(w2_words, 0, -1, MOEINT4_DTYPE_F16, 612);
    gemm_dims w2_rows = { 3, 40, 14336, 1, 2, 16, 0, 0, 0, 1, 2 };
    check_w2(w2_rows, 0, 128, MOEINT4_DTYPE_F16, 613);
    w2_rows.N = 768, w2_rows.K = 104, w2_rows.team = 32, w2_rows.zp = 1;
    check_w2(w2_rows, 1, -1, MOEINT4_DTYPE_BF16, 614);
}

/* ---- combine ---- */

static void test_combine_is_exact_and_ordered(void **state)
{
    (void)state;
    enum { M = 13, TOPK = 4, K = 70, S = M * TOPK };
    mi4_xpu_runtime *rt = xt_runtime();
    tk_rng rng;
    tk_rng_seed(&rng, 300);
    float slot_out[S * K];
    int32_t slot_expert[S];
    for (int i = 0; i < S * K; ++i)
        slot_out[i] = (float)(tk_rng_normal(&rng) * 3.0);
    for (int s = 0; s < S; ++s)
        slot_expert[s] = tk_rng_uniform(&rng) < 0.3 ? -1 : (int32_t)(s % 5);
    for (int j = 0; j < TOPK; ++j)
        slot_expert[2 * TOPK + j] = -1; /* token 2 has no local slot: zeros */
    void *slot_out_d = xt_upload(rt, slot_out, sizeof slot_out);
    void *slot_expert_d = xt_upload(rt, slot_expert, sizeof slot_expert);
    int32_t no_errors[2] = { INT_MAX, INT_MAX }, bad_weight[2] = { INT_MAX, 5 };
    int gated = 1;
    void *no_errors_d = xt_upload(rt, no_errors, sizeof no_errors);
    void *bad_weight_d = xt_upload(rt, bad_weight, sizeof bad_weight);
    moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
    for (int d = 0; d < 3; ++d) {
        size_t esize = tk_dtype_size(dtypes[d]);
        size_t bytes = (size_t)M * K * esize;
        void *out_d = xt_upload(rt, NULL, bytes + 64); /* 64 poisoned bytes past the end */
        int tokens = M, topk = TOPK, k_dim = K, dt = (int)dtypes[d];
        mi4_xpu_arg args[] = { MI4_XPU_PTR(slot_expert_d), MI4_XPU_PTR(slot_out_d),
                               MI4_XPU_INT(tokens),        MI4_XPU_INT(topk),
                               MI4_XPU_INT(k_dim),         MI4_XPU_INT(dt),
                               MI4_XPU_PTR(bad_weight_d),  MI4_XPU_INT(gated),
                               MI4_XPU_PTR(out_d) };
        uint8_t got[M * K * 4 + 64];
        xt_launch(rt, MI4_XPU_COMBINE, K, M, 9, args); /* error record set: writes nothing */
        xt_download(rt, got, out_d, bytes + 64);
        for (size_t i = 0; i < bytes + 64; ++i)
            assert_int_equal(got[i], 0xff);
        args[6] = MI4_XPU_PTR(no_errors_d);
        xt_launch(rt, MI4_XPU_COMBINE, K, M, 9, args);
        xt_download(rt, got, out_d, bytes + 64);
        for (int m = 0; m < M; ++m)
            for (int k = 0; k < K; ++k) {
                float sum = 0.0f; /* the kernel's order: j ascending, in f32 */
                for (int j = 0; j < TOPK; ++j)
                    if (slot_expert[m * TOPK + j] >= 0)
                        sum += slot_out[(m * TOPK + j) * K + k];
                size_t i = (size_t)m * K + k;
                if (dtypes[d] == MOEINT4_DTYPE_F32) {
                    float value;
                    memcpy(&value, got + 4 * i, 4);
                    assert_memory_equal(&value, &sum, 4);
                } else {
                    uint16_t bits, want = dtypes[d] == MOEINT4_DTYPE_F16 ? tk_f32_to_f16(sum)
                                                                         : tk_f32_to_bf16(sum);
                    memcpy(&bits, got + 2 * i, 2);
                    assert_int_equal(bits, want);
                }
            }
        for (size_t i = bytes; i < bytes + 64; ++i)
            assert_int_equal(got[i], 0xff);
        rt->ops->free(rt, out_d);
    }
    rt->ops->free(rt, slot_out_d);
    rt->ops->free(rt, slot_expert_d);
    rt->ops->free(rt, no_errors_d);
    rt->ops->free(rt, bad_weight_d);
    rt->ops->destroy(rt);
}

/* ---- the oneDNN int4 path's scale transpose (its matmul needs oneDNN >= 3.5) ---- */

static void test_scales_transpose_for_onednn(void **state)
{
    (void)state;
    enum { E = 3, OUT = 40, G = 5 };
    mi4_xpu_runtime *rt = xt_runtime();
    tk_rng rng;
    tk_rng_seed(&rng, 400);
    uint16_t scales[E * OUT * G];
    for (int i = 0; i < E * OUT * G; ++i)
        scales[i] = (uint16_t)tk_rng_next(&rng);
    void *scales_d = xt_upload(rt, scales, sizeof scales);
    void *out_d = xt_upload(rt, NULL, OUT * G * 2 + 64);
    int expert = 2, out_features = OUT, groups = G;
    mi4_xpu_arg args[] = { MI4_XPU_PTR(scales_d), MI4_XPU_INT(expert), MI4_XPU_INT(out_features),
                           MI4_XPU_INT(groups), MI4_XPU_PTR(out_d) };
    xt_launch(rt, MI4_XPU_DNNL_SCALES_T, OUT, G, 5, args);
    uint16_t got[OUT * G + 32];
    xt_download(rt, got, out_d, sizeof got);
    for (int g = 0; g < G; ++g)
        for (int o = 0; o < OUT; ++o)
            assert_int_equal(got[g * OUT + o], scales[(expert * OUT + o) * G + g]);
    for (int i = OUT * G; i < OUT * G + 32; ++i)
        assert_int_equal(got[i], 0xffff);
    rt->ops->free(rt, scales_d);
    rt->ops->free(rt, out_d);
    rt->ops->destroy(rt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routing_sorts_by_expert),
        cmocka_unit_test(test_routing_flags_first_bad_id_and_weight),
        cmocka_unit_test(test_w13_every_activation_and_dtype),
        cmocka_unit_test(test_w13_word_path_and_long_rows),
        cmocka_unit_test(test_w2_router_weight_and_groups),
        cmocka_unit_test(test_gemv_walk),
        cmocka_unit_test(test_gemv_lanes),
        cmocka_unit_test(test_gemv_rows),
        cmocka_unit_test(test_zero_point_kernels),
        cmocka_unit_test(test_combine_is_exact_and_ordered),
        cmocka_unit_test(test_scales_transpose_for_onednn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
