/* Act-order (GPTQ desc_act): g_idx assigns input rows to groups in an order
 * of their own. Backends whose kernels need contiguous groups get a sorted
 * copy of the weights plus the input permutation to apply to x:
 *
 *   w13 (IN = K): input rows sorted by their expert's w13 g_idx (stable), so
 *       group g is rows [g*gs, (g+1)*gs); x is gathered the same way:
 *       W13' x' = W13 x with x'[i] = x[input_perm[i]].
 *   w2 (IN = N): its input is the intermediate a = act(gate, up). Instead of
 *       gathering a, w13's gate and up output rows are permuted by w2's sort
 *       order (a'[i] = a[perm2[i]]), and w2's input rows likewise, so
 *       W2' a' = W2 a and nothing but x needs a gather at run time.
 * Scales and zeros keep their group rows (a group keeps its index); only
 * their w13 output columns move with the gate/up rows. GPTQ formats only
 * (AWQ has no g_idx). */
#ifndef MOEINT4_LAYOUT_ACT_ORDER_H
#define MOEINT4_LAYOUT_ACT_ORDER_H

#include <stdint.h>

#include "moeint4.h"

/* Whether one matrix (or one expert of it) is act-order is the backend kit's
 * moeint4_quant_matrix_has_act_order / _expert_has_act_order
 * (moeint4_backend.h), so plugins and layout read g_idx the same way.
 * 1 when either projection of a validated descriptor is act-order. */
int mi4_layout_desc_has_act_order(const moeint4_weights_desc *desc);

/* perm[i] = the input row at sorted position i: rows in group order, stable.
 * Requires every group to hold exactly group_size rows (validated);
 * next_slot is scratch for one int per group. */
void mi4_layout_act_order_perm(const int32_t *g_idx, int in_features, int group_size, int32_t *perm,
                               int32_t *next_slot);

typedef struct mi4_layout_sorted {
    moeint4_weights_desc desc; /* no g_idx; points at the arrays below */
    int32_t *input_perm;       /* [E_l][K]: row i of w13 takes x[input_perm[i]] */
    int32_t *w13_qweight, *w13_qzeros, *w2_qweight;
    uint16_t *w13_scales;
} mi4_layout_sorted;

/* The sorted copy of a validated act-order descriptor (GPTQ_SYM/ASYM).
 * OUT_OF_MEMORY (message set into err) or SUCCESS. */
moeint4_status mi4_layout_sort_act_order(const moeint4_weights_desc *desc, mi4_layout_sorted *out,
                                         char *err, size_t err_cap);
/* Frees the arrays (input_perm too unless the caller took it and set it NULL). */
void mi4_layout_sorted_free(mi4_layout_sorted *sorted);

#endif
