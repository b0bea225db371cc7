/* Every kernel table (scalar, AVX2, AVX-512, AVX512-BF16 and AMX where the
 * CPU has them; tile and tile_pair, which must agree bit for bit) against a
 * plain double loop over the natural-order codes: shapes with column tails
 * (per-channel rows of any length), every group size, 1..20 tokens (every
 * register block and remainder) and up to 72 (AMX passes of 1-4 tiles and
 * their last, shorter tile), rows equally spaced either way and not (the AMX
 * table's tile path and its fallback), f16 and bf16 scales, rows made from f32,
 * f16 and bf16 inputs and from activations (pack_block); the input scaling
 * and output rounding helpers bit for bit (the bf16 table's rows: within one
 * bf16 rounding, exact for bf16 inputs; amx-f16's two bf16 planes: exact for
 * f16 and bf16 inputs, within 2^-16 for f32). */
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

#define MAX_TOKENS 72

/* The table MOEINT4_CPU_KERNEL and the CPU should select. */
static const char *expected_selection(void)
{
    const int level = tk_cpu_best_level(tk_cpu_kernel_level(getenv("MOEINT4_CPU_KERNEL")));
    return level == 3 && !tk_cpu_has_vbmi2() ? "avx512bf16-novbmi2" : tk_cpu_kernel_name(level);
}

/* The selection follows the CPU and MOEINT4_CPU_KERNEL (every CPU). */
static void test_selection(void **state)
{
    (void)state;
    assert_string_equal(mi4_cpu_kernels_select()->name, expected_selection());
}

/* bf16 tables this CPU runs: the no-VBMI2 build, the VBMI2 one, the AMX
 * one and its F16 sibling */
static int bf16_tables(void)
{
    return tk_cpu_has_kernels(3) ? 1 + tk_cpu_has_vbmi2() + 2 * tk_cpu_has_kernels(4) : 0;
}

/* A table whose rows hold each value in two bf16 planes (its own F16 table) */
static int two_planes(const mi4_cpu_kernels *kernels)
{
    return kernels->f16_input && kernels->f16_input() == kernels;
}

/* Each table is tested where the CPU (and the OS) runs it; skipped, not
 * passed, elsewhere. */

static void test_avx2_present_where_supported(void **state)
{
    (void)state;
    if (!tk_cpu_has_kernels(1))
        tk_skip("this CPU or OS has no AVX2+FMA");
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    assert_int_equal(count, 2 + tk_cpu_has_kernels(2) + bf16_tables());
    assert_string_equal(tables[1]->name, "avx2");
}

static void test_avx512_present_where_supported(void **state)
{
    (void)state;
    if (!tk_cpu_has_kernels(2))
        tk_skip("this CPU or OS has no AVX-512 F/BW/DQ/VL");
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    assert_int_equal(count, 3 + bf16_tables());
    assert_string_equal(tables[2]->name, "avx512");
    assert_non_null(tables[2]->tile_pair);
}

static void test_avx512bf16_present_where_supported(void **state)
{
    (void)state;
    if (!tk_cpu_has_kernels(3))
        tk_skip("this CPU or OS has no AVX512-BF16");
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    /* the no-VBMI2 build runs on every BF16 CPU, the VBMI2 one where it can */
    assert_int_equal(count, 3 + bf16_tables());
    assert_string_equal(tables[3]->name, "avx512bf16-novbmi2");
    if (tk_cpu_has_vbmi2())
        assert_string_equal(tables[4]->name, "avx512bf16");
    for (int i = 3; i < count; i++) {
        assert_non_null(tables[i]->wide_input);
        assert_string_equal(tables[i]->wide_input()->name, "avx512");
    }
}

static void test_amx_present_where_supported(void **state)
{
    (void)state;
    if (!tk_cpu_has_kernels(4))
        tk_skip("this CPU or OS has no AMX-BF16 (or Linux did not grant the tile state)");
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    assert_int_equal(count, 7);
    assert_string_equal(tables[5]->name, "amx");
    assert_string_equal(tables[6]->name, "amx-f16");
    for (int i = 5; i < 7; i++) {
        assert_int_equal(tables[i]->pair_rows_min_tokens, 2);
        assert_ptr_equal(tables[i]->f16_input(), tables[6]);
    }
    assert_true(two_planes(tables[6]) && !two_planes(tables[5]));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(tables[i]->pair_rows_min_tokens, 0);
        assert_null(tables[i]->f16_input);
    }
}

static float scale_value(moeint4_dtype dtype, uint16_t bits)
{
    return dtype == MOEINT4_DTYPE_BF16 ? tk_bf16_to_f32(bits) : tk_f16_to_f32(bits);
}

