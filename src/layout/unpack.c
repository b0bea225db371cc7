/* Reading the packed checkpoint arrays back into natural order: 4-bit codes
 * per (row = output index, column = input index), zero points and scales
 * per (group, row). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/half.h"
#include "layout/layout.h"
#include "moeint4_backend.h"

/* AWQ's interleave (the table moeint4_backend.h gives device backends too):
 * nibble i of a packed word holds column 8*w + awq_column_of_nibble[i];
 * awq_nibble_of_column is its inverse. */
static const uint8_t awq_column_of_nibble[8] = MOEINT4_AWQ_COLUMN_OF_NIBBLE;
static const uint8_t awq_nibble_of_column[8] = MOEINT4_AWQ_NIBBLE_OF_COLUMN;

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
    int32_t word =
        m->qzeros[((size_t)expert * groups + (size_t)group) * words_per_row + (size_t)row / 8];
    if (m->format == MOEINT4_FORMAT_AWQ)
        return (int)nibble(word, awq_nibble_of_column[row % 8]);
    return (int)nibble(word, (unsigned)(row % 8)) + m->zero_offset;
}

float mi4_layout_scale(const moeint4_quant_matrix *m, int expert, int group, int row)
{
    size_t groups = (size_t)mi4_layout_num_groups(m);
    uint16_t bits =
        ((const uint16_t *)
             m->scales)[((size_t)expert * groups + (size_t)group) * (size_t)m->out_features +
                        (size_t)row];
    return mi4_layout_scales_dtype(m) == MOEINT4_DTYPE_BF16 ? mi4_bf16_to_f32(bits)
                                                            : mi4_f16_to_f32(bits);
}

/* GPTQ: qweight [E][IN/8][OUT]; word (w, o) already holds columns 8w..8w+7
 * of row o, lowest nibble first: a transpose of 32-bit words. Reading along
 * rows keeps the loads sequential. */
static void row_words_gptq(const moeint4_quant_matrix *m, int expert, int row0, int rows, int word0,
                           int words, uint32_t *dst, size_t ld)
{
    size_t out = (size_t)m->out_features;
    const int32_t *base = m->qweight + (size_t)expert * ((size_t)m->in_features / 8) * out;
    for (int j = 0; j < words; j++) {
        const int32_t *src = base + (size_t)(word0 + j) * out + (size_t)row0;
        for (int r = 0; r < rows; r++)
            dst[(size_t)r * ld + (size_t)j] = (uint32_t)src[r];
    }
}

/* Transposes an 8 x 8 matrix of nibbles held as 8 words (nibble i of a[t] is
 * element [t][i]) in three rounds of block swaps: 4x4, 2x2, 1x1. */
static inline void transpose_nibbles(uint32_t a[8])
{
    for (int t = 0; t < 4; t++) {
        uint32_t x = a[t], y = a[t + 4];
        a[t] = (x & 0x0000ffffu) | (y << 16);
        a[t + 4] = (x >> 16) | (y & 0xffff0000u);
    }
    static const int pair_first[4] = { 0, 1, 4, 5 };
    for (int p = 0; p < 4; p++) {
        int t = pair_first[p];
        uint32_t x = a[t], y = a[t + 2];
        a[t] = (x & 0x00ff00ffu) | ((y << 8) & 0xff00ff00u);
        a[t + 2] = ((x >> 8) & 0x00ff00ffu) | (y & 0xff00ff00u);
    }
    for (int t = 0; t < 8; t += 2) {
        uint32_t x = a[t], y = a[t + 1];
        a[t] = (x & 0x0f0f0f0fu) | ((y << 4) & 0xf0f0f0f0u);
        a[t + 1] = ((x >> 4) & 0x0f0f0f0fu) | (y & 0xf0f0f0f0u);
    }
}

/* AWQ: qweight [E][IN][OUT/8]; word (k, w) holds rows 8w..8w+7 of column k,
 * nibble i = row 8w + awq_column_of_nibble[i]. The eight words of columns
 * 8j..8j+7 form an 8 x 8 nibble block [column][nibble]; transposed, nibble
 * row i is the row word of row 8w + awq_column_of_nibble[i]. */

