/* Every kernel table (scalar, AVX2 and AVX-512 where the CPU has them; tile
 * and tile_pair, which must agree bit for bit) against a plain
 * double loop over the natural-order codes: shapes with column tails
 * (per-channel rows of any length), every group size, 1..20 tokens (every
 * register block and remainder), f16 and bf16 scales; the input scaling and
 * output rounding helpers bit for bit. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tk_cmocka.h"

#include "backends/cpu/cpu_kernels.h"
#include "cpu_test_util.h"
#include "layout/cpu_repack.h"
#include "testkit.h"

#define MAX_TOKENS 20

/* GCC's own view of the CPU, independent of cpu_features.h's CPUID code
 * (clang's builtin knows no "f16c"; AVX's F16C comes with AVX2 parts). */
static int builtin_has(int avx512)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (avx512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    (void)avx512;
    return 0;
#endif
}

static void test_avx2_present_where_supported(void **state)
{
    (void)state;
    if (!builtin_has(0))
        tk_skip("this CPU or OS has no AVX2+FMA");
    const mi4_cpu_kernels *tables[4];
    int count = cpu_test_kernel_tables(tables, 4);
    assert_int_equal(count, builtin_has(1) ? 3 : 2);
    assert_string_equal(tables[1]->name, "avx2");
    const char *forced = getenv("MOEINT4_CPU_KERNEL");
    const char *want = forced && strcmp(forced, "scalar") == 0 ? "scalar"
                       : builtin_has(1) && !(forced && strcmp(forced, "avx2") == 0) ? "avx512"
                                                                                       : "avx2";
    assert_string_equal(mi4_cpu_kernels_select()->name, want);
}

/* Skipped, not passed, where the CPU (or the OS) has no AVX-512. */
static void test_avx512_present_where_supported(void **state)
{
    (void)state;
    if (!builtin_has(1))
        tk_skip("this CPU or OS has no AVX-512 F/BW/DQ/VL");
    const mi4_cpu_kernels *tables[4];
    int count = cpu_test_kernel_tables(tables, 4);
    assert_int_equal(count, 3);
    assert_string_equal(tables[2]->name, "avx512");
    assert_non_null(tables[2]->tile_pair);
}

static float scale_value(moeint4_dtype dtype, uint16_t bits)
{
    return dtype == MOEINT4_DTYPE_BF16 ? tk_bf16_to_f32(bits) : tk_f16_to_f32(bits);
}

/* The y of `tokens` rows through tile `which` (0, 1) of a 16-row pack, as
 * a plain double loop, within the f32 bound. */
static void check_tile_rows(const char *name, const float *y, int which, int tokens, int in,
                            int group_size, const uint8_t *codes, const uint8_t *zeros,
                            const float *scales, float raw[][1024])
{
    const int rows = 16;
    int group_columns = group_size == -1 ? in : group_size;
    for (int t = 0; t < tokens; t++)
        for (int r = 0; r < 8; r++) {
            int row = which * 8 + r;
            double want = 0.0, magnitude = 0.0;
            for (int k = 0; k < in; k++) {
                int g = k / group_columns;
                double s = scales[g * rows + row];
                double q = codes[row * in + k], z = zeros[g * rows + row];
                want += (q - z) * s * raw[tokens - 1 - t][k];
                magnitude += (q + z) * s * fabs(raw[tokens - 1 - t][k]);
            }
            /* f32 sums of `in` terms: |error| <= in * 2^-24 * sum|terms|, x2 margin */
            double bound = 2.0 * (in + 4) * 0x1p-24 * magnitude;
            double got = y[t * 8 + r];
            if (!(fabs(got - want) <= bound))
                fail_msg("%s tile %d in %d group %d tokens %d: y[%d][%d] = %.9g, want %.9g "
                         "(bound %g)",
                         name, which, in, group_size, tokens, t, r, got, want, bound);
        }
}

static void poison(float *y, int count)
{
    for (int i = 0; i < count; i++)
        y[i] = NAN;
}

/* Two tiles (16 rows) through tile() each, against the double loop, then
 * through tile_pair(): the same bits. */
