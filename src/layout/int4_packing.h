/* Where the int4 checkpoint formats keep their codes, as data a device
 * kernel can take instead of knowing the formats: which axis a qweight word
 * packs, which nibble holds which position, and the zero point rule.
 * Header-only so the GPU plugins (which link only the public ABI) share it
 * with layout/unpack.c. */
#ifndef MOEINT4_LAYOUT_INT4_PACKING_H
#define MOEINT4_LAYOUT_INT4_PACKING_H

#include "moeint4.h"

/* AWQ interleaves a word's 8 output columns: column 8w + c sits in nibble
 * MI4_AWQ_NIBBLE_OF_COLUMN[c]; its inverse is MI4_AWQ_COLUMN_OF_NIBBLE. */
#define MI4_AWQ_NIBBLE_OF_COLUMN {0, 4, 1, 5, 2, 6, 3, 7}
#define MI4_AWQ_COLUMN_OF_NIBBLE {0, 2, 4, 6, 1, 3, 5, 7}

typedef struct mi4_int4_packing {
    /* 1: qweight [E][IN][OUT/8], a word holds 8 outputs of one input (AWQ);
     * 0: qweight [E][IN/8][OUT], a word holds 8 inputs of one output (GPTQ). */
    int weights_along_out;
    unsigned char weight_nibble[8]; /* nibble of position p (0..7) inside a qweight word */
    int has_zeros;                  /* 0: the zero point is 8 (symmetric) */
    unsigned char zero_nibble[8];   /* nibble of output column c % 8 inside a qzeros word */
    int zero_offset;                /* added to a stored zero */
} mi4_int4_packing;

static inline mi4_int4_packing mi4_layout_int4_packing(const moeint4_quant_matrix *m)
{
    static const unsigned char awq[8] = MI4_AWQ_NIBBLE_OF_COLUMN;
    mi4_int4_packing p;
    int is_awq = m->format == MOEINT4_FORMAT_AWQ;
    p.weights_along_out = is_awq;
    p.has_zeros = m->format != MOEINT4_FORMAT_GPTQ_SYM;
    p.zero_offset = m->format == MOEINT4_FORMAT_GPTQ_ASYM ? m->zero_offset : 0;
    for (int i = 0; i < 8; i++) {
        p.weight_nibble[i] = is_awq ? awq[i] : (unsigned char)i;
        p.zero_nibble[i] = p.weight_nibble[i];
    }
    return p;
}

#endif
