/* The HIP backend's choice between the direct decode and the routed paths
 * for a few tokens (mi4_hip_direct_decode_serves, through the test extra
 * hip_test_direct_serves), and the int4 grouped GEMMs' tile by rows an
 * expert (mi4_hip_int4_gemm_tile, hip_test_int4_gemm_tile): host code
 * only, so it runs wherever the plugin loads, with or without a GPU (CI:
 * the AMD build). The direct decode reads
 * a slot's expert once per slot; where the routed paths it was measured
 * against exist it gives way to them once the experts it would read twice
 * weigh more than 100 MB (bench/results/hip-2026-12-06-s33.md); qw32 serves
 * from 5 rows an expert (hip-2026-12-06-s34.md). The layers
 * are the two bench presets' sizes (no weights are made).
 * Exits 77 (ctest: skipped) when the plugin is not built. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "moeint4.h"
#include "moeint4_backend.h"

typedef int (*direct_serves_fn)(int64_t tokens, int64_t slots, int experts, int hidden,
                                int intermediate, int int4, int routed_measured);

static direct_serves_fn direct_serves;

typedef const char *(*int4_gemm_tile_fn)(int64_t rows_per_expert, int routed, int ws_prefill);

static int4_gemm_tile_fn int4_gemm_tile;

enum { MIXTRAL_E = 8, MIXTRAL_K = 4096, MIXTRAL_N = 14336, MIXTRAL_TOPK = 2 };
enum { QWEN3_E = 128, QWEN3_K = 2048, QWEN3_N = 768, QWEN3_TOPK = 8 };

static int mixtral(int64_t tokens, int int4, int routed)
{
    return direct_serves(tokens, tokens * MIXTRAL_TOPK, MIXTRAL_E, MIXTRAL_K, MIXTRAL_N, int4,
                         routed);
}

static int qwen3(int64_t tokens, int int4, int routed)
{
    return direct_serves(tokens, tokens * QWEN3_TOPK, QWEN3_E, QWEN3_K, QWEN3_N, int4, routed);
}

/* Mixtral int4: M = 1 and 2 direct (2 and 4 slots: 11 and 61 MB read twice),
 * M = 3 and 4 routed (140 and 242 MB), M = 5 past the local experts. */
static void test_mixtral_int4(void **state)
{
    (void)state;
    assert_int_equal(mixtral(1, 1, 1), 1);
    assert_int_equal(mixtral(2, 1, 1), 1);
    assert_int_equal(mixtral(3, 1, 1), 0);
    assert_int_equal(mixtral(4, 1, 1), 0);
    assert_int_equal(mixtral(5, 1, 1), 0);
}

/* The BF16 mode holds 4x the bytes: from 2 tokens (244 MB) routed; one token
 * always direct. */
static void test_mixtral_bf16(void **state)
{
    (void)state;
    assert_int_equal(mixtral(1, 0, 1), 1);
    assert_int_equal(mixtral(2, 0, 1), 0);
    assert_int_equal(mixtral(4, 0, 1), 0);
}

/* Without the measured routed paths (AMD, NVIDIA before sm_90a) nothing
 * changes: direct up to as many slots as local experts. */
static void test_no_routed_paths(void **state)
{
    (void)state;
    for (int int4 = 0; int4 < 2; int4++) {
        for (int64_t m = 1; m <= 4; m++)
            assert_int_equal(mixtral(m, int4, 0), 1);
        assert_int_equal(mixtral(5, int4, 0), 0);
    }
}

/* Qwen3's small experts: int4 direct up to 8 tokens (64 slots: 32 MB read
 * twice), past 64 slots never; BF16 M = 8 (128 MB) routed, M = 4 direct. */
static void test_qwen3(void **state)
{
    (void)state;
    for (int64_t m = 1; m <= 8; m++)
        assert_int_equal(qwen3(m, 1, 1), 1);
    assert_int_equal(qwen3(9, 1, 1), 0);
    assert_int_equal(qwen3(9, 1, 0), 0);
    assert_int_equal(qwen3(4, 0, 1), 1);
    assert_int_equal(qwen3(8, 0, 1), 0);
}

/* More slots never bring the direct decode back (the extra bytes grow with
 * the slots), for any number of experts. */
static void test_monotonic(void **state)
{
    (void)state;
    const int experts[] = { 2, 8, 32, 128 };
    for (int e = 0; e < 4; e++)
        for (int int4 = 0; int4 < 2; int4++) {
            int last = 1;
            for (int64_t slots = 2; slots <= 80; slots++) {
                const int now = direct_serves(2, slots, experts[e], 4096, 14336, int4, 1);
                assert_true(now <= last);
                last = now;
            }
        }
}

/* The tile's name at `rows` rows an expert, "none" where the expansion to
 * BF16 serves. */
static const char *tile_at(int64_t rows, int routed, int ws_prefill)
{
    const char *name = int4_gemm_tile(rows, routed, ws_prefill);
    return name != NULL ? name : "none";
}

/* d8 up to 4 rows where it fits (q8 where not), qw32 from 5 to 24 rows
 * (q16 served 5-12 before session 34), qw64 to 95, qw128 to 128, q256 to
 * 1023, then the expansion unless the prepare kept q256. */
static void test_int4_gemm_tiles(void **state)
{
    (void)state;
    for (int64_t rows = 1; rows <= 4; rows++) {
        assert_string_equal(tile_at(rows, 1, 0), "d8");
        assert_string_equal(tile_at(rows, 0, 0), "q8");
    }
    const int64_t qw32_rows[] = { 5, 6, 8, 12, 13, 24 };
    for (int i = 0; i < 6; i++)
        for (int routed = 0; routed < 2; routed++)
            assert_string_equal(tile_at(qw32_rows[i], routed, 0), "qw32");
    assert_string_equal(tile_at(25, 1, 0), "qw64");
    assert_string_equal(tile_at(95, 1, 0), "qw64");
    assert_string_equal(tile_at(96, 1, 0), "qw128");
    assert_string_equal(tile_at(128, 1, 0), "qw128");
    assert_string_equal(tile_at(129, 1, 0), "q256");
    assert_string_equal(tile_at(1023, 1, 0), "q256");
    assert_string_equal(tile_at(1024, 1, 0), "none");
    assert_string_equal(tile_at(1024, 1, 1), "q256");
    assert_string_equal(tile_at(100000, 0, 1), "q256");
}

int main(void)
{
    direct_serves = (direct_serves_fn)moeint4_backend_get_proc_address(MOEINT4_BACKEND_HIP,
                                                                       "hip_test_direct_serves");
    int4_gemm_tile = (int4_gemm_tile_fn)moeint4_backend_get_proc_address(
        MOEINT4_BACKEND_HIP, "hip_test_int4_gemm_tile");
    if (direct_serves == NULL || int4_gemm_tile == NULL) {
        printf("the HIP plugin (a test build) is not loaded: %s\n", moeint4_last_error());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixtral_int4),
        cmocka_unit_test(test_mixtral_bf16),
        cmocka_unit_test(test_no_routed_paths),
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_monotonic),
        cmocka_unit_test(test_int4_gemm_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
