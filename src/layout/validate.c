/* mi4_layout_validate: everything a quant matrix must satisfy before any
 * conversion reads it. Cheap checks (enums, shapes, sizes, pointers) come
 * first so that garbage is refused before a single array element is read. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "moeint4_backend.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/half.h"
#include "layout/layout.h"

int mi4_layout_checked_product(size_t a, size_t b, size_t c, size_t d, size_t *product)
{
    size_t factors[4] = { a, b, c, d };
    size_t result = 1;
    for (int i = 0; i < 4; i++) {
        if (factors[i] != 0 && result > SIZE_MAX / factors[i])
            return 0;
        result *= factors[i];
    }
    *product = result;
    return 1;
}

moeint4_dtype mi4_layout_scales_dtype(const moeint4_quant_matrix *m)
{
    return m->scales_dtype == 0 ? MOEINT4_DTYPE_F16 : m->scales_dtype;
}

int mi4_layout_num_groups(const moeint4_quant_matrix *m)
{
    return moeint4_num_groups(m->in_features, m->group_size);
}

int mi4_layout_is_format(moeint4_format format)
{
    return format == MOEINT4_FORMAT_GPTQ_SYM || format == MOEINT4_FORMAT_GPTQ_ASYM ||
           format == MOEINT4_FORMAT_AWQ;
}

int mi4_layout_is_group_size(int group_size)
{
    return group_size == 32 || group_size == 64 || group_size == 128 || group_size == -1;
}

static const char *format_name(moeint4_format format)
{
    switch (format) {
    case MOEINT4_FORMAT_GPTQ_SYM: return "GPTQ_SYM";
    case MOEINT4_FORMAT_GPTQ_ASYM: return "GPTQ_ASYM";
    case MOEINT4_FORMAT_AWQ: return "AWQ";
    }
    return "?";
}

static moeint4_status check_enums(const moeint4_quant_matrix *m, const char *name)
{
    if (!mi4_layout_is_format(m->format))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.format = %d is not GPTQ_SYM (1), GPTQ_ASYM (2) or AWQ (3)", name,
                        (int)m->format);
    if (m->format == MOEINT4_FORMAT_GPTQ_ASYM) {
        if (m->zero_offset != 0 && m->zero_offset != 1)
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "%s.zero_offset = %d must be 0, or 1 for AutoGPTQ v1 checkpoints", name,
                            m->zero_offset);
    } else if (m->zero_offset != 0) {
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.zero_offset = %d must be 0 for %s (only GPTQ_ASYM has the AutoGPTQ "
                        "v1 offset)",
                        name, m->zero_offset, format_name(m->format));
    }
    if (m->scales_dtype != 0 && m->scales_dtype != MOEINT4_DTYPE_F16 &&
        m->scales_dtype != MOEINT4_DTYPE_BF16)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.scales_dtype = %d must be F16 (2, or 0 for the default) or BF16 (3)",
                        name, (int)m->scales_dtype);
    if (!mi4_layout_is_group_size(m->group_size))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.group_size = %d must be " MI4_LAYOUT_GROUP_SIZES_TEXT " (per-channel)",
                        name, m->group_size);
    return MOEINT4_SUCCESS;
}

static moeint4_status check_shape(const moeint4_quant_matrix *m, const char *name)
{
    if (m->num_experts <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s.num_experts = %d must be positive", name,
                        m->num_experts);
    if (m->in_features <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s.in_features = %d must be positive", name,
                        m->in_features);
    if (m->out_features <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s.out_features = %d must be positive", name,
                        m->out_features);
    if (m->in_features % 8 != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.in_features = %d is not a multiple of 8 (int4 codes are packed 8 "
                        "per int32 along IN by GPTQ and in pairs by backend layouts)",
                        name, m->in_features);
    if (m->group_size > 0 && m->in_features % m->group_size != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.in_features = %d is not a multiple of group_size %d", name,
                        m->in_features, m->group_size);
    if (m->format != MOEINT4_FORMAT_GPTQ_SYM && m->out_features % 8 != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s.out_features = %d is not a multiple of 8 (%s packs 8 %s per int32 "
                        "along OUT)",
                        name, m->out_features, format_name(m->format),
                        m->format == MOEINT4_FORMAT_AWQ ? "codes and zeros" : "zeros");
    return MOEINT4_SUCCESS;
}

/* Every array the matrix points at must have a byte count that fits size_t. */
static moeint4_status check_sizes(const moeint4_quant_matrix *m, const char *name)
{
    size_t experts = (size_t)m->num_experts, in = (size_t)m->in_features;
    size_t out = (size_t)m->out_features, groups = (size_t)mi4_layout_num_groups(m);
    size_t bytes;
    int packed_along_in = m->format != MOEINT4_FORMAT_AWQ;
    if (!mi4_layout_checked_product(experts, packed_along_in ? in / 8 : in,
                                    packed_along_in ? out : out / 8, sizeof(int32_t), &bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s_qweight: %d experts x %d x %d int4 codes overflow size_t bytes", name,
                        m->num_experts, m->in_features, m->out_features);
    if (!mi4_layout_checked_product(experts, groups, out, sizeof(uint16_t), &bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s_scales: %d experts x %zu groups x %d scales overflow size_t bytes",
                        name, m->num_experts, groups, m->out_features);
    if (!mi4_layout_checked_product(experts, in, sizeof(int32_t), 1, &bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s_g_idx: %d experts x %d entries overflow size_t bytes", name,
                        m->num_experts, m->in_features);
    return MOEINT4_SUCCESS;
}

static moeint4_status check_pointers(const moeint4_quant_matrix *m, const char *name)
{
    if (!m->qweight)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s_qweight is NULL", name);
    if (!m->scales)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s_scales is NULL", name);
    if (m->format != MOEINT4_FORMAT_GPTQ_SYM && !m->qzeros)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s_qzeros is NULL (required for %s)", name,
                        format_name(m->format));
    /* Symmetric weights have no zero points: a caller handing some in has
     * most likely mislabelled an asymmetric checkpoint. */
    if (m->format == MOEINT4_FORMAT_GPTQ_SYM && m->qzeros)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s_qzeros is not NULL but format is GPTQ_SYM, which has no zero points "
                        "(an asymmetric GPTQ checkpoint is GPTQ_ASYM)",
                        name);
    return MOEINT4_SUCCESS;
}

/* Finite and > 0, tested on the bit pattern: sign clear, not zero, exponent
 * not all ones (F16: 5 bits at 10; BF16: 8 bits at 7). */
static moeint4_status check_scales(const moeint4_quant_matrix *m, const char *name)
{
    int is_bf16 = mi4_layout_scales_dtype(m) == MOEINT4_DTYPE_BF16;
    uint16_t exponent_mask = is_bf16 ? 0x7f80u : 0x7c00u;
    const uint16_t *scales = (const uint16_t *)m->scales;
    size_t per_expert = (size_t)mi4_layout_num_groups(m) * (size_t)m->out_features;
    size_t count = (size_t)m->num_experts * per_expert;
    for (size_t i = 0; i < count; i++) {
        uint16_t bits = scales[i];
        if ((bits & 0x8000u) == 0 && bits != 0 && (bits & exponent_mask) != exponent_mask)
            continue;
        float value = is_bf16 ? mi4_bf16_to_f32(bits) : mi4_f16_to_f32(bits);
        size_t expert = i / per_expert, rest = i % per_expert;
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s_scales[%zu][%zu][%zu] = %g is not a finite positive scale", name,
                        expert, rest / (size_t)m->out_features, rest % (size_t)m->out_features,
                        (double)value);
    }
    return MOEINT4_SUCCESS;
}

