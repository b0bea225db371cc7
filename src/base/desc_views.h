/* The two projections of a weights descriptor as quant matrices, so the
 * layout module sees one shape of input. Header-only so that plugins, which
 * link only the public ABI, use the same definition. */
#ifndef MOEINT4_BASE_DESC_VIEWS_H
#define MOEINT4_BASE_DESC_VIEWS_H

#include "moeint4.h"

static inline moeint4_dtype mi4_desc_scales_dtype(const moeint4_weights_desc *desc)
{
    return desc->scales_dtype == 0 ? MOEINT4_DTYPE_F16 : desc->scales_dtype;
}

/* w13: IN = K, OUT = 2N. */
static inline moeint4_quant_matrix mi4_desc_w13(const moeint4_weights_desc *desc)
{
    moeint4_quant_matrix m = {0};
    m.struct_size = sizeof m;
    m.format = desc->format;
    m.zero_offset = desc->zero_offset;
    m.num_experts = desc->num_local_experts;
    m.in_features = desc->hidden_size;
    m.out_features = 2 * desc->intermediate_size;
    m.group_size = desc->group_size;
    m.scales_dtype = mi4_desc_scales_dtype(desc);
    m.qweight = desc->w13_qweight;
    m.scales = desc->w13_scales;
    m.qzeros = desc->w13_qzeros;
    m.g_idx = desc->w13_g_idx;
    return m;
}

/* w2: IN = N, OUT = K. */
static inline moeint4_quant_matrix mi4_desc_w2(const moeint4_weights_desc *desc)
{
    moeint4_quant_matrix m = {0};
    m.struct_size = sizeof m;
    m.format = desc->format;
    m.zero_offset = desc->zero_offset;
    m.num_experts = desc->num_local_experts;
    m.in_features = desc->intermediate_size;
    m.out_features = desc->hidden_size;
    m.group_size = desc->group_size;
    m.scales_dtype = mi4_desc_scales_dtype(desc);
    m.qweight = desc->w2_qweight;
    m.scales = desc->w2_scales;
    m.qzeros = desc->w2_qzeros;
    m.g_idx = desc->w2_g_idx;
    return m;
}

/* Groups along IN: IN / group_size, or 1 for per-channel. */
static inline int mi4_num_groups(int in_features, int group_size)
{
    return group_size == -1 ? 1 : in_features / group_size;
}

static inline int mi4_effective_group_size(int in_features, int group_size)
{
    return group_size == -1 ? in_features : group_size;
}

#endif
