/* Sorting act-order GPTQ weights into contiguous groups (act_order.h). */
#include "layout/act_order.h"

#include <string.h>

#include "base/alloc.h"
#include "moeint4_backend.h"
#include "base/error.h"
#include "layout/layout.h"

int mi4_layout_desc_has_act_order(const moeint4_weights_desc *desc)
{
    moeint4_quant_matrix w13 = moeint4_desc_w13(desc), w2 = moeint4_desc_w2(desc);
    return moeint4_quant_matrix_has_act_order(&w13) || moeint4_quant_matrix_has_act_order(&w2);
}

void mi4_layout_act_order_perm(const int32_t *g_idx, int in_features, int group_size, int32_t *perm,
                               int32_t *next_slot)
{
    int group = moeint4_effective_group_size(in_features, group_size);
    int groups = in_features / group;
    if (!g_idx || groups == 1) {
        for (int k = 0; k < in_features; k++)
            perm[k] = k;
        return;
    }
    /* group g's rows go to [g * group, ...) in input order: one pass */
    for (int g = 0; g < groups; g++)
        next_slot[g] = g * group;
    for (int k = 0; k < in_features; k++)
        perm[next_slot[g_idx[k]]++] = k;
}

void mi4_layout_sorted_free(mi4_layout_sorted *sorted)
{
    mi4_free(sorted->input_perm);
    mi4_free(sorted->w13_qweight);
    mi4_free(sorted->w13_qzeros);
    mi4_free(sorted->w2_qweight);
    mi4_free(sorted->w13_scales);
    memset(sorted, 0, sizeof *sorted);
}

/* GPTQ qweight [IN/8][OUT] of one expert from natural codes [OUT_src][IN_src]:
 * out column o reads source row out_map[o], in row i reads source column in_map[i]. */
static void pack_gptq(const uint8_t *codes, int in, int out, const int32_t *in_map,
                      const int32_t *out_map, int32_t *qweight)
{
    memset(qweight, 0, sizeof(int32_t) * (size_t)(in / 8) * (size_t)out);
    for (int o = 0; o < out; o++) {
        const uint8_t *row = codes + (size_t)out_map[o] * (size_t)in;
        for (int i = 0; i < in; i++) {
            uint32_t code = row[in_map[i]];
            qweight[(size_t)(i / 8) * (size_t)out + (size_t)o] |= (int32_t)(code << (4 * (i % 8)));
        }
    }
}

/* w13 output row o' of the sorted copy: gate row perm2[o'] or up row N + perm2[o' - N]. */
static void w13_out_map(const int32_t *perm2, int n, int32_t *out_map)
{
    for (int o = 0; o < n; o++) {
        out_map[o] = perm2[o];
        out_map[n + o] = n + perm2[o];
    }
}

static void sort_expert(const moeint4_weights_desc *d, int e, mi4_layout_sorted *s, uint8_t *codes,
                        int32_t *perm2, int32_t *out_map, int32_t *identity, int32_t *next_slot)
{
    int k = d->hidden_size, n = d->intermediate_size;
    moeint4_quant_matrix w13 = moeint4_desc_w13(d), w2 = moeint4_desc_w2(d);
    int g13 = mi4_layout_num_groups(&w13);
    int32_t *perm1 = s->input_perm + (size_t)e * (size_t)k;
    mi4_layout_act_order_perm(d->w13_g_idx ? d->w13_g_idx + (size_t)e * k : NULL, k, d->group_size,
                              perm1, next_slot);
    mi4_layout_act_order_perm(d->w2_g_idx ? d->w2_g_idx + (size_t)e * n : NULL, n, d->group_size,
                              perm2, next_slot);
    w13_out_map(perm2, n, out_map);
    mi4_layout_decode_codes(&w13, e, 0, 2 * n, 0, k, codes, (size_t)k);
    pack_gptq(codes, k, 2 * n, perm1, out_map, s->w13_qweight + (size_t)e * (k / 8) * 2 * n);
    const uint16_t *src_scales = (const uint16_t *)d->w13_scales + (size_t)e * g13 * 2 * n;
    uint16_t *dst_scales = s->w13_scales + (size_t)e * g13 * 2 * n;
    for (int g = 0; g < g13; g++)
        for (int o = 0; o < 2 * n; o++)
            dst_scales[(size_t)g * 2 * n + o] = src_scales[(size_t)g * 2 * n + out_map[o]];
    if (s->w13_qzeros) {
        int32_t *dst = s->w13_qzeros + (size_t)e * g13 * (2 * n / 8);
        memset(dst, 0, sizeof(int32_t) * (size_t)g13 * (2 * n / 8));
        for (int g = 0; g < g13; g++)
            for (int o = 0; o < 2 * n; o++) {
                /* the stored nibble, offset removed again by the same zero_offset */
                int zero = mi4_layout_zero(&w13, e, g, out_map[o]) - d->zero_offset;
                dst[(size_t)g * (2 * n / 8) + o / 8] |= (int32_t)((uint32_t)zero << (4 * (o % 8)));
            }
    }
    mi4_layout_decode_codes(&w2, e, 0, k, 0, n, codes, (size_t)n);
    pack_gptq(codes, n, k, perm2, identity, s->w2_qweight + (size_t)e * (n / 8) * k);
}