/* Entries in [0, G); a non-trivial map (act-order) must be GPTQ and give
 * every group exactly group_size rows, which is what GPTQ's desc_act writes
 * and what sorting the rows into contiguous groups needs. */
static moeint4_status check_g_idx(const moeint4_quant_matrix *m, const char *name)
{
    if (!m->g_idx)
        return MOEINT4_SUCCESS;
    int groups = mi4_layout_num_groups(m);
    int group_size = moeint4_effective_group_size(m->in_features, m->group_size);
    int act_order = 0;
    for (int e = 0; e < m->num_experts; e++) {
        const int32_t *row = m->g_idx + (size_t)e * (size_t)m->in_features;
        for (int k = 0; k < m->in_features; k++) {
            if (row[k] < 0 || row[k] >= groups)
                return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                "%s_g_idx[%d][%d] = %d is outside [0, %d)", name, e, k, (int)row[k],
                                groups);
            if (row[k] != k / group_size && !act_order) {
                if (m->format == MOEINT4_FORMAT_AWQ)
                    return mi4_fail(MOEINT4_UNSUPPORTED,
                                    "%s_g_idx[%d][%d] = %d (trivial would be %d): AWQ has no "
                                    "act-order; only g_idx[k] == k / group_size is accepted",
                                    name, e, k, (int)row[k], k / group_size);
                act_order = 1;
            }
        }
    }
    if (!act_order)
        return MOEINT4_SUCCESS;
    int *rows_in_group = mi4_malloc(sizeof(int) * (size_t)groups);
    if (!rows_in_group)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY,
                        "no memory to count the rows of %s_g_idx's %d groups", name, groups);
    moeint4_status status = MOEINT4_SUCCESS;
    for (int e = 0; e < m->num_experts && status == MOEINT4_SUCCESS; e++) {
        const int32_t *row = m->g_idx + (size_t)e * (size_t)m->in_features;
        memset(rows_in_group, 0, sizeof(int) * (size_t)groups);
        for (int k = 0; k < m->in_features; k++)
            rows_in_group[row[k]]++;
        for (int g = 0; g < groups; g++) {
            if (rows_in_group[g] != group_size) {
                status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                  "%s_g_idx[%d] puts %d rows in group %d; act-order g_idx gives "
                                  "every group exactly group_size = %d rows",
                                  name, e, rows_in_group[g], g, group_size);
                break;
            }
        }
    }
    mi4_free(rows_in_group);
    return status;
}

moeint4_status mi4_layout_validate_shape(const moeint4_quant_matrix *m, const char *name)
{
    if (!name)
        name = "matrix";
    if (!m)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL", name);
    moeint4_status status;
    if ((status = check_enums(m, name)) != MOEINT4_SUCCESS ||
        (status = check_shape(m, name)) != MOEINT4_SUCCESS ||
        (status = check_sizes(m, name)) != MOEINT4_SUCCESS)
        return status;
    return check_pointers(m, name);
}

moeint4_status mi4_layout_validate_data(const moeint4_quant_matrix *m, const char *name)
{
    if (!name)
        name = "matrix";
    moeint4_status status = check_scales(m, name);
    if (status != MOEINT4_SUCCESS)
        return status;
    return check_g_idx(m, name);
}

moeint4_status mi4_layout_validate(const moeint4_quant_matrix *m, const char *name)
{
    moeint4_status status = mi4_layout_validate_shape(m, name);
    if (status != MOEINT4_SUCCESS)
        return status;
    return mi4_layout_validate_data(m, name);
}
