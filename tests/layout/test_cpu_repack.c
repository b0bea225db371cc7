/* The CPU backend's tile layout (layout/cpu_repack.h), checked byte for byte
 * against the layout computed here from the test kit's natural-order codes,
 * zeros and scale bits: every format and group size, f16 and bf16 scales,
 * and hand-made shapes whose rows and columns are not multiples of 8 (the
 * padding must be zero whatever the destination held). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "layout/cpu_repack.h"
#include "testkit.h"

/* The layout as the header documents it, written out independently. */
typedef struct expected_layout {
    size_t in_blocks, groups, group_blocks, tiles, scales_at, zeros_at, tile_bytes;
} expected_layout;

static expected_layout expected_for(int in, int rows, int group_size)
{
    expected_layout e;
    e.in_blocks = ((size_t)in + 7) / 8;
    e.groups = group_size == -1 ? 1 : (size_t)(in / group_size);
    e.group_blocks = group_size == -1 ? e.in_blocks : (size_t)group_size / 8;
    e.tiles = ((size_t)rows + 7) / 8;
    e.scales_at = e.in_blocks * 32;
    e.zeros_at = e.scales_at + e.groups * 16;
    e.tile_bytes = (e.zeros_at + e.groups * 8 + 63) / 64 * 64;
    return e;
}

/* codes [rows][in], zeros/scale bits [groups][rows] */
static uint8_t *expected_bytes(const expected_layout *e, int in, int rows, const uint8_t *codes,
                               const uint8_t *zeros, const uint16_t *scale_bits)
{
    uint8_t *out = calloc(e->tiles * e->tile_bytes, 1);
    assert_non_null(out);
    for (int row = 0; row < rows; row++) {
        uint8_t *tile = out + (size_t)(row / 8) * e->tile_bytes;
        int r = row % 8;
        for (int col = 0; col < in; col++) {
            /* block col/8, word r (4 bytes little-endian), nibble col%8 */
            size_t byte = (size_t)(col / 8) * 32 + (size_t)r * 4 + (size_t)(col % 8) / 2;
            int shift = (col % 2) * 4;
            tile[byte] |= (uint8_t)((codes[(size_t)row * in + col] & 15) << shift);
        }
        for (size_t g = 0; g < e->groups; g++) {
            uint16_t bits = scale_bits[g * rows + row];
            tile[e->scales_at + (g * 8 + r) * 2] = (uint8_t)(bits & 0xff);
            tile[e->scales_at + (g * 8 + r) * 2 + 1] = (uint8_t)(bits >> 8);
            tile[e->zeros_at + g * 8 + r] = zeros[g * rows + row];
        }
    }
    return out;
}

static float bits_to_float(moeint4_dtype dtype, uint16_t bits)
{
    return dtype == MOEINT4_DTYPE_BF16 ? tk_bf16_to_f32(bits) : tk_f16_to_f32(bits);
}

/* Repacks natural arrays and compares with the expected bytes. */
static void check_repack(int in, int rows, int group_size, moeint4_dtype dtype,
                         const uint8_t *codes, const uint8_t *zeros, const uint16_t *scale_bits)
{
    expected_layout e = expected_for(in, rows, group_size);
    mi4_cpu_pack_geometry geo = mi4_cpu_pack_geometry_make(in, rows, group_size);
    assert_int_equal(geo.in_blocks, e.in_blocks);
    assert_int_equal(geo.num_groups, e.groups);
    assert_int_equal(geo.group_blocks, e.group_blocks);
    assert_int_equal(geo.tiles, e.tiles);
    assert_int_equal(geo.scales_offset, e.scales_at);
    assert_int_equal(geo.zeros_offset, e.zeros_at);
    assert_int_equal(geo.tile_bytes, e.tile_bytes);
    assert_int_equal(mi4_cpu_pack_bytes(&geo), e.tiles * e.tile_bytes);

    float *scales = malloc(sizeof(float) * e.groups * (size_t)rows);
    assert_non_null(scales);
    for (size_t i = 0; i < e.groups * (size_t)rows; i++)
        scales[i] = bits_to_float(dtype, scale_bits[i]);
    uint8_t *want = expected_bytes(&e, in, rows, codes, zeros, scale_bits);
    uint8_t *got = tk_poisoned_alloc(e.tiles * e.tile_bytes);
    assert_non_null(got);
    mi4_cpu_repack(&geo, codes, (size_t)in, zeros, scales, (size_t)rows, dtype, got);
    for (size_t i = 0; i < e.tiles * e.tile_bytes; i++)
        if (got[i] != want[i])
            fail_msg(
                "in %d rows %d group %d: byte %zu (tile %zu, offset %zu) = 0x%02x, want 0x%02x", in,
                rows, group_size, i, i / e.tile_bytes, i % e.tile_bytes, got[i], want[i]);
    free(scales);
    free(want);
    free(got);
}

static void test_every_format_and_group(void **state)
{
    (void)state;
    const moeint4_format formats[] = { MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_FORMAT_GPTQ_ASYM,
                                       MOEINT4_FORMAT_AWQ };
    const int groups[] = { 32, 64, 128, -1 };
    tk_rng rng;
    tk_rng_seed(&rng, 11);
    for (int f = 0; f < 3; f++)
        for (int g = 0; g < 4; g++)
            for (int zo = 0; zo <= (formats[f] == MOEINT4_FORMAT_GPTQ_ASYM); zo++) {
                moeint4_dtype dtype = (f + g) % 2 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16;
                int in = groups[g] == -1 ? 40 : 2 * (groups[g] > 0 ? groups[g] : 8) + 128;
                int out = 24 + 8 * g;
                tk_matrix m;
                assert_int_equal(tk_matrix_random(&m, formats[f], zo, 2, in, out, groups[g], dtype,
                                                  0.01, 0, &rng),
                                 0);
                for (int expert = 0; expert < 2; expert++)
                    check_repack(in, out, groups[g], dtype, m.codes + (size_t)expert * out * in,
                                 m.zeros + (size_t)expert * m.num_groups * out,
                                 m.scales + (size_t)expert * m.num_groups * out);
                tk_matrix_free(&m);
            }
}

/* Shapes no checkpoint format produces but the layout must still pad right:
 * rows and columns that are not multiples of 8, a single row. */
static void test_ragged_shapes(void **state)
{
    (void)state;
    const int shapes[][2] = { { 20, 13 }, { 3, 1 }, { 64, 9 }, { 33, 17 }, { 8, 8 } };
    tk_rng rng;
    tk_rng_seed(&rng, 12);
    for (int s = 0; s < 5; s++) {
        int in = shapes[s][0], rows = shapes[s][1];
        uint8_t *codes = malloc((size_t)in * rows);
        uint8_t *zeros = malloc((size_t)rows);
        uint16_t *bits = malloc(sizeof(uint16_t) * (size_t)rows);
        assert_non_null(codes);
        assert_non_null(zeros);
        assert_non_null(bits);
        for (int i = 0; i < in * rows; i++)
            codes[i] = (uint8_t)tk_rng_below(&rng, 16);
        for (int i = 0; i < rows; i++) {
            zeros[i] = (uint8_t)tk_rng_below(&rng, 17);
            bits[i] = tk_f32_to_f16((float)tk_rng_range(&rng, 0.001, 2.0));
        }
        check_repack(in, rows, -1, MOEINT4_DTYPE_F16, codes, zeros, bits);
        free(codes);
        free(zeros);
        free(bits);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_format_and_group),
        cmocka_unit_test(test_ragged_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
