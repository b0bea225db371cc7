/* The AMX table's tile pair: the bf16 table's arithmetic (bf16 inputs times
 * 128 + code, f32 sums, the offset and the zero point taken off through the
 * group sums at each group's end) on Intel's tile unit, whose TDPBF16PS
 * multiplies 16 tokens by 16 weight rows over 32 columns in one instruction
 * (8192 products; the bf16 table's vdpbf16ps makes 32).
 *
 * Per 32 columns the 16 rows of tiles a and b become one B tile: the code
 * words of four blocks, turned into bf16 column pairs as the bf16 table does
 * (cpu_bf16_codes.h), stored as 16 rows of 64 bytes. Tile row i holds the
 * pair i % 4 of block i / 4 for the 16 weight rows, the order in which a
 * bf16 row holds its columns, so 64 bytes of each input row are an A tile
 * row as they are: the A tiles load straight from the rows when they are
 * equally spaced (the forward lays an expert's rows out so from
 * MI4_AMX_MIN_TOKENS tokens on: pair_rows_min_tokens).
 * Up to 4 C tiles (64 tokens) share each B tile; at a group's end they go to
 * memory and are scaled into the f32 outputs.
 *
 * Rows in two bf16 planes (BF16_PLANES 2, the F16 table) take two A tiles
 * per C tile and B tile, one a plane, 64 bytes apart in each row.
 *
 * Include only from the AMX builds of cpu_kernels_avx512bf16.c
 * (cpu_kernels_amx.c, cpu_kernels_f16_amx.c: AVX-512 BF16 + VBMI2 +
 * AMX-TILE + AMX-BF16), and call only after mi4_cpu_has_amx_bf16(). */
#ifndef MOEINT4_BACKENDS_CPU_CPU_AMX_TILE_H
#define MOEINT4_BACKENDS_CPU_CPU_AMX_TILE_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_avx512_tile.h"
#include "backends/cpu/cpu_bf16_codes.h"
#include "backends/cpu/cpu_kernels.h"

/* Fewer tokens than this run on the bf16 kernels. bench_cpu_kernels' block
 * test (K = 2048, 2 threads, GFLOP/s, bf16 kernels / tile unit) on the
 * Intel Xeon VM with AMX of 2026-12-04: T = 1: 152-166 / 116, 2: 179-191 /
 * 231, 3: 191 / 337-349, 16: 187 / 1261, 64: 186 / 1757 (a TDPBF16PS
 * takes about as long for 1 token as for 16). */
#ifndef MI4_AMX_MIN_TOKENS
#define MI4_AMX_MIN_TOKENS 2
#endif

#define MI4_AMX_TILE_ROWS 16   /* tokens of an A / C tile, pairs of a B tile */
#define MI4_AMX_ROW_BYTES 64   /* of every tile row: 32 bf16 or 16 f32 */
#define MI4_AMX_SLICE_BLOCKS MI4_CPU_SLICE_BLOCKS /* blocks of 8 columns per B tile */
#define MI4_AMX_C_TILES 4
#define MI4_AMX_PASS_TOKENS (MI4_AMX_TILE_ROWS * MI4_AMX_C_TILES)
/* bytes of a bf16 input row per block (the bf16 table's row form) */
#define MI4_AMX_INPUT_BLOCK_BYTES 16
#define MI4_AMX_PREFETCH_BYTES 16384

/* Tile registers, as literals: GCC's intrinsics paste them into the
 * instruction text. A tile: the pass's full token tiles; A_LAST: its last
 * (maybe shorter) one; C tiles 3-6 in pass order. */
#define MI4_AMX_B 0
#define MI4_AMX_A 1
#define MI4_AMX_A_LAST 2

/* GCC's tile intrinsics tell the compiler of no memory that LDTILECFG and
 * TILELOADD read (only of what TILESTORED writes): without this barrier
 * before them it may drop or sink the stores that fill their operands. */
#define MI4_AMX_MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

/* LDTILECFG's 64-byte operand (palette 1) */
typedef struct mi4_amx_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} mi4_amx_config;

