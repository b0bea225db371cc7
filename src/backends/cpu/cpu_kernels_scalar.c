/* Portable C kernels: what non-x86 builds run, and the reference the SIMD
 * variants are tested against. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_scalar_io.h"

static uint32_t load_u32_le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float tile_scale(const uint8_t *tile, const mi4_cpu_pack_geometry *geo, int bf16, int g,
                        int r)
{
    const uint8_t *p = tile + geo->scales_offset + ((size_t)g * MI4_CPU_TILE_ROWS + r) * 2;
    uint16_t bits = (uint16_t)(p[0] | p[1] << 8);
    return bf16 ? mi4_bf16_to_f32(bits) : mi4_f16_to_f32(bits);
}

/* Rows innermost, so compilers vectorize the 8 rows of a tile with whatever
 * the target has (SSE2, NEON); each row still sums its columns in order. */
static void scalar_tile(const mi4_cpu_tile_job *job)
{
    const mi4_cpu_pack_geometry *geo = job->geo;
    for (int t = 0; t < job->tokens; t++) {
        const float *x = job->x[t];
        const float *xsum = job->xsum[t];
        float y[MI4_CPU_TILE_ROWS] = { 0 };
        for (int g = 0; g < geo->num_groups; g++) {
            float acc[MI4_CPU_TILE_ROWS] = { 0 };
            int b_end = (g + 1) * geo->group_blocks;
            for (int b = g * geo->group_blocks; b < b_end; b++) {
                const uint8_t *block = job->tile + (size_t)b * MI4_CPU_BLOCK_BYTES;
                uint32_t words[MI4_CPU_TILE_ROWS];
                for (int r = 0; r < MI4_CPU_TILE_ROWS; r++)
                    words[r] = load_u32_le(block + 4 * (size_t)r);
                const float *xb = x + (size_t)b * MI4_CPU_BLOCK_COLUMNS;
                for (int c = 0; c < MI4_CPU_BLOCK_COLUMNS; c++)
                    for (int r = 0; r < MI4_CPU_TILE_ROWS; r++)
                        acc[r] += mi4_cpu_scaled_nibble(words[r], c) * xb[c];
            }
            for (int r = 0; r < MI4_CPU_TILE_ROWS; r++) {
                float scale = tile_scale(job->tile, geo, job->scales_bf16, g, r);
                float zero =
                    (float)job->tile[geo->zeros_offset + (size_t)g * MI4_CPU_TILE_ROWS + r];
                y[r] += scale * acc[r];
                y[r] += -(zero * scale) * xsum[g];
            }
        }
        for (int r = 0; r < MI4_CPU_TILE_ROWS; r++)
            job->y[(size_t)t * MI4_CPU_TILE_ROWS + r] = y[r];
    }
}

static void scalar_scale_row(moeint4_dtype dtype, const void *src, int count, float factor,
                             int group_columns, float *dst, float *sums)
{
    int padded =
        (count + MI4_CPU_BLOCK_COLUMNS - 1) / MI4_CPU_BLOCK_COLUMNS * MI4_CPU_BLOCK_COLUMNS;
    float sum = 0.0f;
    for (int k = 0; k < count; k++) {
        float v = mi4_cpu_load_value(dtype, src, (size_t)k) * factor;
        dst[k] = v * mi4_cpu_column_scale(k);
        sum += v;
        if ((k + 1) % group_columns == 0 || k + 1 == count) {
            sums[k / group_columns] = sum;
            sum = 0.0f;
        }
    }
    for (int k = count; k < padded; k++)
        dst[k] = 0.0f;
}

static void scalar_store_row(moeint4_dtype dtype, const float *src, int count, void *dst)
{
    for (int k = 0; k < count; k++)
        mi4_cpu_store_value(dtype, dst, (size_t)k, src[k]);
}

static void scalar_activate(const mi4_cpu_activation *act, float *gate, const float *up, int count)
{
    for (int i = 0; i < count; i++)
        gate[i] = mi4_cpu_activate(act, gate[i], up[i]);
}

static const mi4_cpu_kernels scalar_kernels = {
    .name = "scalar",
    .tile = scalar_tile,
    .scale_row = scalar_scale_row,
    .store_row = scalar_store_row,
    .activate = scalar_activate,
    .pack_block = mi4_cpu_pack_block_scaled,
    .row_block_floats = MI4_CPU_BLOCK_COLUMNS,
};

const mi4_cpu_kernels *mi4_cpu_kernels_scalar(void) { return &scalar_kernels; }

const mi4_cpu_kernels *mi4_cpu_kernels_select(void)
{
    /* tables from the best down; MOEINT4_CPU_KERNEL names the best allowed */
    const char *forced = getenv("MOEINT4_CPU_KERNEL");
    int cap = 4; /* 4 amx, 3 avx512bf16, 2 avx512, 1 avx2, 0 scalar */
    if (forced && strcmp(forced, "scalar") == 0)
        cap = 0;
    else if (forced && strcmp(forced, "avx2") == 0)
        cap = 1;
    else if (forced && strcmp(forced, "avx512") == 0)
        cap = 2;
    else if (forced && strcmp(forced, "avx512bf16") == 0)
        cap = 3;
#if defined(MOEINT4_HAVE_X86_KERNELS)
    if (cap >= 4 && mi4_cpu_has_amx_bf16())
        return mi4_cpu_kernels_amx();
    if (cap >= 3 && mi4_cpu_has_avx512_bf16())
        return mi4_cpu_has_avx512_vbmi2() ? mi4_cpu_kernels_avx512bf16()
                                          : mi4_cpu_kernels_avx512bf16_novbmi2();
    if (cap >= 2 && mi4_cpu_has_avx512())
        return mi4_cpu_kernels_avx512();
    if (cap >= 1 && mi4_cpu_has_avx2_fma_f16c())
        return mi4_cpu_kernels_avx2();
#endif
    return mi4_cpu_kernels_scalar();
}
