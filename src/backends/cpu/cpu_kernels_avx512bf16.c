/* AVX512-BF16 kernels (compiled with -mavx512f/bw/dq/vl -mavx512bf16
 * -mavx512vbmi2 -mfma -mf16c, called only after a run-time check for
 * AVX512_BF16 and VBMI2; cpu_kernels_avx512bf16_novbmi2.c compiles this file
 * again without VBMI2 for CPUs that lack it, Intel Cooper Lake, and
 * cpu_kernels_amx.c with AMX for the tile unit), for BF16
 * activations; F16 and F32 activations run
 * on the AVX-512F table (wide_input), whose f32 FMAs multiply them exactly
 * (two bf16 planes per f16 value would be exact too, but halve the speed of
 * these kernels: 161 against 211 GFLOP/s per core for the f32 table,
 * measured with bench_cpu_kernels). On the tile unit the second plane is
 * cheap: cpu_kernels_f16_amx.c compiles this file again with two planes
 * (BF16_PLANES) for F16 batches on AMX CPUs.
 *
 * The tile layout is the AVX2 one (cpu_repack.h). As in the AVX-512F table a
 * 16-lane register holds rows 0-7 of two tiles, one 32-bit word per row
 * (nibble c = column c of the block). A code becomes a bf16 without a table:
 * OR-ed into the low mantissa bits of 0x4300 (bf16 128.0) it reads 128 +
 * code, exactly. Two nibbles per 16-bit half come out with one instruction
 * each: the low one by one vpternlogd ((half & 0xF) | 0x4300), the top one by
 * one vpshrdw (half >> 12, 0x43 shifted in above it). The word and its 8-bit
 * rotation hold all eight columns in those places:
 *   word      halves (c0..c3 | c4..c7): low = (c0, c4), top = (c3, c7)
 *   rotated   halves (c2..c5 | c6, c7, c0, c1): low = (c2, c6), top = (c5, c1)
 * so 64 bytes of codes (128 weights) cost one load and insert, one rotate,
 * four extractions and four vdpbf16ps per token, against three shifts and
 * four vpermw table lookups before: that smaller instruction count is what
 * lets a core keep more weight lines in flight from DRAM (bench/kernels/
 * RESULTS.md, bench_cpu_kernels' gemv, one token, CPU time: 17.9 -> 28.2
 * GB/s on one core, 35.8 -> 55.5 on two; 59.7 -> 66.4 from L2).
 * vdpbf16ps multiplies each column pair with the input pair broadcast from
 * memory and adds both products to the row's f32 accumulator; products of
 * 8-bit significands are exact. The group scale is applied once per group,
 * the offset and the zero point through the group sums of the inputs:
 * code - zero = (128 + code) - (128 + zero). The f32 sums carry the 128
 * offset until the group ends: their rounding (f32 accumulation, as
 * src/registry/precision.c states) is up to ~17x larger in absolute terms
 * than with codes centred on 0, still ~1e-6 of the row's magnitude.
 *
 * Input rows: per 8-column block, 16 bytes of bf16 in the order of the
 * column pairs above: (x0, x4, x3, x7, x2, x6, x5, x1). BF16 activations
 * are held exactly; the activations between the projections are rounded to
 * bf16 once (to nearest even), as GPU kernels keep them in the activation
 * dtype (the CPU's BF16 row of src/registry/precision.c says so).
 * vdpbf16ps treats bf16 subnormals (below 2^-126) as zero and flushes
 * subnormal results. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_avx2_io.h"
#include "backends/cpu/cpu_avx512_tile.h"
#include "backends/cpu/cpu_bf16_codes.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_scalar_io.h"

#define ALWAYS_INLINE MI4_AVX512_INLINE
#define MAX_BLOCK_TOKENS MI4_AVX512_BLOCK_TOKENS
#define ROW_BLOCK_BYTES 16

/* bf16 planes of an input row: 1, or 2 for the F16 table
 * (cpu_kernels_f16_amx.c): each value v held as hi = bf16(v) plus lo = bf16(v - hi),
 * exact for an f16 v (11 significant bits, hi keeps 8, v - hi at most 4)
 * and 16 significant bits of an f32 one, each plane multiplied on its own.
 * The planes alternate by slices of 4 blocks (64 bytes each), so a slice
 * of either plane is one AMX tile row. */
