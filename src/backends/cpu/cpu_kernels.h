/* The CPU backend's inner kernels, one table per instruction set. Every
 * variant computes the same thing on the tiles of layout/cpu_repack.h; they
 * differ only in summation order (f32 rounding), never in meaning.
 *
 * Input rows are in the form the table's scale_row and pack_block write,
 * plus the per-group sums of the values as the kernel multiplies them:
 *  - f32 tables (scalar, avx2, avx512): "scaled rows", x'[k] = x[k] *
 *    mi4_cpu_column_scale(k) (16^-(k%8), 1 for k % 8 == 7), padded with zeros
 *    to a multiple of 8 columns. The scaling lets a kernel turn nibble c of a
 *    word into (code * 16^c) with one AND, exactly, instead of shift + AND;
 *    the products are the same.
 *  - the bf16 tables (avx512bf16, amx): bf16, 16 bytes per 8 columns in the
 *    order of cpu_kernels_avx512bf16.c, so a row fits where a scaled row
 *    does. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_KERNELS_H
#define MOEINT4_BACKENDS_CPU_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/cpu_activation.h"
#include "layout/cpu_repack.h"
#include "moeint4.h"

/* How far ahead of each tile stream the kernels prefetch (one line per 64
 * bytes read). Measured on the AMD EPYC VM (bf16 table, Qwen3 forward on
 * one core, CPU time): 2 KB: M = 1 1.13-1.15 ms, M = 8 7.5 ms; 8 KB:
 * 0.67-0.68 / 4.5 ms; 16-32 KB no better in the forward (past an item's
 * last tile they fetch what another core may read). The Intel VM of the
 * first measurements had 1-4 KB within 10% of each other. The f32 tables
 * use it; the bf16 table has its own (BF16_PREFETCH_BYTES). */
#ifndef MI4_CPU_PREFETCH_BYTES
#define MI4_CPU_PREFETCH_BYTES 8192
#endif

/* One 8-row tile times `tokens` scaled rows:
 *   y[t][r] = sum_g scale[g][r] * (sum_{k in g} code[r][k] * x[t][k]
 *                                  - zero[g][r] * xsum[t][g]) */
typedef struct mi4_cpu_tile_job {
    const uint8_t *tile; /* one tile of `geo` */
    const mi4_cpu_pack_geometry *geo;
    int scales_bf16;          /* scales are bf16 bits (else f16) */
    const float *const *x;    /* [tokens] scaled rows of >= in_blocks * 8 floats */
    const float *const *xsum; /* [tokens] group sums, num_groups each */
    int tokens;
    float *y; /* [tokens][8] */
} mi4_cpu_tile_job;

typedef struct mi4_cpu_kernels {
    /* "scalar", "avx2", "avx512", "avx512bf16", "avx512bf16-novbmi2", "amx" */
    const char *name;
    void (*tile)(const mi4_cpu_tile_job *job);
    /* Two jobs that differ only in tile and y (same geo, rows, tokens), each
     * written bit for bit as tile() writes it; NULL: call tile() twice. The
     * AVX-512 table runs the two tiles' 8 rows in one 16-lane register. */
    void (*tile_pair)(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b);
    /* src (count values of dtype) * factor -> scaled row dst (count values,
     * zero padded to a multiple of 8); the group sums of the unscaled
     * products go to sums[num_groups] (groups of group_columns values). */
    void (*scale_row)(moeint4_dtype dtype, const void *src, int count, float factor,
                      int group_columns, float *dst, float *sums);
    /* f32 -> dtype, rounded once to nearest even. */
    void (*store_row)(moeint4_dtype dtype, const float *src, int count, void *dst);
    /* gate[i] = act(gate[i], up[i]) for i < count (a multiple of 8). */
    void (*activate)(const mi4_cpu_activation *act, float *gate, const float *up, int count);
    /* 8 f32 activations (columns 8 * block ...) into block `block` of a row
     * as tile() reads it; returns the sum of the values as tile() will
     * multiply them (the group sums add these). */
    float (*pack_block)(const float *values, float *row, int block);
    /* floats of a row per 8-column block: 8 (scaled f32 rows, or bf16 in
     * two planes), 4 (bf16); rows are whole slices of 4 blocks long
     * (mi4_cpu_row_floats) */
    int row_block_floats;
    /* F16 and F32 activations run on this table instead (NULL: on this
     * one); the bf16 tables take BF16 activations only. */
    const struct mi4_cpu_kernels *(*wide_input)(void);
    /* F16 activations run on this table instead of wide_input's (NULL: on
     * wide_input's): the AMX table's two-plane sibling, amx-f16. */
    const struct mi4_cpu_kernels *(*f16_input)(void);
    /* 0, or the fewest tokens from which tile() wants equally spaced rows
     * (the AMX table loads them as tiles): a forward of that many tokens
     * gives each (token, expert) pair its own input row, an expert's rows
     * one after another (fewer: the tokens' rows, converted once each). */
    int pair_rows_min_tokens;
} mi4_cpu_kernels;