static void check_tile_shape(const mi4_cpu_kernels *kernels, int in, int group_size,
                             moeint4_dtype scales_dtype, tk_rng *rng)
{
    const int rows = 16;
    int groups = group_size == -1 ? 1 : in / group_size;
    int group_columns = group_size == -1 ? in : group_size;
    static uint8_t codes[16 * 1024];
    uint8_t zeros[16 * 32];
    uint16_t scale_bits[16 * 32];
    float scales[16 * 32];
    assert_true(in <= 1024 && groups <= 32);
    for (int i = 0; i < rows * in; i++)
        codes[i] = (uint8_t)tk_rng_below(rng, 16);
    for (int i = 0; i < rows * groups; i++) {
        zeros[i] = (uint8_t)tk_rng_below(rng, 17);
        float s = (float)tk_rng_range(rng, 0.01, 0.1);
        scale_bits[i] = scales_dtype == MOEINT4_DTYPE_BF16 ? tk_f32_to_bf16(s) : tk_f32_to_f16(s);
        scales[i] = scale_value(scales_dtype, scale_bits[i]);
    }
    mi4_cpu_pack_geometry geo = mi4_cpu_pack_geometry_make(in, rows, group_size);
    uint8_t *pack = aligned_alloc(64, mi4_cpu_pack_bytes(&geo));
    assert_non_null(pack);
    mi4_cpu_repack(&geo, codes, (size_t)in, zeros, scales, (size_t)rows, scales_dtype, pack);

    size_t stride = (size_t)geo.in_blocks * 8 + 8; /* a stride wider than the row */
    float *x = aligned_alloc(64, sizeof(float) * stride * MAX_TOKENS);
    float *xsum = malloc(sizeof(float) * (size_t)groups * MAX_TOKENS);
    static float raw[MAX_TOKENS][1024];
    assert_non_null(x);
    assert_non_null(xsum);
    for (int t = 0; t < MAX_TOKENS; t++) {
        for (int k = 0; k < in; k++)
            raw[t][k] = (float)tk_rng_normal(rng);
        /* poison past the row: the kernel must read only its padded columns */
        for (size_t k = 0; k < stride; k++)
            x[(size_t)t * stride + k] = NAN;
        kernels->scale_row(MOEINT4_DTYPE_F32, raw[t], in, 1.0f, group_columns,
                           x + (size_t)t * stride, xsum + (size_t)t * groups);
        for (size_t k = (size_t)geo.in_blocks * 8; k < stride; k++)
            x[(size_t)t * stride + k] = 0.0f; /* the stride's slack is never padding */
    }
    enum { Y = MAX_TOKENS * 8 };
    for (int tokens = 1; tokens <= MAX_TOKENS; tokens++) {
        float y[2][Y], y_pair[2][Y];
        /* rows in reverse order, so a kernel that assumed one stride fails */
        const float *row_ptrs[MAX_TOKENS], *sum_ptrs[MAX_TOKENS];
        for (int t = 0; t < tokens; t++) {
            row_ptrs[t] = x + (size_t)(tokens - 1 - t) * stride;
            sum_ptrs[t] = xsum + (size_t)(tokens - 1 - t) * groups;
        }
        mi4_cpu_tile_job jobs[2], pair[2];
        for (int which = 0; which < 2; which++) {
            poison(y[which], Y);
            poison(y_pair[which], Y);
            mi4_cpu_tile_job job = {pack + (size_t)which * geo.tile_bytes, &geo,
                                    scales_dtype == MOEINT4_DTYPE_BF16, row_ptrs, sum_ptrs,
                                    tokens, y[which]};
            jobs[which] = job;
            pair[which] = job;
            pair[which].y = y_pair[which];
            kernels->tile(&jobs[which]);
            check_tile_rows(kernels->name, y[which], which, tokens, in, group_size, codes, zeros,
                            scales, raw);
        }
        mi4_cpu_run_tile_pair(kernels, &pair[0], &pair[1]);
        for (int which = 0; which < 2; which++) {
            if (memcmp(y[which], y_pair[which], sizeof(float) * (size_t)tokens * 8) != 0)
                fail_msg("%s in %d group %d tokens %d: tile_pair's tile %d differs from tile()",
                         kernels->name, in, group_size, tokens, which);
            for (int i = tokens * 8; i < Y; i++) /* nothing written past the job's tokens */
                assert_true(isnan(y[which][i]) && isnan(y_pair[which][i]));
        }
    }
    free(pack);
    free(x);
    free(xsum);
}