#ifndef BF16_PLANES
#define BF16_PLANES 1
#endif
#define ROW_SLICE_BLOCKS MI4_CPU_SLICE_BLOCKS
#define ROW_PLANE_BYTES (ROW_SLICE_BLOCKS * ROW_BLOCK_BYTES)

/* Where block k's hi plane starts in a row (its lo plane: ROW_PLANE_BYTES on) */
static ALWAYS_INLINE size_t row_block_at(size_t k)
{
    return (k / ROW_SLICE_BLOCKS) * ROW_PLANE_BYTES * BF16_PLANES +
           (k % ROW_SLICE_BLOCKS) * ROW_BLOCK_BYTES;
}

typedef int32_t aliased_i32 __attribute__((may_alias, aligned(4)));

/* How far ahead of each tile stream this table prefetches. Measured on the
 * AMD EPYC VM, one token, one core, CPU time, tiles from DRAM: with the two
 * tiles of a pair far apart (two independent streams, as the decode forward
 * runs them) 8, 16 and 32 KB all stream 38-40 GB/s (w13 and w2 shapes), the
 * one-core read limit; with adjacent tiles (one stream, the many-pairs w2
 * path) 8 KB gave 18 and 32 KB 32 GB/s; the Qwen3 forward on one core ran
 * within 5% for 8-24 KB, 48 KB was 10% slower (bench/kernels/RESULTS.md). */
#ifndef BF16_PREFETCH_BYTES
#define BF16_PREFETCH_BYTES 16384
#endif

/* acc + w . (column pair c of block k), the pair broadcast to every lane
 * from memory inside the instruction (GCC 12 issues a separate broadcast
 * for the intrinsic: one more uop per multiply). */
