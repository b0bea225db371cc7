/* The public moeint4_layout_* calls. Order: the source's shape (no array
 * read), then the caller's outputs, then the source's data (scales, g_idx),
 * then the conversion, expert by expert. Nothing is written before every
 * check has passed. */
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "layout/act_order.h"
#include "base/struct_size.h"
#include "layout/layout.h"
#include "moeint4_backend.h"

#define SOURCE_NAME "src"

/* The caller's matrix at this library's size (the struct_size rule). */
static moeint4_status read_source(const moeint4_quant_matrix *caller, moeint4_quant_matrix *src)
{
    if (!caller)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, SOURCE_NAME " is NULL");
    return MI4_STRUCT_READ(*src, caller, MOEINT4_QUANT_MATRIX_MIN_SIZE, SOURCE_NAME,
                           "moeint4_quant_matrix");
}

/* read_source, then the shape checks every conversion starts with. */
static moeint4_status read_source_shape(const moeint4_quant_matrix *caller,
                                        moeint4_quant_matrix *src)
{
    moeint4_status status = read_source(caller, src);
    if (status == MOEINT4_SUCCESS)
        status = mi4_layout_validate_shape(src, SOURCE_NAME);
    return status;
}

moeint4_status moeint4_layout_validate(const moeint4_quant_matrix *caller)
{
    mi4_clear_error();
    moeint4_quant_matrix src;
    moeint4_status status = read_source(caller, &src);
    if (status != MOEINT4_SUCCESS)
        return status;
    return mi4_layout_validate(&src, SOURCE_NAME);
}

/* An [E][OUT][IN] output of element_size bytes must fit size_t. */
static moeint4_status check_dense_output(const moeint4_quant_matrix *src, size_t element_size)
{
    size_t bytes;
    if (!mi4_layout_checked_product((size_t)src->num_experts, (size_t)src->out_features,
                                    (size_t)src->in_features, element_size, &bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "out: %d experts x %d x %d values of %zu bytes overflow size_t",
                        src->num_experts, src->out_features, src->in_features, element_size);
    return MOEINT4_SUCCESS;
}

/* out_f32 or out_bf16 is the caller's output (the other is NULL); `out_given`
 * says whether the caller's pointer was non-NULL. */
static moeint4_status dequantize(const moeint4_quant_matrix *caller, float *out_f32,
                                 uint16_t *out_bf16, int out_given)
{
    mi4_clear_error();
    moeint4_quant_matrix normalized;
    moeint4_status status = read_source_shape(caller, &normalized);
    const moeint4_quant_matrix *src = &normalized;
    if (status != MOEINT4_SUCCESS)
        return status;
    if (!out_given)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "out is NULL");
    if ((status = check_dense_output(src, out_f32 ? sizeof(float) : sizeof(uint16_t))) !=
            MOEINT4_SUCCESS ||
        (status = mi4_layout_validate_data(src, SOURCE_NAME)) != MOEINT4_SUCCESS)
        return status;
    size_t per_expert = (size_t)src->out_features * (size_t)src->in_features;
    for (int e = 0; e < src->num_experts; e++) {
        if (out_f32)
            mi4_layout_dequantize_expert_f32(src, e, out_f32 + (size_t)e * per_expert);
        else
            mi4_layout_dequantize_expert_bf16(src, e, out_bf16 + (size_t)e * per_expert);
    }
    return MOEINT4_SUCCESS;
}

moeint4_status moeint4_layout_dequantize_f32(const moeint4_quant_matrix *src, float *out)
{
    return dequantize(src, out, NULL, out != NULL);
}

moeint4_status moeint4_layout_dequantize_bf16(const moeint4_quant_matrix *src, uint16_t *out)
{
    return dequantize(src, NULL, out, out != NULL);
}

/* The conversion itself, for checked matrices (the public calls below and
 * backends' prepare, which receives matrices the core has validated). */
void moeint4_backend_layout_to_xpu(const moeint4_quant_matrix *src, uint8_t *packed, void *scales_t,
                                   uint8_t *zeros_t)
{
    size_t packed_per_expert = (size_t)src->out_features * ((size_t)src->in_features / 2);
    size_t groups_per_expert = (size_t)src->out_features * (size_t)mi4_layout_num_groups(src);
    for (int e = 0; e < src->num_experts; e++)
        mi4_layout_xpu_expert(src, e, packed + (size_t)e * packed_per_expert,
                              (uint16_t *)scales_t + (size_t)e * groups_per_expert,
                              zeros_t ? zeros_t + (size_t)e * groups_per_expert : NULL);
}

void moeint4_backend_layout_gptq_to_xpu(const moeint4_quant_matrix *src, uint8_t *packed,
                                        void *scales_t)
{
    moeint4_backend_layout_to_xpu(src, packed, scales_t, NULL);
}

/* zeros_wanted: the caller is moeint4_layout_to_xpu, which takes every
 * format (zero points into zeros_t, optional for GPTQ_SYM);
 * moeint4_layout_gptq_to_xpu refuses formats with zero points. */
static moeint4_status to_xpu(const moeint4_quant_matrix *caller, uint8_t *packed, void *scales_t,
                             uint8_t *zeros_t, int zeros_wanted)
{
    mi4_clear_error();
    moeint4_quant_matrix normalized;
    moeint4_status status = read_source_shape(caller, &normalized);
    const moeint4_quant_matrix *src = &normalized;
    if (status != MOEINT4_SUCCESS)
        return status;
    int has_zeros = src->format != MOEINT4_FORMAT_GPTQ_SYM;
    const char *format_name = src->format == MOEINT4_FORMAT_AWQ ? "AWQ" : "GPTQ_ASYM";
    if (has_zeros && !zeros_wanted)
        return mi4_fail(MOEINT4_UNSUPPORTED,
                        "src.format = %s has zero points: moeint4_layout_gptq_to_xpu converts "
                        "GPTQ symmetric (GPTQ_SYM) weights only; moeint4_layout_to_xpu takes "
                        "every format",
                        format_name);
    if (!packed)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "packed is NULL");
    if (!scales_t)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "scales_t is NULL");
    if (has_zeros && !zeros_t)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "zeros_t is NULL (src.format = %s has zero points)", format_name);
    /* The outputs are as large as the source's qweight and scales (zeros:
     * half the scales' bytes), whose byte counts validate_shape has checked. */
    if ((status = mi4_layout_validate_data(src, SOURCE_NAME)) != MOEINT4_SUCCESS)
        return status;
    if (moeint4_quant_matrix_has_act_order(src))
        return mi4_fail(MOEINT4_UNSUPPORTED,
                        "src_g_idx is act-order: the XPU layout keeps groups contiguous along "
                        "IN and has no permutation");
    moeint4_backend_layout_to_xpu(src, packed, scales_t, zeros_t);
    return MOEINT4_SUCCESS;
}

moeint4_status moeint4_layout_gptq_to_xpu(const moeint4_quant_matrix *src, uint8_t *packed,
                                          void *scales_t)
{
    return to_xpu(src, packed, scales_t, NULL, 0);
}

moeint4_status moeint4_layout_to_xpu(const moeint4_quant_matrix *src, uint8_t *packed,
                                     void *scales_t, uint8_t *zeros_t)
{
    return to_xpu(src, packed, scales_t, zeros_t, 1);
}
