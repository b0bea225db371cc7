/* AVX512-BF16 kernels (compiled with -mavx512f/bw/dq/vl -mavx512bf16 -mfma
 * -mf16c, called only after a run-time check for AVX512_BF16), for BF16
 * activations; F16 and F32 activations run on the AVX-512F table
 * (wide_input), whose f32 FMAs multiply them exactly (two bf16 planes per
 * f16 value would be exact too, but halve the speed: 161 against 211 GFLOP/s
 * per core for the f32 table, measured with bench_cpu_kernels).
 *
 * The tile layout is the AVX2 one (cpu_repack.h). As in the AVX-512F table a
 * 16-lane register holds rows 0-7 of two tiles, one 32-bit word per row. A
 * 16-bit shift by 4c leaves in each half word the nibble of column c (low
 * half) or c + 4 (high half) in its low four bits, and one vpermw through a
 * 32-entry table (bits 0-4 of each half word; entry i = bf16(i % 16 - 8))
 * turns both into bf16 codes minus 8, exactly. vdpbf16ps then multiplies
 * that pair of columns with the input pair (x[c], x[c + 4]) and adds both
 * products to the row's f32 accumulator: products of 8-bit significands are
 * exact, so per 32 weights one shift, one vpermw and one vdpbf16ps per token,
 * twice the multiply-adds per instruction of the f32 FMA tables. The group
 * scale is applied once per group, and the zero point through the group
 * sums: code - zero = (code - 8) - (zero - 8), which is 0 for GPTQ sym.
 *
 * Input rows: per 8-column block, 16 bytes of bf16 in the order (x0, x4, x1,
 * x5, x2, x6, x3, x7). BF16 activations are held exactly; the activations
 * between the projections are rounded to bf16 once (to nearest even), as
 * GPU kernels keep them in the activation dtype (the CPU's BF16 row of
 * src/registry/precision.c says so). vdpbf16ps treats bf16
 * subnormals (below 2^-126) as zero and flushes subnormal results. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_avx2_io.h"
#include "backends/cpu/cpu_avx512_tile.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_scalar_io.h"

#define ALWAYS_INLINE MI4_AVX512_INLINE
#define MAX_BLOCK_TOKENS MI4_AVX512_BLOCK_TOKENS
#define ROW_BLOCK_BYTES 16

typedef int32_t aliased_i32 __attribute__((may_alias, aligned(4)));

/* entry i (32 of them, vpermw reads 5 index bits) = bf16(i % 16 - 8) */
static ALWAYS_INLINE __m512i code_table(void)
{
    const __m512 codes = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    return (__m512i)_mm512_cvtne2ps_pbh(codes, codes);
}

/* acc + w . (x[c], x[c + 4]) of block k, the pair broadcast to every lane
 * from memory inside the instruction (GCC 12 issues a separate broadcast
 * for the intrinsic: one more uop per multiply). */
static ALWAYS_INLINE __m512 dot_pair(__m512 acc, __m512bh w, const float *row, size_t k, int c)
{
    const aliased_i32 *pair =
        (const aliased_i32 *)((const uint8_t *)row + k * ROW_BLOCK_BYTES + 4 * (size_t)c);
#if defined(__GNUC__)
    __asm__("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*pair));
    return acc;
#else
    return _mm512_dpbf16_ps(acc, w, (__m512bh)_mm512_set1_epi32(*pair));
#endif
}

/* Block k of the group at block_a / block_b into accumulator sets
 * first_set + c (mod S), c = column pair 0..3. */
static ALWAYS_INLINE void block_step(__m512 (*acc)[MAX_BLOCK_TOKENS], const uint8_t *block_a,
                                     const uint8_t *block_b, int k, size_t row_block,
                                     const float *const *rows, const __m512i table, const int TB,
                                     const int S, const int first_set)
{
    const size_t at = (size_t)k * MI4_CPU_BLOCK_BYTES;
    __m512i word = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(block_a + at))),
        _mm256_load_si256((const __m256i *)(block_b + at)), 1);
    for (int c = 0; c < 4; c++) {
        __m512i index = c == 0 ? word : _mm512_srli_epi16(word, 4 * c);
        __m512bh w = (__m512bh)_mm512_permutexvar_epi16(index, table);
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
    const __m512i table = code_table();
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
            _mm_prefetch((const char *)(block_a + at + MI4_CPU_PREFETCH_BYTES), _MM_HINT_T0);
            _mm_prefetch((const char *)(block_b + at + MI4_CPU_PREFETCH_BYTES), _MM_HINT_T0);
            block_step(acc, block_a, block_b, k, block0 + k, rows, table, TB, S, 0);
            block_step(acc, block_a, block_b, k + 1, block0 + k + 1, rows, table, TB, S, 4);
        }
        if (k < geo->group_blocks) /* per-channel rows of an odd block count */
            block_step(acc, block_a, block_b, k, block0 + k, rows, table, TB, S, 0);
        /* the table holds code - 8: take zero - 8 off */
        mi4_avx512_group_end(a, b, g, 8.0f, acc, S, sums, TB, y);
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

static void bf16_tile(const mi4_cpu_tile_job *job) { bf16_tile_pair(job, job); }

/* 8 f32 values -> one row block (x0 x4 x1 x5 ...), rounded to bf16; returns
 * the sum of the rounded values. */
static ALWAYS_INLINE float pack_values(__m256 v, uint8_t *dst)
{
    __m128i bits = (__m128i)_mm256_cvtneps_pbh(v);
    _mm_storeu_si128((__m128i *)dst, _mm_unpacklo_epi16(bits, _mm_srli_si128(bits, 8)));
    __m256 held = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    return mi4_avx2_sum8(held);
}

static float bf16_pack_block(const float *values, float *row, int block)
{
    return pack_values(_mm256_loadu_ps(values), (uint8_t *)row + (size_t)block * ROW_BLOCK_BYTES);
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
            sum += pack_values(_mm256_mul_ps(v, f), out + (size_t)(k / 8) * ROW_BLOCK_BYTES);
        }
        sums[g] = sum;
    }
}

/* Output rounding and the activation: the AVX2 table's. */
static const mi4_cpu_kernels avx512bf16_kernels = {
    .name = "avx512bf16",
    .tile = bf16_tile,
    .tile_pair = bf16_tile_pair,
    .scale_row = bf16_scale_row,
    .store_row = mi4_cpu_avx2_store_row,
    .activate = mi4_cpu_avx2_activate,
    .pack_block = bf16_pack_block,
    .wide_input = mi4_cpu_kernels_avx512,
};

const mi4_cpu_kernels *mi4_cpu_kernels_avx512bf16(void) { return &avx512bf16_kernels; }
