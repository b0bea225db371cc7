/* Reading the packed checkpoint arrays back into natural order: 4-bit codes
 * per (row = output index, column = input index), zero points and scales
 * per (group, row). */
#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
#include "layout/layout.h"

/* AWQ stores column 8*w + c of word w in nibble awq_nibble_of_column[c]
 * (the inverse of its interleave {0,2,4,6,1,3,5,7}). */
static const uint8_t awq_nibble_of_column[8] = {0, 4, 1, 5, 2, 6, 3, 7};

static inline unsigned nibble(int32_t word, unsigned index)
{
    return ((uint32_t)word >> (4u * index)) & 15u;
}

int mi4_layout_zero(const moeint4_quant_matrix *m, int expert, int group, int row)
{
    if (m->format == MOEINT4_FORMAT_GPTQ_SYM)
        return 8;
    size_t words_per_row = (size_t)m->out_features / 8;
    size_t groups = (size_t)mi4_layout_num_groups(m);
    int32_t word = m->qzeros[((size_t)expert * groups + (size_t)group) * words_per_row +
                             (size_t)row / 8];
    if (m->format == MOEINT4_FORMAT_AWQ)
        return (int)nibble(word, awq_nibble_of_column[row % 8]);
    return (int)nibble(word, (unsigned)(row % 8)) + m->zero_offset;
}

float mi4_layout_scale(const moeint4_quant_matrix *m, int expert, int group, int row)
{
    size_t groups = (size_t)mi4_layout_num_groups(m);
    uint16_t bits = ((const uint16_t *)m->scales)[((size_t)expert * groups + (size_t)group) *
                                                      (size_t)m->out_features +
                                                  (size_t)row];
    return mi4_layout_scales_dtype(m) == MOEINT4_DTYPE_BF16 ? mi4_bf16_to_f32(bits)
                                                            : mi4_f16_to_f32(bits);
}

/* GPTQ: qweight [E][IN/8][OUT]; word (w, o) holds columns 8w..8w+7 of row o,
 * lowest nibble first. Reading row-contiguous words keeps loads sequential. */
static void decode_gptq(const moeint4_quant_matrix *m, int expert, int row0, int rows, int col0,
                        int cols, uint8_t *codes, size_t ld)
{
    size_t out = (size_t)m->out_features;
    const int32_t *base = m->qweight + (size_t)expert * ((size_t)m->in_features / 8) * out;
    for (int w = 0; w < cols / 8; w++) {
        const int32_t *words = base + ((size_t)(col0 / 8 + w)) * out + (size_t)row0;
        for (int r = 0; r < rows; r++) {
            uint32_t word = (uint32_t)words[r];
            uint8_t *dst = codes + (size_t)r * ld + (size_t)w * 8;
            for (unsigned i = 0; i < 8; i++)
                dst[i] = (uint8_t)((word >> (4u * i)) & 15u);
        }
    }
}

/* AWQ: qweight [E][IN][OUT/8]; word (k, w) holds rows 8w..8w+7 of column k in
 * AWQ's interleaved nibble order. */
static void decode_awq(const moeint4_quant_matrix *m, int expert, int row0, int rows, int col0,
                       int cols, uint8_t *codes, size_t ld)
{
    size_t words_per_col = (size_t)m->out_features / 8;
    const int32_t *base = m->qweight + (size_t)expert * (size_t)m->in_features * words_per_col;
    for (int c = 0; c < cols; c++) {
        const int32_t *words = base + (size_t)(col0 + c) * words_per_col;
        for (int r = 0; r < rows; r++) {
            int row = row0 + r;
            codes[(size_t)r * ld + (size_t)c] =
                (uint8_t)nibble(words[row / 8], awq_nibble_of_column[row % 8]);
        }
    }
}

void mi4_layout_decode_codes(const moeint4_quant_matrix *m, int expert, int row0, int rows,
                             int col0, int cols, uint8_t *codes, size_t ld)
{
    if (m->format == MOEINT4_FORMAT_AWQ)
        decode_awq(m, expert, row0, rows, col0, cols, codes, ld);
    else
        decode_gptq(m, expert, row0, rows, col0, cols, codes, ld);
}

void mi4_layout_unpack_expert(const moeint4_quant_matrix *m, int expert, uint8_t *codes,
                              uint8_t *zeros, float *scales)
{
    int groups = mi4_layout_num_groups(m);
    int out = m->out_features;
    /* Blocks of 64 rows keep the GPTQ reads and the AWQ writes cache friendly. */
    for (int row0 = 0; row0 < out; row0 += 64) {
        int rows = out - row0 < 64 ? out - row0 : 64;
        mi4_layout_decode_codes(m, expert, row0, rows, 0, m->in_features,
                                codes + (size_t)row0 * (size_t)m->in_features,
                                (size_t)m->in_features);
    }
    for (int g = 0; g < groups; g++) {
        for (int o = 0; o < out; o++) {
            size_t at = (size_t)g * (size_t)out + (size_t)o;
            zeros[at] = (uint8_t)mi4_layout_zero(m, expert, g, o);
            scales[at] = mi4_layout_scale(m, expert, g, o);
        }
    }
}
