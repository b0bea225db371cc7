/* Internal interface of the layout module: checkpoint formats -> the layouts
 * backends want. Pure host functions; the public moeint4_layout_* calls are
 * thin wrappers that clear/set the thread's error.
 *
 * Shape rules (what mi4_layout_validate enforces):
 *  - num_experts, in_features (IN), out_features (OUT) > 0.
 *  - IN % 8 == 0 for every format: GPTQ packs 8 codes along IN, and every
 *    backend layout (the XPU one packs IN in pairs) relies on it.
 *  - IN % group_size == 0 unless group_size == -1 (per-channel, G = 1).
 *  - OUT % 8 == 0 for formats that pack along OUT (GPTQ_ASYM qzeros, AWQ);
 *    GPTQ_SYM accepts any OUT (nothing is packed along OUT).
 *  - zero_offset 0, or 1 for GPTQ_ASYM only.
 *  - qzeros is required for GPTQ_ASYM and AWQ, ignored for GPTQ_SYM.
 *  - g_idx, when given: entries in [0, G) (else INVALID_ARGUMENT); trivial
 *    (k / group_size) or, for GPTQ only, act-order with exactly group_size
 *    rows per group (act_order.h sorts such weights; AWQ act-order is
 *    UNSUPPORTED). */
#ifndef MOEINT4_LAYOUT_LAYOUT_H
#define MOEINT4_LAYOUT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

/* The formats and group sizes the library reads: the one list every check
 * (descriptor, oracle problem, quant matrix, built-in backends) uses. */
#define MI4_LAYOUT_GROUP_SIZES_TEXT "32, 64, 128 or -1"
int mi4_layout_is_format(moeint4_format format);
int mi4_layout_is_group_size(int group_size);

/* Checks a quant matrix as prepare does: format, sizes (IN % 8, OUT % 8 as
 * the format needs, IN % group_size), group size in {32,64,128,-1}, byte
 * counts that fit size_t, required pointers, scales finite and > 0, g_idx
 * trivial or GPTQ act-order. `name` ("w13", "w2") prefixes every
 * message, e.g. "w13_scales[2][0][17] = nan is not a finite positive scale". */
moeint4_status mi4_layout_validate(const moeint4_quant_matrix *m, const char *name);

/* mi4_layout_validate in two steps, so that a caller can check its own
 * outputs between them: _shape reads no array element (struct_size, enums,
 * shape, byte counts, required pointers); _data reads the arrays (scales,
 * g_idx) and needs _shape to have passed. */
moeint4_status mi4_layout_validate_shape(const moeint4_quant_matrix *m, const char *name);
moeint4_status mi4_layout_validate_data(const moeint4_quant_matrix *m, const char *name);

/* One expert in natural order, what every backend starts from:
 * codes [OUT][IN] uint8 0..15, zeros [G][OUT] uint8 (the value subtracted:
 * 8 for GPTQ_SYM; stored zero + zero_offset for GPTQ_ASYM; stored zero for
 * AWQ), scales [G][OUT] f32. The caller sizes the buffers. `m` must have
 * passed mi4_layout_validate. */
void mi4_layout_unpack_expert(const moeint4_quant_matrix *m, int expert, uint8_t *codes,
                              uint8_t *zeros, float *scales);

/* ---- finer-grained helpers for backends (all need a validated `m`) ---- */

/* a * b * c * d into *product; 0 (and *product untouched) when it would
 * overflow size_t, else 1. */
int mi4_layout_checked_product(size_t a, size_t b, size_t c, size_t d, size_t *product);

/* F16 or BF16 (scales_dtype 0 means F16). */
moeint4_dtype mi4_layout_scales_dtype(const moeint4_quant_matrix *m);

/* G: IN / group_size, or 1 per-channel. */
int mi4_layout_num_groups(const moeint4_quant_matrix *m);

/* The value subtracted from codes of (expert, group, row = output index):
 * 8 | stored zero + zero_offset | stored zero, as for unpack_expert. */
int mi4_layout_zero(const moeint4_quant_matrix *m, int expert, int group, int row);

/* The scale of (expert, group, row) as f32 (exact). */
float mi4_layout_scale(const moeint4_quant_matrix *m, int expert, int group, int row);

/* Row words of rows [row0, row0 + rows) and column words [word0, word0 +
 * words) of one expert into dst[r * ld + j] (r, j relative): the word holds
 * the codes of columns 8(word0 + j) .. 8(word0 + j) + 7 of that row, lowest
 * nibble = lowest column (GPTQ's packing, transposed to row-major; as bytes in
 * little-endian order it is the XPU layout). The block must lie inside
 * [OUT] x [IN/8]. */
void mi4_layout_row_words(const moeint4_quant_matrix *m, int expert, int row0, int rows, int word0,
                          int words, uint32_t *dst, size_t ld);

/* A block shape (rows x words, rows * words == MI4_LAYOUT_BLOCK_WORDS) that
 * reads this format's qweight efficiently through mi4_layout_row_words. */
#define MI4_LAYOUT_BLOCK_WORDS 2048
void mi4_layout_block_shape(const moeint4_quant_matrix *m, int *rows, int *words);

/* Codes of rows [row0, row0 + rows) and columns [col0, col0 + cols) of one
 * expert into codes[r * ld + c] (r, c relative). col0 and cols must be
 * multiples of 8; the block must lie inside [OUT] x [IN]. */
void mi4_layout_decode_codes(const moeint4_quant_matrix *m, int expert, int row0, int rows,
                             int col0, int cols, uint8_t *codes, size_t ld);

/* One expert dequantized to [OUT][IN]: exact f32 (q - zero) * scale, or that
 * value rounded once to bf16 (nearest even). */
void mi4_layout_dequantize_expert_f32(const moeint4_quant_matrix *m, int expert, float *out);
void mi4_layout_dequantize_expert_bf16(const moeint4_quant_matrix *m, int expert, uint16_t *out);

/* One expert (any format, no act-order) in the XPU layout: packed
 * [OUT][IN/2] (byte j of row o = code(2j) | code(2j+1) << 4), scales_t
 * [OUT][G] (the source's 16-bit scale bit patterns, transposed) and, unless
 * zeros_t is NULL, zeros_t [OUT][G] (mi4_layout_zero's values). */
void mi4_layout_xpu_expert(const moeint4_quant_matrix *m, int expert, uint8_t *packed,
                           uint16_t *scales_t, uint8_t *zeros_t);

#endif