static void test_tile_kernels(void **state)
{
    (void)state;
    const int shapes[][2] = {{96, 32}, {192, 64}, {256, 128}, {1024, 128}, {20, -1}, {3, -1},
                             {44, -1}, {1000, -1}, {64, -1}, {32, 32}};
    const mi4_cpu_kernels *tables[4];
    int count = cpu_test_kernel_tables(tables, 4);
    tk_rng rng;
    tk_rng_seed(&rng, 21);
    for (int i = 0; i < count; i++)
        for (int s = 0; s < 10; s++)
            check_tile_shape(tables[i], shapes[s][0], shapes[s][1],
                             s % 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16, &rng);
}

/* scale_row: every variant writes the same scaled columns, bit for bit (one
 * rounding of x * factor, then an exact power of two), zero padding, and
 * group sums within the f32 bound of the exact sum. */
static void test_scale_row(void **state)
{
    (void)state;
    const mi4_cpu_kernels *tables[4];
    int count = cpu_test_kernel_tables(tables, 4);
    const moeint4_dtype dtypes[] = {MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16};
    const int shapes[][2] = {{256, 64}, {37, 37}, {8, 8}, {3, 3}, {96, 32}};
    tk_rng rng;
    tk_rng_seed(&rng, 22);
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 5; s++) {
            int n = shapes[s][0], gc = shapes[s][1];
            int padded = (n + 7) / 8 * 8, groups = (n + gc - 1) / gc;
            float src[256 * 4 / 4 * 4];
            tk_fill_activations(&rng, dtypes[d], (size_t)n, 2.0, src);
            float factor = (float)tk_rng_range(&rng, 0.1, 1.0);
            float dst[4][264], sums[4][64];
            for (int i = 0; i < count; i++) {
                for (int k = 0; k < 264; k++)
                    dst[i][k] = NAN;
                tables[i]->scale_row(dtypes[d], src, n, factor, gc, dst[i], sums[i]);
                for (int k = 0; k < padded; k++) {
                    float v = k < n ? (float)tk_load(dtypes[d], src, (size_t)k) * factor : 0.0f;
                    int c = k % 8;
                    float want = c == 7 ? v : v * ldexpf(1.0f, -4 * c);
                    assert_memory_equal(&dst[i][k], &want, sizeof want);
                }
                assert_true(isnan(dst[i][padded]));
                for (int g = 0; g < groups; g++) {
                    double want = 0.0, magnitude = 0.0;
                    for (int k = g * gc; k < (g + 1) * gc && k < n; k++) {
                        double v = (double)((float)tk_load(dtypes[d], src, (size_t)k) * factor);
                        want += v;
                        magnitude += fabs(v);
                    }
                    assert_true(fabs(sums[i][g] - want) <= (gc + 2) * 0x1p-24 * magnitude);
                }
            }
        }
}

/* store_row: f32 -> dtype rounds once to nearest even in every variant,
 * including subnormal f16 results and overflow to infinity. */