/* The y of `tokens` rows through tile `which` (0, 1) of a 16-row pack, as
 * a plain double loop, within the f32 bound of the sums the kernel forms:
 * the bf16 table sums (128 + code) * x and takes (128 + zero) * sum(x) off
 * at the group's end, so its terms carry that offset. */
static void check_tile_rows(const mi4_cpu_kernels *kernels, const float *y, int which, int tokens,
                            const int *order, int in, int group_size, const uint8_t *codes,
                            const uint8_t *zeros, const float *scales, float raw[][1024],
                            double held_error)
{
    const int rows = 16;
    const char *name = kernels->name;
    int group_columns = group_size == -1 ? in : group_size;
    /* the bf16 tables (those that hand wider inputs on) sum 128 + code */
    double code_offset = kernels->wide_input ? 128.0 : 0.0;
    for (int t = 0; t < tokens; t++)
        for (int r = 0; r < 8; r++) {
            int row = which * 8 + r;
            double want = 0.0, magnitude = 0.0;
            for (int k = 0; k < in; k++) {
                int g = k / group_columns;
                double s = scales[g * rows + row];
                double q = codes[row * in + k], z = zeros[g * rows + row];
                want += (q - z) * s * raw[order[t]][k];
                magnitude += (q + z + 2 * code_offset) * s * fabs(raw[order[t]][k]);
            }
            /* f32 sums of `in` terms: |error| <= in * 2^-24 * sum|terms|, x2
             * margin; plus the relative error of the inputs as a row holds them */
            double bound = (2.0 * (in + 4) * 0x1p-24 + 2.0 * held_error) * magnitude;
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

/* How the test rows are made: scale_row from f32, bf16 or f16 values, or
 * pack_block from f32 activations. */
enum row_source { FROM_F32, FROM_BF16, FROM_F16, FROM_ACTIVATIONS, ROW_SOURCES };

/* Row t of `raw` (values rounded to the source dtype first) into x, group
 * sums into xsum; returns the relative error of the values the row holds
 * (the bf16 table's rows of non-bf16 values: 2^-8; else 0). */
static double make_row(const mi4_cpu_kernels *kernels, enum row_source source, float *raw, int in,
                       int group_columns, float *x, float *xsum)
{
    const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_BF16, MOEINT4_DTYPE_F16,
                                     MOEINT4_DTYPE_F32 };
    moeint4_dtype dtype = dtypes[source];
    uint16_t half[1024];
    for (int k = 0; k < in; k++) {
        if (dtype == MOEINT4_DTYPE_BF16) {
            half[k] = tk_f32_to_bf16(raw[k]);
            raw[k] = tk_bf16_to_f32(half[k]);
        } else if (dtype == MOEINT4_DTYPE_F16) {
            half[k] = tk_f32_to_f16(raw[k]);
            raw[k] = tk_f16_to_f32(half[k]);
        }
    }
    if (source == FROM_ACTIVATIONS) {
        int groups = (in + group_columns - 1) / group_columns;
        for (int g = 0; g < groups; g++)
            xsum[g] = 0.0f;
        for (int b = 0; b * 8 < in; b++) {
            float values[8] = { 0 };
            for (int c = 0; c < 8 && b * 8 + c < in; c++)
                values[c] = raw[b * 8 + c];
            xsum[b * 8 / group_columns] += kernels->pack_block(values, x, b);
        }
    } else {
        kernels->scale_row(dtype, dtype == MOEINT4_DTYPE_F32 ? (const void *)raw : half, in, 1.0f,
                           group_columns, x, xsum);
    }
    if (!kernels->wide_input)
        return 0.0;          /* the f32 tables hold every value exactly */
    if (two_planes(kernels)) /* hi + lo: f16 exactly, f32 to 16 bits */
        return source == FROM_F32 || source == FROM_ACTIVATIONS ? 0x1p-16 : 0.0;
    return source != FROM_BF16 ? 0x1p-8 : 0.0;
}

/* Two tiles (16 rows) through tile() each, against the double loop, then
 * through tile_pair(): the same bits. */
static void check_tile_shape(const mi4_cpu_kernels *kernels, int in, int group_size,
                             moeint4_dtype scales_dtype, enum row_source source, tk_rng *rng)
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

    const size_t row_floats = mi4_cpu_row_floats(kernels, geo.in_blocks);
    size_t stride = row_floats + 8; /* a stride wider than the row */
    float *x = aligned_alloc(64, sizeof(float) * stride * MAX_TOKENS);
    float *xsum = malloc(sizeof(float) * (size_t)groups * MAX_TOKENS);
    static float raw[MAX_TOKENS][1024];
    assert_non_null(x);
    assert_non_null(xsum);
    double held_error = 0.0;
    for (int t = 0; t < MAX_TOKENS; t++) {
        for (int k = 0; k < in; k++)
            raw[t][k] = (float)tk_rng_normal(rng);
        /* poison past the row: the kernel must read only its padded columns */
        for (size_t k = 0; k < stride; k++)
            x[(size_t)t * stride + k] = NAN;
        held_error = make_row(kernels, source, raw[t], in, group_columns, x + (size_t)t * stride,
                              xsum + (size_t)t * groups);
        for (size_t k = row_floats; k < stride; k++)
            x[(size_t)t * stride + k] = 0.0f; /* the stride's slack is never padding */
    }
    enum { Y = MAX_TOKENS * 8 };
    /* every register block and remainder, and 1-5 passes of 16-token tiles */
    static const int token_counts[] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                                        15, 16, 17, 18, 19, 20, 31, 32, 33, 48, 64, 65, 72 };
    for (size_t ti = 0; ti < sizeof token_counts / sizeof token_counts[0]; ti++) {
        int tokens = token_counts[ti];
        float y[2][Y], y_pair[2][Y];
        /* rows in reverse order (one negative stride), in order (the
         * stride), or reversed with the first two swapped (no one stride):
         * a kernel that assumed the stride, or one stride, fails */
        int arrangement = (tokens + (int)source) % 3, order[MAX_TOKENS];
        const float *row_ptrs[MAX_TOKENS], *sum_ptrs[MAX_TOKENS];
        for (int t = 0; t < tokens; t++)
            order[t] = arrangement == 1 ? t : tokens - 1 - t;
        if (arrangement == 2 && tokens > 2) {
            order[0] = tokens - 2;
            order[1] = tokens - 1;
        }
        for (int t = 0; t < tokens; t++) {
            row_ptrs[t] = x + (size_t)order[t] * stride;
            sum_ptrs[t] = xsum + (size_t)order[t] * groups;
        }
        mi4_cpu_tile_job jobs[2], pair[2];
        for (int which = 0; which < 2; which++) {
            poison(y[which], Y);
            poison(y_pair[which], Y);
            mi4_cpu_tile_job job = { pack + (size_t)which * geo.tile_bytes,
                                     &geo,
                                     scales_dtype == MOEINT4_DTYPE_BF16,
                                     row_ptrs,
                                     sum_ptrs,
                                     tokens,
                                     y[which] };
            jobs[which] = job;
            pair[which] = job;
            pair[which].y = y_pair[which];
            kernels->tile(&jobs[which]);
            check_tile_rows(kernels, y[which], which, tokens, order, in, group_size, codes, zeros,
                            scales, raw, held_error);
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
    const int shapes[][2] = { { 96, 32 }, { 192, 64 }, { 256, 128 }, { 1024, 128 }, { 20, -1 },
                              { 3, -1 },  { 44, -1 },  { 1000, -1 }, { 64, -1 },    { 32, 32 } };
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    tk_rng rng;
    tk_rng_seed(&rng, 21);
    for (int i = 0; i < count; i++)
        for (int source = 0; source < ROW_SOURCES; source++)
            for (int s = 0; s < 10; s++)
                check_tile_shape(tables[i], shapes[s][0], shapes[s][1],
                                 s % 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16,
                                 (enum row_source)source, &rng);
}

/* Where block `block` of a bf16 table's row starts (its hi plane; the lo
 * plane of a two-plane row 64 bytes on): the planes alternate by slices of
 * 4 blocks, 16 bytes a block. */
static size_t bf16_block_at(const mi4_cpu_kernels *kernels, int block)
{
    size_t planes = two_planes(kernels) ? 2 : 1;
    return (size_t)(block / 4) * 64 * planes + (size_t)(block % 4) * 16;
}

/* Column k of a bf16 table's row: a block holds (x0, x4, x3, x7, x2, x6,
 * x5, x1) as bf16, in each plane; the value is the planes' sum. */
static double bf16_row_value(const mi4_cpu_kernels *kernels, const float *row, int k)
{
    static const int position[8] = { 0, 7, 4, 2, 1, 6, 5, 3 }; /* of column c */
    int c = k % 8, at = position[c];
    double value = 0.0;
    for (int plane = 0; plane < (two_planes(kernels) ? 2 : 1); plane++) {
        uint16_t bits;
        memcpy(&bits, (const uint8_t *)row + bf16_block_at(kernels, k / 8) + 64 * plane + 2 * at,
               2);
        value += tk_bf16_to_f32(bits);
    }
    return value;
}

/* scale_row of the bf16 table: x * factor within one bf16 rounding (2^-8
 * relative), exactly with factor 1 and bf16 inputs; of the two-plane table
 * within 2^-16, exactly with factor 1 and f16 or bf16 inputs; zero padding;
 * group sums of the values held. */
static void check_bf16_row(const mi4_cpu_kernels *kernels, moeint4_dtype dtype, const float *src,
                           int n, int gc, float factor)
{
    int padded = (n + 7) / 8 * 8, groups = (n + gc - 1) / gc;
    float dst[264], sums[64];
    for (int k = 0; k < 264; k++)
        dst[k] = NAN;
    kernels->scale_row(dtype, src, n, factor, gc, dst, sums);
    const int exact_16 = factor == 1.0f && dtype != MOEINT4_DTYPE_F32;
    double relative = two_planes(kernels)                             ? (exact_16 ? 0.0 : 0x1p-16)
                      : factor == 1.0f && dtype == MOEINT4_DTYPE_BF16 ? 0.0
                                                                      : 0x1p-8;
    for (int g = 0; g < groups; g++) {
        double sum = 0.0, magnitude = 0.0;
        for (int k = g * gc; k < (g + 1) * gc && k < n; k++) {
            double want = (double)((float)tk_load(dtype, src, (size_t)k) * factor);
            double held = bf16_row_value(kernels, dst, k);
            if (!(fabs(held - want) <= relative * fabs(want)))
                fail_msg("%s dtype %d factor %g: column %d holds %.9g, want %.9g", kernels->name,
                         dtype, factor, k, held, want);
            sum += held;
            magnitude += fabs(held);
        }
        assert_true(fabs(sums[g] - sum) <= (gc + 2) * 0x1p-24 * magnitude);
    }
    for (int k = n; k < padded; k++)
        assert_true(bf16_row_value(kernels, dst, k) == 0.0);
    /* the next block, in each plane of its slice, is not written */
    const int next_planes = two_planes(kernels) && (padded / 8) % 4 != 0 ? 2 : 1;
    for (int plane = 0; plane < next_planes; plane++)
        if (!isnan(dst[(bf16_block_at(kernels, padded / 8) + 64 * (size_t)plane) / 4]))
            fail_msg("%s n %d: written past the row, plane %d", kernels->name, n, plane);
}

/* scale_row: every f32 variant writes the same scaled columns, bit for bit
 * (one rounding of x * factor, then an exact power of two), zero padding,
 * and group sums within the f32 bound of the exact sum; the bf16 table as
 * check_bf16_row says. */
static void test_scale_row(void **state)
{
    (void)state;
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
    const int shapes[][2] = { { 256, 64 }, { 37, 37 }, { 8, 8 }, { 3, 3 }, { 96, 32 } };
    tk_rng rng;
    tk_rng_seed(&rng, 22);
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 5; s++) {
            int n = shapes[s][0], gc = shapes[s][1];
            int padded = (n + 7) / 8 * 8, groups = (n + gc - 1) / gc;
            float src[256 * 4 / 4 * 4];
            tk_fill_activations(&rng, dtypes[d], (size_t)n, 2.0, src);
            float factor = (float)tk_rng_range(&rng, 0.1, 1.0);
            float dst[CPU_TEST_MAX_TABLES][264], sums[CPU_TEST_MAX_TABLES][64];
            for (int i = 0; i < count; i++) {
                if (tables[i]->wide_input) {
                    check_bf16_row(tables[i], dtypes[d], src, n, gc, factor);
                    check_bf16_row(tables[i], dtypes[d], src, n, gc, 1.0f);
                    continue;
                }
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
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    const moeint4_dtype dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16 };
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
    const mi4_cpu_kernels *tables[CPU_TEST_MAX_TABLES];
    int count = cpu_test_kernel_tables(tables, CPU_TEST_MAX_TABLES);
    tk_rng rng;
    tk_rng_seed(&rng, 24);
    enum { N = 256 };
    float gate[N], up[N];
    for (int i = 0; i < N; i++) {
        gate[i] = (float)(i < 16 ? -100.0 + 12.5 * i : tk_rng_normal(&rng) * 4.0);
        up[i] = (float)tk_rng_normal(&rng) * 2.0f;
    }
    const moeint4_activation kinds[] = { MOEINT4_ACTIVATION_SILU, MOEINT4_ACTIVATION_GELU,
                                         MOEINT4_ACTIVATION_SWIGLU_CLAMP };
    for (int kind = 0; kind < 3; kind++)
        for (int i = 0; i < count; i++) {
            mi4_cpu_activation act = { kinds[kind], 1.5f, 1.702f, 0.25f };
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
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_avx2_present_where_supported),
        cmocka_unit_test(test_avx512_present_where_supported),
        cmocka_unit_test(test_avx512bf16_present_where_supported),
        cmocka_unit_test(test_amx_present_where_supported),
        cmocka_unit_test(test_tile_kernels),
        cmocka_unit_test(test_scale_row),
        cmocka_unit_test(test_store_row),
        cmocka_unit_test(test_activate),
    };
    return tk_cmocka_run("cpu kernels", tests, sizeof tests / sizeof tests[0], NULL, NULL, argc,
                         argv);
}