moeint4_status mi4_layout_sort_act_order(const moeint4_weights_desc *desc, mi4_layout_sorted *out,
                                         char *err, size_t err_cap)
{
    mi4_layout_sorted s;
    memset(&s, 0, sizeof s);
    size_t e = (size_t)desc->num_local_experts, k = (size_t)desc->hidden_size;
    size_t n = (size_t)desc->intermediate_size;
    moeint4_quant_matrix w13 = moeint4_desc_w13(desc);
    size_t g13 = (size_t)mi4_layout_num_groups(&w13);
    int asym = desc->format == MOEINT4_FORMAT_GPTQ_ASYM;
    size_t big = k > 2 * n ? k : 2 * n;
    s.input_perm = mi4_malloc(sizeof(int32_t) * e * k);
    s.w13_qweight = mi4_malloc(sizeof(int32_t) * e * (k / 8) * 2 * n);
    s.w13_scales = mi4_malloc(sizeof(uint16_t) * e * g13 * 2 * n);
    s.w13_qzeros = asym ? mi4_malloc(sizeof(int32_t) * e * g13 * (2 * n / 8)) : NULL;
    s.w2_qweight = mi4_malloc(sizeof(int32_t) * e * (n / 8) * k);
    uint8_t *codes = mi4_malloc(2 * n * k);
    int32_t *scratch = mi4_malloc(sizeof(int32_t) * (n + 2 * n + 2 * big));
    if (!s.input_perm || !s.w13_qweight || !s.w13_scales || (asym && !s.w13_qzeros) ||
        !s.w2_qweight || !codes || !scratch) {
        mi4_free(codes);
        mi4_free(scratch);
        mi4_layout_sorted_free(&s);
        return mi4_fail_into(err, err_cap, MOEINT4_OUT_OF_MEMORY,
                             "no memory to sort %zu act-order experts into contiguous groups", e);
    }
    int32_t *perm2 = scratch, *out_map = scratch + n, *identity = scratch + 3 * n;
    int32_t *next_slot = identity + big; /* one per group: groups <= in_features <= big */
    for (size_t i = 0; i < big; i++)
        identity[i] = (int32_t)i;
    for (size_t x = 0; x < e; x++)
        sort_expert(desc, (int)x, &s, codes, perm2, out_map, identity, next_slot);
    mi4_free(codes);
    mi4_free(scratch);
    s.desc = *desc;
    s.desc.struct_size = sizeof s.desc;
    s.desc.w13_qweight = s.w13_qweight;
    s.desc.w13_scales = s.w13_scales;
    s.desc.w13_qzeros = s.w13_qzeros;
    s.desc.w13_g_idx = NULL;
    s.desc.w2_qweight = s.w2_qweight;
    s.desc.w2_g_idx = NULL; /* w2's scales and zeros are unchanged: rows keep their groups */
    *out = s;
    return MOEINT4_SUCCESS;
}

/* The plugin kit's view of a sorted copy (moeint4_backend.h). */
struct moeint4_backend_sorted {
    mi4_layout_sorted sorted;
};

moeint4_status moeint4_backend_sort_act_order(const moeint4_weights_desc *desc,
                                              moeint4_backend_sorted **sorted,
                                              const moeint4_weights_desc **sorted_desc,
                                              const int32_t **input_perm, char *err, size_t err_cap)
{
    *sorted = NULL, *sorted_desc = desc, *input_perm = NULL;
    if (!mi4_layout_desc_has_act_order(desc))
        return MOEINT4_SUCCESS; /* nothing to sort: the descriptor as it is */
    moeint4_backend_sorted *s = mi4_malloc(sizeof *s);
    if (!s)
        return mi4_fail_into(err, err_cap, MOEINT4_OUT_OF_MEMORY,
                             "no memory to sort act-order experts");
    moeint4_status status = mi4_layout_sort_act_order(desc, &s->sorted, err, err_cap);
    if (status != MOEINT4_SUCCESS) {
        mi4_free(s);
        return status;
    }
    *sorted = s;
    *sorted_desc = &s->sorted.desc;
    *input_perm = s->sorted.input_perm;
    return MOEINT4_SUCCESS;
}

void moeint4_backend_sorted_free(moeint4_backend_sorted *sorted)
{
    if (!sorted)
        return;
    mi4_layout_sorted_free(&sorted->sorted);
    mi4_free(sorted);
}
