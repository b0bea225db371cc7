/* Per-expert conversions: dequantization to f32 / bf16 and the XPU layout.
 * Dequantization walks [OUT][IN] in tiles of TILE_ROWS x TILE_COLS: the codes
 * of a tile are decoded once, then every code goes through a 16-entry table
 * per row holding (q - zero) * scale for the tile's group, so the arithmetic
 * (and the bf16 rounding) happens 16 times per row and group instead of once
 * per weight. */
#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
#include "layout/layout.h"

#define TILE_ROWS 64
/* Divides every group size (32, 64, 128): a tile never straddles a group. */
#define TILE_COLS 32

typedef struct value_tables {
    float f32[TILE_ROWS][16];
    uint16_t bf16[TILE_ROWS][16];
} value_tables;

static void fill_tables(const moeint4_quant_matrix *m, int expert, int group, int row0, int rows,
                        int want_bf16, value_tables *tables)
{
    for (int r = 0; r < rows; r++) {
        float scale = mi4_layout_scale(m, expert, group, row0 + r);
        int zero = mi4_layout_zero(m, expert, group, row0 + r);
        for (int q = 0; q < 16; q++) {
            /* exact: |q - zero| <= 16 and scale has at most 11 significant bits */
            float value = (float)(q - zero) * scale;
            tables->f32[r][q] = value;
            if (want_bf16)
                tables->bf16[r][q] = mi4_f32_to_bf16(value);
        }
    }
}

/* Exactly one of out_f32 / out_bf16 is non-NULL. */
static void dequantize_expert(const moeint4_quant_matrix *m, int expert, float *out_f32,
                              uint16_t *out_bf16)
{
    int in = m->in_features, out = m->out_features;
    int group_size = m->group_size == -1 ? in : m->group_size;
    uint8_t codes[TILE_ROWS * TILE_COLS];
    value_tables tables;
    for (int row0 = 0; row0 < out; row0 += TILE_ROWS) {
        int rows = out - row0 < TILE_ROWS ? out - row0 : TILE_ROWS;
        int table_group = -1;
        for (int col0 = 0; col0 < in; col0 += TILE_COLS) {
            int cols = in - col0 < TILE_COLS ? in - col0 : TILE_COLS;
            int group = col0 / group_size;
            if (group != table_group) {
                fill_tables(m, expert, group, row0, rows, out_bf16 != NULL, &tables);
                table_group = group;
            }
            mi4_layout_decode_codes(m, expert, row0, rows, col0, cols, codes, TILE_COLS);
            for (int r = 0; r < rows; r++) {
                size_t at = (size_t)(row0 + r) * (size_t)in + (size_t)col0;
                const uint8_t *row_codes = codes + (size_t)r * TILE_COLS;
                if (out_bf16) {
                    const uint16_t *table = tables.bf16[r];
                    for (int c = 0; c < cols; c++)
                        out_bf16[at + (size_t)c] = table[row_codes[c]];
                } else {
                    const float *table = tables.f32[r];
                    for (int c = 0; c < cols; c++)
                        out_f32[at + (size_t)c] = table[row_codes[c]];
                }
            }
        }
    }
}

void mi4_layout_dequantize_expert_f32(const moeint4_quant_matrix *m, int expert, float *out)
{
    dequantize_expert(m, expert, out, NULL);
}

void mi4_layout_dequantize_expert_bf16(const moeint4_quant_matrix *m, int expert, uint16_t *out)
{
    dequantize_expert(m, expert, NULL, out);
}

/* Byte j of an XPU row holds columns 2j (low nibble) and 2j+1, so the four
 * bytes of columns 8w..8w+7 are GPTQ's word (w, o) in little-endian order:
 * the conversion is a transpose of 32-bit words, done in square blocks. */
#define XPU_BLOCK 32

void mi4_layout_xpu_expert(const moeint4_quant_matrix *m, int expert, uint8_t *packed,
                           uint16_t *scales_t)
{
    size_t out = (size_t)m->out_features, words = (size_t)m->in_features / 8;
    size_t row_bytes = (size_t)m->in_features / 2;
    const int32_t *qweight = m->qweight + (size_t)expert * words * out;
    for (size_t w0 = 0; w0 < words; w0 += XPU_BLOCK) {
        size_t w_end = w0 + XPU_BLOCK < words ? w0 + XPU_BLOCK : words;
        for (size_t o0 = 0; o0 < out; o0 += XPU_BLOCK) {
            size_t o_end = o0 + XPU_BLOCK < out ? o0 + XPU_BLOCK : out;
            for (size_t w = w0; w < w_end; w++) {
                for (size_t o = o0; o < o_end; o++) {
                    uint32_t word = (uint32_t)qweight[w * out + o];
                    uint8_t *dst = packed + o * row_bytes + 4 * w;
                    dst[0] = (uint8_t)word;
                    dst[1] = (uint8_t)(word >> 8);
                    dst[2] = (uint8_t)(word >> 16);
                    dst[3] = (uint8_t)(word >> 24);
                }
            }
        }
    }
    size_t groups = (size_t)mi4_layout_num_groups(m);
    const uint16_t *scales = (const uint16_t *)m->scales + (size_t)expert * groups * out;
    for (size_t o = 0; o < out; o++)
        for (size_t g = 0; g < groups; g++)
            scales_t[o * groups + g] = scales[g * out + o];
}
