/* The row tile of a forward: which GEMM configuration (mi4_hip_tile_config)
 * serves a batch, from its tokens, slots and the weights' experts. */
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_internal.h"

/* What the direct decode reads beyond the routed paths, on average: it
 * reads a slot's expert once per slot, they read each expert hit once, and
 * `slots` slots routed uniformly over E local experts hit E (1 - (1 - 1/E)^
 * slots) of them. Bytes of the weights as held (int4 codes, or BF16). */
static double direct_extra_bytes(int64_t slots, const mi4_hip_weights *w)
{
    const double experts = w->num_local_experts > 0 ? w->num_local_experts : 1;
    double missed = 1.0; /* (1 - 1/E)^slots: the direct decode takes at most 64 slots */
    for (int64_t s = 0; s < slots; s++)
        missed *= 1.0 - 1.0 / experts;
    const double hit = experts * (1.0 - missed);
    const double expert = 3.0 * w->hidden_size * w->intermediate_size * (w->int4 ? 0.5 : 2.0);
    return ((double)slots - hit) * expert;
}

/* Above this many extra bytes the routed paths' fixed costs (routing,
 * combine, tiles of an expert's few rows) pay. Measured on an H100
 * (bench/results/hip-2026-12-06-s33.md, calls 4 and 5; the routed paths
 * against the direct decode): Mixtral int4 M = 2 (61 MB extra) 5.5%
 * slower, M = 3 (140 MB) 8.8% and M = 4 (242 MB) 16.5% faster; Mixtral
 * BF16 M = 2 (244 MB) 2.1% and M = 3, 4 22% faster; Qwen3 int4 M = 8
 * (32 MB) 29% slower, Qwen3 BF16 M = 8 (128 MB) a tie. On an H200
 * (hip-2026-12-06-s34.md, call 3) the routed paths took Mixtral M = 3 and
 * 4 6.8% and 18.2% below the direct decode in int4, 11.9% and 18.2% in
 * BF16; its M = 2 is unmeasured. Only where those routed paths exist
 * (sm_90a). */
#define MI4_DIRECT_MAX_EXTRA_BYTES 100e6

int mi4_hip_direct_decode_serves(int64_t tokens, int64_t slots, const mi4_hip_weights *w,
                                 int routed_measured)
{
    return slots <= 64 &&
           (tokens == 1 ||
            (slots <= w->num_local_experts &&
             (!routed_measured || direct_extra_bytes(slots, w) <= MI4_DIRECT_MAX_EXTRA_BYTES)));
}

/* The int4 grouped GEMMs' tile (sm_90a, int4 weights they serve) for
 * rows_per_expert rows an expert; routed: the routed decode GEMVs fit;
 * ws_prefill: MOEINT4_HIP_INT4_PREFILL=q256 at prepare. -1 where the
 * weights are expanded to BF16 instead. */
int mi4_hip_int4_gemm_tile(int64_t rows_per_expert, int routed, int ws_prefill)
{
    /* Measured on the H200: q8 best at 2 and 4 rows per expert, q32 at 16
     * and 32 (bench/results/hip-int4-tiles-2026-12-01.md; now the
     * warp-specialized qw32 at 5-24 rows, below); the persistent
     * warp-specialized tiles from 25 rows: qw64, then qw128 from 96 to 128
     * rows and q256 to 1023 (bench/results/hip-2026-12-04-queued.md; q256
     * had been 16-19% faster than q128 at 128 rows:
     * bench/results/hip-2026-12-04-q256-v2.md); from 1024 rows the
     * expansion to BF16 and the BF16 wgmma tile (-1 here; Mixtral, 512 /
     * 640 / 768 / 896 rows: q256 8.6 / 6.5 / 3.4 / 1.7% faster,
     * bench/results/hip-2026-12-05-s26.md; 1024 rows: 5.5% slower,
     * hip-2026-12-05-s25.md). MOEINT4_HIP_INT4_PREFILL=q256 at prepare
     * keeps q256 from 1024 rows too: no expansion workspace. */
    /* the routed decode GEMVs (d8) where experts see up to 4 rows:
     * measured on the H200 (bench/results/hip-2026-12-02-routed.md; at 3
     * and 4 rows 8-11% faster than q8, at 6 and 8 rows 7-39% slower:
     * bench/results/hip-2026-12-03-scales.md, call 2) */
    if (routed && rows_per_expert <= MI4_ROUTED_MAX_ROWS_PER_EXPERT)
        return MI4_TILE_D8;
    /* from 25 rows the warp-specialized qw64 (Mixtral M = 256 and Qwen3
     * M = 1024, 64 rows an expert: 24% and 22% faster than q128; at 16
     * rows 15% slower than q32; at 32 rows 15-16% faster for Mixtral,
     * bench/results/hip-2026-12-04-queued.md, hip-2026-12-04-s20.md, and
     * 9.6% for Qwen3, hip-2026-12-05-s26.md, where session 20 had
     * measured it 3-9% slower). From 5 rows qw32: both GEMMs on the
     * warp-specialized kernel at 32 rows (two blocks an SM); its gemm2 was
     * 18% faster for Mixtral at 16 rows, its gemm13 6% (Mixtral M = 64
     * forward; bench/results/hip-2026-12-05-s25.md); at 5 to 12 rows,
     * where q16 served, 11.5-21.7% faster for Mixtral and 4.3-9.1% for
     * Qwen3 on an H100 (hip-2026-12-06-s34.md, call 7; session 20 had
     * q16 ahead at 8 rows on the H200, before qw32's gemm13 moved to the
     * warp-specialized kernel). */
    if (rows_per_expert < MI4_Q256_MIN_ROWS_PER_EXPERT)
        return rows_per_expert <= 4    ? MI4_TILE_Q8
               : rows_per_expert <= 24 ? MI4_TILE_QW32
                                       : MI4_TILE_QW64;
    /* qw128 22-23% faster than q256 at 96 rows, even at 128, 1-5% slower at
     * 256 and more (bench/results/hip-2026-12-04-queued.md, call 7; on
     * 2026-12-05 for Mixtral 6.2% slower at 192 rows, 7.7% faster at 256:
     * hip-2026-12-05-s26.md, too few points to move the bound) */
    if (rows_per_expert <= MI4_QW128_MAX_ROWS_PER_EXPERT)
        return MI4_TILE_QW128;
    if (rows_per_expert < MI4_EXPAND_MIN_ROWS_PER_EXPERT || ws_prefill)
        return MI4_TILE_Q256;
    return -1;
}