const mi4_cpu_kernels *mi4_cpu_kernels_scalar(void);
#if defined(MOEINT4_HAVE_X86_KERNELS)
const mi4_cpu_kernels *mi4_cpu_kernels_avx2(void);
const mi4_cpu_kernels *mi4_cpu_kernels_avx512(void);
const mi4_cpu_kernels *mi4_cpu_kernels_avx512bf16(void);
const mi4_cpu_kernels *mi4_cpu_kernels_avx512bf16_novbmi2(void); /* no VBMI2 */
const mi4_cpu_kernels *mi4_cpu_kernels_amx(void); /* AMX-BF16 on top of the bf16 table */
/* the AMX table for F16 activations: inputs and intermediate in two bf16 planes */
const mi4_cpu_kernels *mi4_cpu_kernels_amx_f16(void);
/* The AVX2 table's row conversions and activation, which the AVX-512
 * tables use too (memory or latency bound at these sizes). */
void mi4_cpu_avx2_scale_row(moeint4_dtype dtype, const void *src, int count, float factor,
                            int group_columns, float *dst, float *sums);
void mi4_cpu_avx2_store_row(moeint4_dtype dtype, const float *src, int count, void *dst);
void mi4_cpu_avx2_activate(const mi4_cpu_activation *act, float *gate, const float *up, int count);
#endif

/* 8-column blocks of a slice: 32 columns, an AMX tile row of bf16 */
#define MI4_CPU_SLICE_BLOCKS 4

#ifndef MI4_CPU_F16_INPUT_MIN_ROWS
#define MI4_CPU_F16_INPUT_MIN_ROWS 2
#endif

/* The table that runs activations of `dtype` in place of `kernels`
 * (wide_input, f16_input) for `pairs` (token, expert) pairs over `experts`
 * local experts: f16_input's where experts see MI4_CPU_F16_INPUT_MIN_ROWS
 * rows or more on average, as its tile unit wants, and the tile unit takes
 * the weights' shapes (`tile_shapes`: both projections' inputs and groups
 * whole 32-column slices; else its jobs would all run its slower bf16
 * kernels, two passes each). */
static inline const mi4_cpu_kernels *mi4_cpu_kernels_for_dtype(const mi4_cpu_kernels *kernels,
                                                               moeint4_dtype dtype, int64_t pairs,
                                                               int experts, int tile_shapes)
{
    if (dtype == MOEINT4_DTYPE_F16 && kernels->f16_input && tile_shapes &&
        pairs >= (int64_t)MI4_CPU_F16_INPUT_MIN_ROWS * experts)
        return kernels->f16_input();
    if (dtype != MOEINT4_DTYPE_BF16 && kernels->wide_input)
        return kernels->wide_input();
    return kernels;
}

/* Floats of an input row of `blocks` 8-column blocks, whole slices of
 * MI4_CPU_SLICE_BLOCKS blocks (the two-plane rows alternate their planes by
 * slice). */
static inline size_t mi4_cpu_row_floats(const mi4_cpu_kernels *kernels, int blocks)
{
    return (size_t)(blocks + MI4_CPU_SLICE_BLOCKS - 1) / MI4_CPU_SLICE_BLOCKS *
           MI4_CPU_SLICE_BLOCKS * (size_t)kernels->row_block_floats;
}

/* The best table for this CPU; env MOEINT4_CPU_KERNEL=scalar|avx2|avx512|
 * avx512bf16|amx caps it (the best this CPU runs at or below the named one). */
const mi4_cpu_kernels *mi4_cpu_kernels_select(void);

static inline void mi4_cpu_run_tile_pair(const mi4_cpu_kernels *kernels, const mi4_cpu_tile_job *a,
                                         const mi4_cpu_tile_job *b)
{
    if (kernels->tile_pair) {
        kernels->tile_pair(a, b);
    } else {
        kernels->tile(a);
        kernels->tile(b);
    }
}

#endif