static ALWAYS_INLINE __m512 dot_pair(__m512 acc, __m512bh w, const float *row, size_t k, int c)
{
    for (int plane = 0; plane < BF16_PLANES; plane++) {
        const aliased_i32 *pair =
            (const aliased_i32 *)((const uint8_t *)row + row_block_at(k) +
                                  (size_t)plane * ROW_PLANE_BYTES + 4 * (size_t)c);
#if defined(__GNUC__)
        __asm__("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*pair));
#else
        acc = _mm512_dpbf16_ps(acc, w, (__m512bh)_mm512_set1_epi32(*pair));
#endif
    }
    return acc;
}

/* Block k of the group at block_a / block_b into accumulator sets
 * first_set + c (mod S), c = column pair 0..3. */
static ALWAYS_INLINE void block_step(__m512 (*acc)[MAX_BLOCK_TOKENS], const uint8_t *block_a,
                                     const uint8_t *block_b, int k, size_t row_block,
                                     const float *const *rows, const int TB, const int S,
                                     const int first_set)
{
    const size_t at = (size_t)k * MI4_CPU_BLOCK_BYTES;
    __m512i codes[4];
    mi4_bf16_block_codes(mi4_bf16_load_block_pair(block_a + at, block_b + at), codes);
    for (int c = 0; c < 4; c++) {
        __m512bh w = (__m512bh)codes[c];
        for (int t = 0; t < TB; t++)
            acc[(first_set + c) % S][t] =
                dot_pair(acc[(first_set + c) % S][t], w, rows[t], row_block, c);
    }
}

/* Tokens [t_first, t_first + TB) of jobs a and b (b may be a), S
 * accumulator sets per token (chains in flight for few tokens: with 8 sets
 * the odd blocks use the other four). */
static ALWAYS_INLINE void pair_tokens(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b,
                                      int t_first, const int TB, const int S)
{
    const mi4_cpu_pack_geometry *geo = a->geo;
    const float *rows[MAX_BLOCK_TOKENS];
    const float *sums[MAX_BLOCK_TOKENS];
    __attribute__((aligned(64))) float y[MAX_BLOCK_TOKENS][16];
    mi4_avx512_block_start(a, t_first, TB, rows, sums, y);
    const size_t group_bytes = (size_t)geo->group_blocks * MI4_CPU_BLOCK_BYTES;
    for (int g = 0; g < geo->num_groups; g++) {
        __m512 acc[8][MAX_BLOCK_TOKENS];
        mi4_avx512_clear(acc, S, TB);
        const uint8_t *block_a = a->tile + (size_t)g * group_bytes;
        const uint8_t *block_b = b->tile + (size_t)g * group_bytes;
        const size_t block0 = (size_t)g * geo->group_blocks;
        int k = 0;
        for (; k + 1 < geo->group_blocks; k += 2) {
            /* one line (two blocks) ahead per stream, whatever the token
             * count: the first pass over a tile pair streams it from DRAM
             * (Qwen3 M = 64 forward on one core: 30-31 -> 23 ms of CPU) */
            const size_t at = (size_t)k * MI4_CPU_BLOCK_BYTES;
            _mm_prefetch((const char *)(block_a + at + BF16_PREFETCH_BYTES), _MM_HINT_T0);
            _mm_prefetch((const char *)(block_b + at + BF16_PREFETCH_BYTES), _MM_HINT_T0);
            block_step(acc, block_a, block_b, k, block0 + k, rows, TB, S, 0);
            block_step(acc, block_a, block_b, k + 1, block0 + k + 1, rows, TB, S, 4);
        }
        if (k < geo->group_blocks) /* per-channel rows of an odd block count */
            block_step(acc, block_a, block_b, k, block0 + k, rows, TB, S, 0);
        /* the accumulators hold 128 + code: take 128 + zero off */
        mi4_avx512_group_end(a, b, g, -128.0f, acc, S, sums, TB, y);
    }
    mi4_avx512_store_pair(a, b, t_first, TB, y);
}

MI4_AVX512_BLOCK(1, 8)
MI4_AVX512_BLOCK(2, 8)
MI4_AVX512_BLOCK(3, 4)
MI4_AVX512_BLOCK(4, 3)
MI4_AVX512_BLOCK(5, 2)
MI4_AVX512_BLOCK(6, 2)
MI4_AVX512_BLOCK(7, 2)
MI4_AVX512_BLOCK(8, 2)

static void bf16_tile_pair(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b)
{
    static const mi4_avx512_block_fn by_count[MAX_BLOCK_TOKENS + 1] = { NULL,    block_1, block_2,
                                                                        block_3, block_4, block_5,
                                                                        block_6, block_7, block_8 };
    mi4_avx512_run_blocks(a, b, by_count);
}

/* 8 f32 values -> one row block (x0 x4 x3 x7 x2 x6 x5 x1) in each plane,
 * rounded to bf16 (with two planes, what the first leaves, rounded again);
 * returns the sum of the values the planes hold. */
static ALWAYS_INLINE float pack_values(__m256 v, uint8_t *dst)
{
    const __m128i order = _mm_setr_epi8(0, 1, 8, 9, 6, 7, 14, 15, 4, 5, 12, 13, 10, 11, 2, 3);
    __m256 held_sum = _mm256_setzero_ps();
    for (int plane = 0; plane < BF16_PLANES; plane++) {
        __m128i bits = (__m128i)_mm256_cvtneps_pbh(v);
        _mm_storeu_si128((__m128i *)(dst + (size_t)plane * ROW_PLANE_BYTES),
                         _mm_shuffle_epi8(bits, order));
        __m256 held = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
        /* exact: hi + lo of an f32 fits its 24 bits (lo's lowest bit is
         * no finer than v's) */
        held_sum = _mm256_add_ps(held_sum, held);
        v = _mm256_sub_ps(v, held); /* exact */
    }
    return mi4_avx2_sum8(held_sum);
}

static float bf16_pack_block(const float *values, float *row, int block)
{
    return pack_values(_mm256_loadu_ps(values), (uint8_t *)row + row_block_at((size_t)block));
}

/* x * factor rounded to bf16 (exact for BF16 inputs and factor 1). */
static void bf16_scale_row(moeint4_dtype dtype, const void *src, int count, float factor,
                           int group_columns, float *dst, float *sums)
{
    const __m256 f = _mm256_set1_ps(factor);
    uint8_t *out = (uint8_t *)dst;
    int num_groups = (count + group_columns - 1) / group_columns;
    for (int g = 0; g < num_groups; g++) {
        int k = g * group_columns;
        int end = k + group_columns < count ? k + group_columns : count;
        float sum = 0.0f;
        for (; k < end; k += 8) {
            __m256 v;
            if (k + 8 <= end) {
                v = mi4_avx2_load8(dtype, src, k);
            } else { /* only per-channel rows with count % 8 != 0 */
                float tail[8] = { 0 };
                for (int i = 0; k + i < end; i++)
                    tail[i] = mi4_cpu_load_value(dtype, src, (size_t)(k + i));
                v = _mm256_loadu_ps(tail);
            }
            sum += pack_values(_mm256_mul_ps(v, f), out + row_block_at((size_t)(k / 8)));
        }
        sums[g] = sum;
    }
}

#if defined(MI4_CPU_AMX_TABLE)
#include "backends/cpu/cpu_amx_tile.h"

/* On the tile unit where it takes the jobs, else on the bf16 kernels. */
static void amx_tile_pair(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b)
{
    if (!mi4_amx_tile_pair(a, b))
        bf16_tile_pair(a, b);
}

static void amx_tile(const mi4_cpu_tile_job *job) { amx_tile_pair(job, job); }

#if BF16_PLANES == 2
#define BF16_TABLE_NAME "amx-f16"
#define BF16_TABLE_GETTER mi4_cpu_kernels_amx_f16
#else
#define BF16_TABLE_NAME "amx"
#define BF16_TABLE_GETTER mi4_cpu_kernels_amx
#endif
#define BF16_TABLE_F16_INPUT mi4_cpu_kernels_amx_f16 /* amx's and its own */
#define BF16_TABLE_TILE amx_tile
#define BF16_TABLE_TILE_PAIR amx_tile_pair
#define BF16_TABLE_PAIR_ROWS_MIN_TOKENS MI4_AMX_MIN_TOKENS
#elif defined(__AVX512VBMI2__)
#define BF16_TABLE_NAME "avx512bf16"
#define BF16_TABLE_GETTER mi4_cpu_kernels_avx512bf16
#else
#define BF16_TABLE_NAME "avx512bf16-novbmi2"
#define BF16_TABLE_GETTER mi4_cpu_kernels_avx512bf16_novbmi2
#endif
#ifndef BF16_TABLE_TILE
static void bf16_tile(const mi4_cpu_tile_job *job) { bf16_tile_pair(job, job); }

#define BF16_TABLE_TILE bf16_tile
#define BF16_TABLE_TILE_PAIR bf16_tile_pair
#define BF16_TABLE_PAIR_ROWS_MIN_TOKENS 0
#endif
#ifndef BF16_TABLE_F16_INPUT
#define BF16_TABLE_F16_INPUT NULL /* F16 on wide_input */
#endif

/* Output rounding and the activation: the AVX2 table's. */
static const mi4_cpu_kernels avx512bf16_kernels = {
    .name = BF16_TABLE_NAME,
    .tile = BF16_TABLE_TILE,
    .tile_pair = BF16_TABLE_TILE_PAIR,
    .scale_row = bf16_scale_row,
    .store_row = mi4_cpu_avx2_store_row,
    .activate = mi4_cpu_avx2_activate,
    .pack_block = bf16_pack_block,
    .row_block_floats = ROW_BLOCK_BYTES * BF16_PLANES / 4,
    .wide_input = mi4_cpu_kernels_avx512,
    .f16_input = BF16_TABLE_F16_INPUT,
    .pair_rows_min_tokens = BF16_TABLE_PAIR_ROWS_MIN_TOKENS,
};

const mi4_cpu_kernels *BF16_TABLE_GETTER(void) { return &avx512bf16_kernels; }
