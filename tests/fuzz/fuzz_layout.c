/* Fuzzes the public layout conversions (moeint4_layout_validate,
 * _gptq_to_xpu, _to_xpu, _dequantize_bf16, _dequantize_f32) with random quant
 * matrices. Checked beyond the sanitizers: inputs never modified; on failure
 * the outputs are untouched and a message says why; on success the BF16
 * result is the F32 result rounded once, and the XPU bytes hold the codes
 * that dequantize to the F32 values. */
#include <stdlib.h>

#include "fuzz_input.h"
#include "fuzz_quant.h"
#include "moeint4.h"
#include "testkit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define POISON 0xa5

static int untouched(const void *buffer, size_t bytes)
{
    const uint8_t *p = buffer;
    for (size_t i = 0; i < bytes; i++)
        if (p[i] != POISON)
            return 0;
    return 1;
}

static void expect_failure_words(moeint4_status status)
{
    if (status != MOEINT4_SUCCESS && moeint4_last_error()[0] == '\0')
        abort();
    if (status == MOEINT4_SUCCESS && moeint4_last_error()[0] != '\0')
        abort();
}

/* (code - zero) times the transposed scale gives the F32 value for each of
 * the `values` weights of the XPU layout (zeros_t NULL: zero 8). */
static int xpu_matches(const moeint4_quant_matrix *m, size_t values, size_t groups,
                       const uint8_t *packed, const uint16_t *scales_t, const uint8_t *zeros_t,
                       const float *f32)
{
    size_t in = (size_t)m->in_features;
    size_t group = m->group_size > 0 ? (size_t)m->group_size : in;
    int bf16_scales = m->scales_dtype == MOEINT4_DTYPE_BF16;
    for (size_t i = 0; i < values; i++) {
        size_t row = i / in, k = i % in, at = row * groups + k / group;
        int code = (packed[i / 2] >> (4 * (int)(i % 2))) & 15;
        int zero = zeros_t ? zeros_t[at] : 8;
        float scale = bf16_scales ? tk_bf16_to_f32(scales_t[at]) : tk_f16_to_f32(scales_t[at]);
        if ((float)(code - zero) * scale != f32[i])
            return 0;
    }
    return 1;
}

/* Every call on the same matrix must agree with the others. */
static void convert_all(const moeint4_quant_matrix *m, int small)
{
    size_t values = 1, groups = 1;
    if (small) {
        groups = m->group_size > 0 ? (size_t)(m->in_features / m->group_size) : 1;
        values = (size_t)m->num_experts * (size_t)m->out_features * (size_t)m->in_features;
    }
    float *f32 = fz_alloc(values * sizeof *f32);
    uint16_t *bf16 = fz_alloc(values * sizeof *bf16);
    uint8_t *packed = fz_alloc(values / 2 + 1);
    uint16_t *scales_t = fz_alloc((size_t)(small ? m->num_experts * m->out_features : 1) *
                                  (groups ? groups : 1) * sizeof *scales_t);
    size_t scales_t_bytes = (size_t)(small ? m->num_experts * m->out_features : 1) *
                            (groups ? groups : 1) * sizeof *scales_t;
    memset(f32, POISON, values * sizeof *f32);
    memset(bf16, POISON, values * sizeof *bf16);
    memset(packed, POISON, values / 2 + 1);
    memset(scales_t, POISON, scales_t_bytes);

    moeint4_status valid = moeint4_layout_validate(m);
    expect_failure_words(valid);
    moeint4_status s_f32 = moeint4_layout_dequantize_f32(m, f32);
    expect_failure_words(s_f32);
    moeint4_status s_bf16 = moeint4_layout_dequantize_bf16(m, bf16);
    expect_failure_words(s_bf16);
    moeint4_status s_xpu = moeint4_layout_gptq_to_xpu(m, packed, scales_t);
    expect_failure_words(s_xpu);

    /* validate is what the conversions check first: same verdict */
    if (s_f32 != valid || s_bf16 != valid)
        abort();
    if (valid != MOEINT4_SUCCESS &&
        (!untouched(f32, values * sizeof *f32) || !untouched(bf16, values * sizeof *bf16)))
        abort();
    if (s_xpu != MOEINT4_SUCCESS &&
        (!untouched(packed, values / 2 + 1) || !untouched(scales_t, scales_t_bytes)))
        abort();
    if (s_xpu == MOEINT4_SUCCESS &&
        (valid != MOEINT4_SUCCESS || m->format != MOEINT4_FORMAT_GPTQ_SYM))
        abort();
    if (valid == MOEINT4_SUCCESS) {
        for (size_t i = 0; i < values; i++)
            if (bf16[i] != tk_f32_to_bf16(f32[i]))
                abort(); /* BF16 must be the F32 value rounded once */
    }
    if (s_xpu == MOEINT4_SUCCESS && !xpu_matches(m, values, groups, packed, scales_t, NULL, f32))
        abort();

    /* the every-format call: succeeds wherever the symmetric one does, and
     * only on valid matrices */
    size_t zeros_t_bytes = scales_t_bytes / 2;
    uint8_t *zeros_t = fz_alloc(zeros_t_bytes);
    memset(packed, POISON, values / 2 + 1);
    memset(scales_t, POISON, scales_t_bytes);
    memset(zeros_t, POISON, zeros_t_bytes);
    moeint4_status s_any = moeint4_layout_to_xpu(m, packed, scales_t, zeros_t);
    expect_failure_words(s_any);
    if (s_any != MOEINT4_SUCCESS &&
        (!untouched(packed, values / 2 + 1) || !untouched(scales_t, scales_t_bytes) ||
         !untouched(zeros_t, zeros_t_bytes)))
        abort();
    if ((s_any == MOEINT4_SUCCESS && valid != MOEINT4_SUCCESS) ||
        (s_xpu == MOEINT4_SUCCESS && s_any != MOEINT4_SUCCESS))
        abort();
    if (s_any == MOEINT4_SUCCESS && !xpu_matches(m, values, groups, packed, scales_t, zeros_t, f32))
        abort();
    free(zeros_t);
    free(f32);
    free(bf16);
    free(packed);
    free(scales_t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in;
    fz_init(&in, data, size);
    moeint4_format format = fz_format(&in);
    int group = fz_group_size(&in);
    int zero_offset = fz_zero_offset(&in);
    moeint4_dtype scales_dtype = fz_scales_dtype(&in);
    int experts = fz_range(&in, 1, 3);
    if (fz_pick(&in, 32) == 0)
        experts = -fz_range(&in, 0, 2);
    int in_features = fz_dimension(&in, 8, 128);
    int out_features = fz_dimension(&in, fz_pick(&in, 2) ? 8 : 1, 64);
    fz_quant q;
    fz_quant_make(&in, &q, format, zero_offset, experts, in_features, out_features, group,
                  scales_dtype);
    q.view.struct_size = fz_struct_size(&in, sizeof q.view);
    int small = fz_shape_is_small(experts, in_features, out_features) &&
                (group <= 0 || in_features % group == 0);

    fz_snapshot before;
    fz_snapshot_take(&before, &q);
    moeint4_quant_matrix view_copy = q.view;
    convert_all(&q.view, small);
    if (memcmp(&view_copy, &q.view, sizeof view_copy) != 0)
        abort();
    fz_snapshot_check(&before);
    if (moeint4_layout_validate(NULL) == MOEINT4_SUCCESS)
        abort();
    fz_quant_free(&q);
    return 0;
}