static void row_words_awq(const moeint4_quant_matrix *m, int expert, int row0, int rows, int word0,
                          int words, uint32_t *dst, size_t ld)
{
    size_t words_per_col = (size_t)m->out_features / 8;
    const int32_t *base = m->qweight + (size_t)expert * (size_t)m->in_features * words_per_col;
    int row_end = row0 + rows;
    for (int j = 0; j < words; j++) {
        const int32_t *cols = base + (size_t)(word0 + j) * 8 * words_per_col;
        for (int w = row0 / 8; w * 8 < row_end; w++) {
            uint32_t block[8];
            for (int t = 0; t < 8; t++)
                block[t] = (uint32_t)cols[(size_t)t * words_per_col + (size_t)w];
            transpose_nibbles(block);
            for (int i = 0; i < 8; i++) {
                int row = 8 * w + awq_column_of_nibble[i];
                if (row >= row0 && row < row_end)
                    dst[(size_t)(row - row0) * ld + (size_t)j] = block[i];
            }
        }
    }
}

void mi4_layout_row_words(const moeint4_quant_matrix *m, int expert, int row0, int rows, int word0,
                          int words, uint32_t *dst, size_t ld)
{
    if (m->format == MOEINT4_FORMAT_AWQ)
        row_words_awq(m, expert, row0, rows, word0, words, dst, ld);
    else
        row_words_gptq(m, expert, row0, rows, word0, words, dst, ld);
}

/* Spreads the four bytes of a 32-bit value to the even bytes of a 64-bit one. */
static inline uint64_t spread_bytes(uint64_t v)
{
    v = (v | (v << 16)) & 0x0000ffff0000ffffull;
    return (v | (v << 8)) & 0x00ff00ff00ff00ffull;
}

/* The 8 codes of a row word as 8 bytes, lowest column first. */
static inline void expand_word(uint32_t word, uint8_t *dst)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* even nibbles to even bytes, odd nibbles to odd bytes, in one store */
    uint64_t bytes =
        spread_bytes(word & 0x0f0f0f0fu) | (spread_bytes((word >> 4) & 0x0f0f0f0fu) << 8);
    memcpy(dst, &bytes, sizeof bytes);
#else
    for (unsigned i = 0; i < 8; i++)
        dst[i] = (uint8_t)((word >> (4u * i)) & 15u);
#endif
}

/* 8 KiB blocks. GPTQ row words come 16 to a cache line along rows, AWQ
 * columns 128 rows to a line: fewer rows favour long runs of writes, more
 * rows fewer strided reads. 16 (GPTQ) and 32 (AWQ) measured best for a
 * 28672 x 4096 expert on Zen 3. */
void mi4_layout_block_shape(const moeint4_quant_matrix *m, int *rows, int *words)
{
    int awq = m->format == MOEINT4_FORMAT_AWQ;
    *rows = awq ? 32 : 16;
    *words = MI4_LAYOUT_BLOCK_WORDS / *rows;
}

void mi4_layout_decode_codes(const moeint4_quant_matrix *m, int expert, int row0, int rows,
                             int col0, int cols, uint8_t *codes, size_t ld)
{
    uint32_t block[MI4_LAYOUT_BLOCK_WORDS];
    int max_rows, max_words;
    mi4_layout_block_shape(m, &max_rows, &max_words);
    for (int r0 = 0; r0 < rows; r0 += max_rows) {
        int block_rows = rows - r0 < max_rows ? rows - r0 : max_rows;
        for (int j0 = 0; j0 < cols / 8; j0 += max_words) {
            int block_words = cols / 8 - j0 < max_words ? cols / 8 - j0 : max_words;
            mi4_layout_row_words(m, expert, row0 + r0, block_rows, col0 / 8 + j0, block_words,
                                 block, (size_t)max_words);
            for (int r = 0; r < block_rows; r++) {
                uint8_t *dst = codes + (size_t)(r0 + r) * ld + (size_t)j0 * 8;
                for (int j = 0; j < block_words; j++)
                    expand_word(block[r * max_words + j], dst + 8 * j);
            }
        }
    }
}

void mi4_layout_unpack_expert(const moeint4_quant_matrix *m, int expert, uint8_t *codes,
                              uint8_t *zeros, float *scales)
{
    int groups = mi4_layout_num_groups(m);
    int out = m->out_features;
    mi4_layout_decode_codes(m, expert, 0, out, 0, m->in_features, codes, (size_t)m->in_features);
    for (int g = 0; g < groups; g++) {
        for (int o = 0; o < out; o++) {
            size_t at = (size_t)g * (size_t)out + (size_t)o;
            zeros[at] = (uint8_t)mi4_layout_zero(m, expert, g, o);
            scales[at] = mi4_layout_scale(m, expert, g, o);
        }
    }
}