static void test_store_row(void **state)
{
    (void)state;
    const mi4_cpu_kernels *tables[4];
    int count = cpu_test_kernel_tables(tables, 4);
    const moeint4_dtype dtypes[] = {MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16};
    tk_rng rng;
    tk_rng_seed(&rng, 23);
    enum { N = 77 };
    float src[N];
    for (int k = 0; k < N; k++) {
        double magnitude = k % 7 == 0 ? 1e-6 : k % 11 == 0 ? 7e4 : 3.0;
        src[k] = (float)(tk_rng_normal(&rng) * magnitude);
    }
    for (int d = 0; d < 3; d++)
        for (int i = 0; i < count; i++) {
            uint8_t got[N * 4 + 4];
            memset(got, 0xa5, sizeof got);
            tables[i]->store_row(dtypes[d], src, N, got);
            for (int k = 0; k < N; k++) {
                if (dtypes[d] == MOEINT4_DTYPE_F32) {
                    assert_memory_equal(got + 4 * k, &src[k], 4);
                } else {
                    uint16_t want = dtypes[d] == MOEINT4_DTYPE_F16 ? tk_f32_to_f16(src[k])
                                                                   : tk_f32_to_bf16(src[k]);
                    uint16_t have;
                    memcpy(&have, got + 2 * k, 2);
                    if (have != want)
                        fail_msg("%s dtype %d: %g -> 0x%04x, want 0x%04x", tables[i]->name,
                                 dtypes[d], src[k], have, want);
                }
            }
            size_t end = (size_t)N * tk_dtype_size(dtypes[d]);
            assert_int_equal(got[end], 0xa5);
        }
}

/* activate: SiLU, GELU and clamped SwiGLU against double precision, over
 * gates from -100 to 100 (exp overflow/underflow sides) and every variant. */
static void test_activate(void **state)
{
    (void)state;
    const mi4_cpu_kernels *tables[4];
    int count = cpu_test_kernel_tables(tables, 4);
    tk_rng rng;
    tk_rng_seed(&rng, 24);
    enum { N = 256 };
    float gate[N], up[N];
    for (int i = 0; i < N; i++) {
        gate[i] = (float)(i < 16 ? -100.0 + 12.5 * i : tk_rng_normal(&rng) * 4.0);
        up[i] = (float)tk_rng_normal(&rng) * 2.0f;
    }
    const moeint4_activation kinds[] = {MOEINT4_ACTIVATION_SILU, MOEINT4_ACTIVATION_GELU,
                                        MOEINT4_ACTIVATION_SWIGLU_CLAMP};
    for (int kind = 0; kind < 3; kind++)
        for (int i = 0; i < count; i++) {
            mi4_cpu_activation act = {kinds[kind], 1.5f, 1.702f, 0.25f};
            float out[N];
            memcpy(out, gate, sizeof out);
            tables[i]->activate(&act, out, up, N);
            for (int j = 0; j < N; j++) {
                double g = gate[j], u = up[j], want;
                if (kinds[kind] == MOEINT4_ACTIVATION_SILU) {
                    want = g / (1.0 + exp(-g)) * u;
                } else if (kinds[kind] == MOEINT4_ACTIVATION_GELU) {
                    want = 0.5 * g * erfc(-g / sqrt(2.0)) * u;
                } else {
                    double gc = fmin(g, (double)act.limit);
                    double uc = fmin(fmax(u, -(double)act.limit), (double)act.limit);
                    want = (uc + (double)act.beta) * gc / (1.0 + exp(-(double)act.alpha * gc));
                }
                /* a few f32 roundings: 8 ulp relative, plus what underflows;
                 * the rounding of an exp argument z grows |z| times in e^z,
                 * that of erfc's x = -g/sqrt2 2x^2 = g^2 times */
                double ulps = 8.0 + (kinds[kind] == MOEINT4_ACTIVATION_GELU ? g * g
                                     : kinds[kind] == MOEINT4_ACTIVATION_SILU
                                         ? fabs(g)
                                         : fabs((double)act.alpha * fmin(g, (double)act.limit)));
                double bound = ulps * 0x1p-24 * fabs(want) + 1e-30;
                if (!(fabs(out[j] - want) <= bound))
                    fail_msg("%s activation %d: act(%g, %g) = %.9g, want %.9g", tables[i]->name,
                             kinds[kind], g, u, out[j], want);
            }
        }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2_present_where_supported),
        cmocka_unit_test(test_avx512_present_where_supported),
        cmocka_unit_test(test_tile_kernels),
        cmocka_unit_test(test_scale_row),
        cmocka_unit_test(test_store_row),
        cmocka_unit_test(test_activate),
    };
    return tk_cmocka_run("cpu kernels", tests, sizeof tests / sizeof tests[0], NULL, NULL, argc,
                         argv);
}
