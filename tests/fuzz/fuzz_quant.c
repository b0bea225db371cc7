#include "fuzz_quant.h"

#include <limits.h>
#include <math.h>

#include "testkit.h"

int fz_dimension(fz_input *in, int unit, int max)
{
    static const int broken[] = { 0, -8, -1, INT_MIN, 12, 36, 4, 1 };
    if (fz_pick(in, 16) != 15)
        return unit * fz_range(in, 1, max / unit);
    return broken[fz_pick(in, (int)(sizeof broken / sizeof broken[0]))];
}

int fz_group_size(fz_input *in)
{
    static const int sizes[] = { 32, 64, 128, -1, 0, 16, 256, -2, 8, 48 };
    int pick = fz_pick(in, 24);
    return pick < 4 ? sizes[pick] : pick < 20 ? sizes[pick % 4] : sizes[pick - 16];
}

moeint4_format fz_format(fz_input *in)
{
    static const int formats[] = {
        MOEINT4_FORMAT_GPTQ_SYM, MOEINT4_FORMAT_GPTQ_ASYM, MOEINT4_FORMAT_AWQ, 0, 4, -1
    };
    int pick = fz_pick(in, 32);
    return (moeint4_format)(pick < 30 ? formats[pick % 3] : formats[3 + pick % 3]);
}

int fz_zero_offset(fz_input *in)
{
    static const int offsets[] = { 0, 0, 0, 1, 1, 2, -1 };
    return offsets[fz_pick(in, 7)];
}

moeint4_dtype fz_scales_dtype(fz_input *in)
{
    static const int dtypes[] = { 0,
                                  MOEINT4_DTYPE_F16,
                                  MOEINT4_DTYPE_BF16,
                                  MOEINT4_DTYPE_F16,
                                  MOEINT4_DTYPE_BF16,
                                  MOEINT4_DTYPE_F32,
                                  9 };
    return (moeint4_dtype)dtypes[fz_pick(in, 7)];
}

size_t fz_struct_size(fz_input *in, size_t size)
{
    switch (fz_pick(in, 40)) {
    case 0: return 0;
    case 1: return size - 1;
    case 2: return sizeof(size_t);
    case 3: return size + 64;
    default: return size;
    }
}

int fz_shape_is_small(int experts, int in_features, int out_features)
{
    return experts >= 1 && experts <= FZ_MAX_DIM && in_features >= 1 && in_features <= FZ_MAX_DIM &&
           out_features >= 1 && out_features <= FZ_MAX_DIM;
}

static uint16_t scale_bits(fz_input *in, moeint4_dtype dtype)
{
    float value =
        ldexpf(1.0f + (float)(fz_generated(in) % 1024) / 1024.0f, (int)(fz_generated(in) % 8) - 6);
    return dtype == MOEINT4_DTYPE_BF16 ? tk_f32_to_bf16(value) : tk_f32_to_f16(value);
}

static uint16_t bad_scale_bits(fz_input *in, moeint4_dtype dtype)
{
    static const float bad[] = { 0.0f, -0.0f, -1.0f, INFINITY, -INFINITY, NAN, 1e-30f };
    float value = bad[fz_pick(in, (int)(sizeof bad / sizeof bad[0]))];
    return dtype == MOEINT4_DTYPE_BF16 ? tk_f32_to_bf16(value) : tk_f32_to_f16(value);
}

static size_t ceil_div(int a, int b) { return (size_t)((a + b - 1) / b); }

