/* Internal interface of the layout module: checkpoint formats -> the layouts
 * backends want. Pure host functions; the public moeint4_layout_* calls are
 * thin wrappers that clear/set the thread's error. */
#ifndef MOEINT4_LAYOUT_LAYOUT_H
#define MOEINT4_LAYOUT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

/* Checks a quant matrix as prepare does: format, sizes (IN % 8, OUT % 8 as
 * the format needs, IN % group_size), group size in {32,64,128,-1}, byte
 * counts that fit size_t, required pointers, scales finite and > 0, g_idx
 * trivial (non-trivial: UNSUPPORTED). `name` ("w13", "w2") prefixes every
 * message, e.g. "w13_scales[2][0][17] = nan is not a finite positive scale". */
moeint4_status mi4_layout_validate(const moeint4_quant_matrix *m, const char *name);

/* One expert in natural order, what every backend starts from:
 * codes [OUT][IN] uint8 0..15, zeros [G][OUT] uint8 (the value subtracted:
 * 8 for GPTQ_SYM; stored zero + zero_offset for GPTQ_ASYM; stored zero for
 * AWQ), scales [G][OUT] f32. The caller sizes the buffers. `m` must have
 * passed mi4_layout_validate. */
void mi4_layout_unpack_expert(const moeint4_quant_matrix *m, int expert, uint8_t *codes,
                              uint8_t *zeros, float *scales);

#endif
