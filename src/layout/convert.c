/* Per-expert conversions: dequantization to f32 / bf16 and the XPU layout.
 * Dequantization walks [OUT][IN] in blocks of row words (8 codes each, see
 * mi4_layout_block_shape), and every code goes through a 16-entry table per
 * row holding (q - zero) * scale for its group, so the arithmetic (and the
 * bf16 rounding) happens 16 times per row and group instead of once per
 * weight. */
#include <stddef.h>
#include <stdint.h>

#include "base/half.h"
#include "layout/act_order.h"
#include "layout/layout.h"
#include "moeint4_backend.h"

#define MAX_BLOCK_ROWS 64

typedef struct value_tables {
    float f32[MAX_BLOCK_ROWS][16];
    uint16_t bf16[MAX_BLOCK_ROWS][16];
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

static void emit_f32(const uint32_t *words, int count, const float *table, float *dst)
{
    for (int j = 0; j < count; j++) {
        uint32_t word = words[j];
        for (unsigned i = 0; i < 8; i++)
            dst[8 * j + (int)i] = table[(word >> (4u * i)) & 15u];
    }
}

static void emit_bf16(const uint32_t *words, int count, const uint16_t *table, uint16_t *dst)
{
    for (int j = 0; j < count; j++) {
        uint32_t word = words[j];
        for (unsigned i = 0; i < 8; i++)
            dst[8 * j + (int)i] = table[(word >> (4u * i)) & 15u];
    }
}

/* Act-order (g_idx not k / group): each column looks its group up. Slower,
 * used where the weights are converted once (HIP's load, offline calls). */
static void dequantize_expert_act_order(const moeint4_quant_matrix *m, int expert, float *out_f32,
                                        uint16_t *out_bf16)
{
    int in = m->in_features, out = m->out_features;
    const int32_t *g_idx = m->g_idx + (size_t)expert * (size_t)in;
    for (int o = 0; o < out; o++) {
        for (int w = 0; w < in / 8; w++) {
            uint32_t word;
            mi4_layout_row_words(m, expert, o, 1, w, 1, &word, 1);
            for (int i = 0; i < 8; i++) {
                int k = 8 * w + i, group = g_idx[k];
                int q = (int)((word >> (4 * i)) & 15u);
                float value = (float)(q - mi4_layout_zero(m, expert, group, o)) *
                              mi4_layout_scale(m, expert, group, o);
                size_t at = (size_t)o * (size_t)in + (size_t)k;
                if (out_f32)
                    out_f32[at] = value;
                else
                    out_bf16[at] = mi4_f32_to_bf16(value);
            }
        }
    }
}

/* Exactly one of out_f32 / out_bf16 is non-NULL. */
static void dequantize_expert(const moeint4_quant_matrix *m, int expert, float *out_f32,
                              uint16_t *out_bf16)
{
    if (moeint4_quant_matrix_expert_has_act_order(m, expert)) {
        dequantize_expert_act_order(m, expert, out_f32, out_bf16);
        return;
    }
    int in = m->in_features, out = m->out_features, words = in / 8;
    int group_words = (m->group_size == -1 ? in : m->group_size) / 8;
    int max_rows, max_words;
    mi4_layout_block_shape(m, &max_rows, &max_words);
    if (max_rows > MAX_BLOCK_ROWS) {
        max_words = max_words * max_rows / MAX_BLOCK_ROWS;
        max_rows = MAX_BLOCK_ROWS;
    }
    uint32_t block[MI4_LAYOUT_BLOCK_WORDS];
    value_tables tables;
    for (int row0 = 0; row0 < out; row0 += max_rows) {
        int rows = out - row0 < max_rows ? out - row0 : max_rows;
        for (int word0 = 0; word0 < words; word0 += max_words) {
            int count = words - word0 < max_words ? words - word0 : max_words;
            mi4_layout_row_words(m, expert, row0, rows, word0, count, block, (size_t)max_words);
            /* one stretch of columns per group inside the block */
            for (int first = word0, end; first < word0 + count; first = end) {
                int group = first / group_words;
                end = (group + 1) * group_words < word0 + count ? (group + 1) * group_words
                                                                : word0 + count;
                fill_tables(m, expert, group, row0, rows, out_bf16 != NULL, &tables);
                for (int r = 0; r < rows; r++) {
                    const uint32_t *src = block + (size_t)r * (size_t)max_words + (first - word0);
                    size_t at = (size_t)(row0 + r) * (size_t)in + (size_t)first * 8;
                    if (out_bf16)
                        emit_bf16(src, end - first, tables.bf16[r], out_bf16 + at);
                    else
                        emit_f32(src, end - first, tables.f32[r], out_f32 + at);
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
 * bytes of columns 8w..8w+7 are the row word w in little-endian order. Row
 * words are gathered in square blocks (a transpose for GPTQ). */
#define XPU_BLOCK 32

void mi4_layout_xpu_expert(const moeint4_quant_matrix *m, int expert, uint8_t *packed,
                           uint16_t *scales_t, uint8_t *zeros_t)
{
    int out = m->out_features, words = m->in_features / 8;
    size_t row_bytes = (size_t)m->in_features / 2;
    uint32_t block[XPU_BLOCK * XPU_BLOCK];
    for (int w0 = 0; w0 < words; w0 += XPU_BLOCK) {
        int block_words = words - w0 < XPU_BLOCK ? words - w0 : XPU_BLOCK;
        for (int o0 = 0; o0 < out; o0 += XPU_BLOCK) {
            int block_rows = out - o0 < XPU_BLOCK ? out - o0 : XPU_BLOCK;
            mi4_layout_row_words(m, expert, o0, block_rows, w0, block_words, block, XPU_BLOCK);
            for (int r = 0; r < block_rows; r++) {
                uint8_t *dst = packed + (size_t)(o0 + r) * row_bytes + (size_t)w0 * 4;
                for (int j = 0; j < block_words; j++) {
                    uint32_t word = block[r * XPU_BLOCK + j];
                    dst[4 * j] = (uint8_t)word;
                    dst[4 * j + 1] = (uint8_t)(word >> 8);
                    dst[4 * j + 2] = (uint8_t)(word >> 16);
                    dst[4 * j + 3] = (uint8_t)(word >> 24);
                }
            }
        }
    }
    size_t groups = (size_t)mi4_layout_num_groups(m), out_size = (size_t)out;
    const uint16_t *scales = (const uint16_t *)m->scales + (size_t)expert * groups * out_size;
    for (size_t o = 0; o < out_size; o++)
        for (size_t g = 0; g < groups; g++)
            scales_t[o * groups + g] = scales[g * out_size + o];
    if (zeros_t)
        for (size_t o = 0; o < out_size; o++)
            for (size_t g = 0; g < groups; g++)
                zeros_t[o * groups + g] = (uint8_t)mi4_layout_zero(m, expert, (int)g, (int)o);
}