void fz_quant_make(fz_input *in, fz_quant *q, moeint4_format format, int zero_offset, int experts,
                   int in_features, int out_features, int group_size, moeint4_dtype scales_dtype)
{
    memset(q, 0, sizeof *q);
    size_t groups = 1, qweight_words = 2, qzeros_words = 2, g_idx_words = 2, scales_count = 2;
    int small = fz_shape_is_small(experts, in_features, out_features);
    if (small) {
        size_t e = (size_t)experts;
        groups = group_size > 0 ? ceil_div(in_features, group_size) : 1;
        qweight_words = format == MOEINT4_FORMAT_AWQ
                            ? e * (size_t)in_features * ceil_div(out_features, 8)
                            : e * ceil_div(in_features, 8) * (size_t)out_features;
        qzeros_words = e * groups * ceil_div(out_features, 8);
        g_idx_words = e * (size_t)in_features;
        scales_count = e * groups * (size_t)out_features;
    }
    q->qweight_bytes = qweight_words * 4;
    q->qzeros_bytes = qzeros_words * 4;
    q->g_idx_bytes = g_idx_words * 4;
    q->scales_bytes = scales_count * 2;
    q->qweight = fz_alloc(q->qweight_bytes);
    q->qzeros = fz_alloc(q->qzeros_bytes);
    q->g_idx = fz_alloc(q->g_idx_bytes);
    q->scales = fz_alloc(q->scales_bytes);
    fz_fill(in, q->qweight, q->qweight_bytes);
    fz_fill(in, q->qzeros, q->qzeros_bytes);
    for (size_t i = 0; i < scales_count; i++)
        q->scales[i] = scale_bits(in, scales_dtype);
    if (fz_pick(in, 12) == 11)
        q->scales[fz_u32(in) % scales_count] = bad_scale_bits(in, scales_dtype);

    int g_idx_mode = fz_pick(in, 8); /* 0-4 none, 5-6 trivial, 7 one wrong entry */
    fz_fill(in, q->g_idx, q->g_idx_bytes);
    if (small) {
        int group = group_size > 0 ? group_size : in_features;
        for (size_t i = 0; i < g_idx_words; i++)
            q->g_idx[i] = (int32_t)(i % (size_t)in_features) / group;
        if (g_idx_mode == 7) {
            static const int32_t wrong[] = { -1, 1, 2, 1000, INT32_MIN };
            q->g_idx[fz_u32(in) % g_idx_words] += wrong[fz_pick(in, 5)];
        }
    }

    moeint4_quant_matrix *v = &q->view;
    v->struct_size = sizeof *v;
    v->format = format;
    v->zero_offset = zero_offset;
    v->num_experts = experts;
    v->in_features = in_features;
    v->out_features = out_features;
    v->group_size = group_size;
    v->scales_dtype = scales_dtype;
    v->qweight = q->qweight;
    v->scales = q->scales;
    v->qzeros = format == MOEINT4_FORMAT_GPTQ_SYM && fz_pick(in, 2) ? NULL : q->qzeros;
    v->g_idx = g_idx_mode >= 5 ? q->g_idx : NULL;
    switch (fz_pick(in, 48)) {
    case 0: v->qweight = NULL; break;
    case 1: v->scales = NULL; break;
    case 2: v->qzeros = NULL; break;
    default: break;
    }
}

void fz_quant_free(fz_quant *q)
{
    free(q->qweight);
    free(q->qzeros);
    free(q->g_idx);
    free(q->scales);
    memset(q, 0, sizeof *q);
}

void fz_snapshot_take(fz_snapshot *s, const fz_quant *q)
{
    const void *arrays[4] = { q->qweight, q->qzeros, q->g_idx, q->scales };
    size_t bytes[4] = { q->qweight_bytes, q->qzeros_bytes, q->g_idx_bytes, q->scales_bytes };
    for (int i = 0; i < 4; i++) {
        s->orig[i] = arrays[i];
        s->bytes[i] = bytes[i];
        s->copy[i] = fz_alloc(bytes[i]);
        memcpy(s->copy[i], arrays[i], bytes[i]);
    }
}

void fz_snapshot_check(fz_snapshot *s)
{
    for (int i = 0; i < 4; i++) {
        if (memcmp(s->copy[i], s->orig[i], s->bytes[i]) != 0)
            abort(); /* the library wrote into an input array */
        free(s->copy[i]);
    }
}