/* Shapes for a pass of c_tiles C tiles whose last one has last_rows tokens. */
static MI4_AVX512_INLINE void mi4_amx_configure(int c_tiles, int last_rows)
{
    mi4_amx_config config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    config.rows[MI4_AMX_B] = MI4_AMX_TILE_ROWS;
    config.rows[MI4_AMX_A] = MI4_AMX_TILE_ROWS;
    config.rows[MI4_AMX_A_LAST] = (uint8_t)last_rows;
    for (int i = 0; i < 3 + c_tiles; i++) {
        config.colsb[i] = MI4_AMX_ROW_BYTES;
        if (i >= 3)
            config.rows[i] = (uint8_t)(i == 2 + c_tiles ? last_rows : MI4_AMX_TILE_ROWS);
    }
    MI4_AMX_MEMORY_BARRIER();
    _tile_loadconfig(&config);
}

/* C tile `tile` (the j-th of the pass) += the A tile of tokens from
 * rows[first + 16 j] on, times the B tile, for each plane of the rows. */
#define MI4_AMX_DOT(j, tile)                                                                       \
    do {                                                                                           \
        if (c_tiles > (j)) {                                                                       \
            const char *a_rows = (const char *)rows[first + MI4_AMX_TILE_ROWS * (j)] + slice_at;   \
            for (int plane = 0; plane < BF16_PLANES; plane++) {                                    \
                const char *a_plane = a_rows + (size_t)plane * MI4_AMX_ROW_BYTES;                  \
                if (c_tiles == (j) + 1) {                                                          \
                    _tile_loadd(MI4_AMX_A_LAST, a_plane, stride);                                  \
                    _tile_dpbf16ps(tile, MI4_AMX_A_LAST, MI4_AMX_B);                               \
                } else {                                                                           \
                    _tile_loadd(MI4_AMX_A, a_plane, stride);                                       \
                    _tile_dpbf16ps(tile, MI4_AMX_A, MI4_AMX_B);                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Each C tile of the pass: cleared (OP = zero) or stored to dots (OP = store). */
#define MI4_AMX_EACH_C(OP)                                                                         \
    do {                                                                                           \
        OP(0, 3);                                                                                  \
        if (c_tiles > 1)                                                                           \
            OP(1, 4);                                                                              \
        if (c_tiles > 2)                                                                           \
            OP(2, 5);                                                                              \
        if (c_tiles > 3)                                                                           \
            OP(3, 6);                                                                              \
    } while (0)
#define MI4_AMX_ZERO(j, tile) _tile_zero(tile)
#define MI4_AMX_STORE(j, tile) _tile_stored(tile, dots[MI4_AMX_TILE_ROWS * (j)], MI4_AMX_ROW_BYTES)

/* Blocks [block, block + 4) of tiles a and b as a B tile in `b_tile`. */
static MI4_AVX512_INLINE void mi4_amx_stage_codes(const mi4_cpu_tile_job *a,
                                                  const mi4_cpu_tile_job *b, int block,
                                                  uint8_t *b_tile)
{
    for (int i = 0; i < MI4_AMX_SLICE_BLOCKS; i++) {
        const size_t at = (size_t)(block + i) * MI4_CPU_BLOCK_BYTES;
        __m512i codes[4];
        mi4_bf16_block_codes(mi4_bf16_load_block_pair(a->tile + at, b->tile + at), codes);
        for (int c = 0; c < 4; c++)
            _mm512_store_si512((__m512i *)(b_tile + (size_t)(4 * i + c) * MI4_AMX_ROW_BYTES),
                               codes[c]);
    }
}

/* The distance between consecutive rows of the job when it is the same for
 * all of them (any value for one token); 0 in *equal when it is not. */
static MI4_AVX512_INLINE ptrdiff_t mi4_amx_row_stride(const mi4_cpu_tile_job *job, int *equal)
{
    const float *const *rows = job->x;
    ptrdiff_t stride = job->tokens > 1 ? (const char *)rows[1] - (const char *)rows[0] : 0;
    *equal = 1;
    for (int t = 2; t < job->tokens; t++)
        if ((const char *)rows[t] - (const char *)rows[t - 1] != stride)
            *equal = 0;
    return stride;
}

/* Jobs a and b (b may be a) on the tile unit; 0 without touching their y
 * when the bf16 kernels must run them instead: fewer than
 * MI4_AMX_MIN_TOKENS tokens, groups or rows that are not whole B tiles
 * (per-channel rows of 8-column blocks not a multiple of 4), or rows not
 * equally spaced. */
static inline int mi4_amx_tile_pair(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b)
{
    const mi4_cpu_pack_geometry *geo = a->geo;
    if (a->tokens < MI4_AMX_MIN_TOKENS || geo->group_blocks % MI4_AMX_SLICE_BLOCKS != 0 ||
        geo->in_blocks % MI4_AMX_SLICE_BLOCKS != 0)
        return 0;
    int equal;
    const ptrdiff_t stride = mi4_amx_row_stride(a, &equal);
    if (!equal)
        return 0;
    const float *const *rows = a->x;
    /* B tiles staged one slice ahead: a TILELOADD right after the stores
     * that fill its operand waits for them to reach L1 (Qwen3 M = 512:
     * a quarter of the kernel's time) */
    __attribute__((aligned(64))) uint8_t b_tiles[2][MI4_AMX_TILE_ROWS * MI4_AMX_ROW_BYTES];
    __attribute__((aligned(64))) float dots[MI4_AMX_PASS_TOKENS][16];
    __attribute__((aligned(64))) float y[MI4_AMX_PASS_TOKENS][16];
    int loaded = -1; /* the pass shape (c_tiles, last_rows) configured */
    for (int first = 0; first < a->tokens; first += MI4_AMX_PASS_TOKENS) {
        int n = a->tokens - first < MI4_AMX_PASS_TOKENS ? a->tokens - first : MI4_AMX_PASS_TOKENS;
        int c_tiles = (n + MI4_AMX_TILE_ROWS - 1) / MI4_AMX_TILE_ROWS;
        int last_rows = n - MI4_AMX_TILE_ROWS * (c_tiles - 1);
        if (c_tiles * 64 + last_rows != loaded) {
            mi4_amx_configure(c_tiles, last_rows);
            loaded = c_tiles * 64 + last_rows;
        }
        for (int t = 0; t < n; t++)
            _mm512_store_ps(y[t], _mm512_setzero_ps());
        int staged = 0; /* the b_tiles entry that holds the current slice */
        mi4_amx_stage_codes(a, b, 0, b_tiles[staged]);
        for (int g = 0; g < geo->num_groups; g++) {
            int block = g * geo->group_blocks;
            int end = block + geo->group_blocks < geo->in_blocks ? block + geo->group_blocks
                                                                 : geo->in_blocks;
            MI4_AMX_EACH_C(MI4_AMX_ZERO);
            for (; block < end; block += MI4_AMX_SLICE_BLOCKS) {
                MI4_AMX_MEMORY_BARRIER();
                _tile_loadd(MI4_AMX_B, b_tiles[staged], MI4_AMX_ROW_BYTES);
                const int next = block + MI4_AMX_SLICE_BLOCKS;
                if (next < geo->in_blocks) { /* the next slice, whatever its group */
                    /* the first pass streams the tiles from memory */
                    const size_t at = (size_t)next * MI4_CPU_BLOCK_BYTES + MI4_AMX_PREFETCH_BYTES;
                    _mm_prefetch((const char *)(a->tile + at), _MM_HINT_T0);
                    _mm_prefetch((const char *)(a->tile + at + 64), _MM_HINT_T0);
                    _mm_prefetch((const char *)(b->tile + at), _MM_HINT_T0);
                    _mm_prefetch((const char *)(b->tile + at + 64), _MM_HINT_T0);
                    mi4_amx_stage_codes(a, b, next, b_tiles[staged ^ 1]);
                }
                const size_t slice_at = (size_t)block * MI4_AMX_INPUT_BLOCK_BYTES * BF16_PLANES;
                MI4_AMX_DOT(0, 3);
                MI4_AMX_DOT(1, 4);
                MI4_AMX_DOT(2, 5);
                MI4_AMX_DOT(3, 6);
                staged ^= 1;
            }
            MI4_AMX_EACH_C(MI4_AMX_STORE);
            /* the sums hold 128 + code: take 128 + zero off */
            __m512 scale, zero_scale;
            mi4_avx512_group_factors(a, b, g, -128.0f, &scale, &zero_scale);
            for (int t = 0; t < n; t++)
                _mm512_store_ps(y[t],
                                mi4_avx512_group_add(_mm512_load_ps(y[t]), _mm512_load_ps(dots[t]),
                                                     scale, zero_scale, a->xsum[first + t][g]));
        }
        mi4_avx512_store_pair(a, b, first, n, y);
    }
    _tile_release();
    return 1;
}

#endif