/* Rows per expert decide the row tile; MOEINT4_HIP_TILE (a mi4_hip_tile_name)
 * forces one, for tuning. */
mi4_hip_tile_config mi4_hip_choose_tile(int64_t tokens, int64_t slots, const mi4_hip_weights *w)
{
    const char *forced = getenv("MOEINT4_HIP_TILE");
    const bool int4_gemm = mi4_hip_int4_wgmma_serves(w) != 0;
    for (int c = 0; forced && c < MI4_TILE_COUNT; c++) {
        if (strcmp(forced, mi4_hip_tile_name((mi4_hip_tile_config)c)) != 0)
            continue;
        if (mi4_hip_tile_is_int4_gemm((mi4_hip_tile_config)c) && !int4_gemm)
            break; /* not for these weights: the default below */
        return c == MI4_TILE_DIRECT && slots > MI4_DIRECT_MAX_SLOTS ? MI4_TILE_GEMV
                                                                     : (mi4_hip_tile_config)c;
    }
    /* Measured on the H200 (bench/results/hip-*.md): the direct GEMVs (no
     * routing, no combine) while there are no more slots than local experts
     * (one token, or Qwen3's 128 experts up to 8 tokens) and the experts
     * they read twice stay few (direct_extra_bytes, measured on an H100,
     * M = 3 and 4 also on the H200: Mixtral's 8 experts at 2 int4 tokens,
     * not 3 or 4, nor 2 in BF16); past that, on sm_90a builds, the
     * persistent wgmma tiles, 64 x 256 while experts see
     * fewer than 64 rows (less padding), else 128 x 256 (faster than the
     * GEMV from two rows per expert up). Elsewhere (AMD, other NVIDIA
     * targets): the routed register-streaming GEMV while experts see about
     * two rows, then 16- and 64-row tiles, then the 128-row tiles. */
    /* the routed paths measured against it: int4's d8, BF16's w64 (sm_90a) */
    const bool routed_measured = w->int4 ? int4_gemm && w->int4_routed : mi4_hip_wgmma_built();
    if (mi4_hip_direct_decode_serves(tokens, slots, w, routed_measured))
        return MI4_TILE_DIRECT;
    int64_t rows_per_expert = slots / (w->num_local_experts > 0 ? w->num_local_experts : 1);
    /* int4 weights on sm_90a (group 128 or per-channel, K and N multiples of
     * 128): the int4 grouped GEMMs or the routed decode GEMVs, no BF16 copy
     * of the weights, up to the rows where the expansion takes over */
    if (int4_gemm) {
        const int tile =
            mi4_hip_int4_gemm_tile(rows_per_expert, w->int4_routed, w->int4_ws_prefill);
        if (tile >= 0)
            return (mi4_hip_tile_config)tile;
    }
    /* other int4 weights: a routed int4 GEMV (matrix cores: 16-row tiles, else
     * the FMA one of 8 rows) while experts see few rows; past that the
     * weights are expanded to BF16 for the matrix-core tiles below
     * (hip_int4_weights.hip). */
    if (w->int4_mma && rows_per_expert <= MI4_INT4_MMA_MAX_ROWS_PER_EXPERT)
        return MI4_TILE_16;
    if (w->int4 && !w->int4_mma && rows_per_expert <= MI4_INT4_GEMV_MAX_ROWS_PER_EXPERT)
        return MI4_TILE_GEMV;
    if (mi4_hip_wgmma_built())
        return rows_per_expert < 64 ? MI4_TILE_WGMMA_64 : MI4_TILE_WGMMA_256;
    if (rows_per_expert <= 2)
        return MI4_TILE_GEMV;
    if (rows_per_expert <= 8)
        return MI4_TILE_16;
    return rows_per_expert <= 48 ? MI4_TILE_64 : MI4_TILE_WGMMA_256;
}
