/* The combine step: out[m] = sum over the local slots of token m, in slot
 * order, of the f32 rows y[slot] (deterministic: no atomics). Its
 * parameters also tell the direct decode gemm2, which combines as it goes,
 * where and how to write the output. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_COMBINE_H
#define MOEINT4_BACKENDS_HIP_HIP_COMBINE_H

#include "backends/hip/hip_platform.h"
#include "backends/hip/hip_slots.h"
#include "moeint4.h"

struct mi4_combine_params {
    const float *y;             /* [M * topk][K] */
    mi4_slot_check check;       /* which slots count, where a bad one is reported */
    int64_t num_tokens;
    int topk, hidden;
    void *out;
    moeint4_dtype dtype;
    const int *status;          /* routing status: [0] bad-slot flag, [1] first bad slot */
};

/* out[at] = v in the output's dtype; scalar stores: the caller's output
 * needs no more than element alignment. */
MI4_DEVICE void mi4_combine_store(const mi4_combine_params &c, size_t at, float v)
{
    if (c.dtype == MOEINT4_DTYPE_F32)
        ((float *)c.out)[at] = v;
    else if (c.dtype == MOEINT4_DTYPE_F16)
        ((uint16_t *)c.out)[at] = mi4_dev_f32_to_f16(v);
    else
        ((uint16_t *)c.out)[at] = mi4_dev_f32_to_bf16(v);
}

/* Writes outputs [first, end) in quads of 4 (K is a multiple of 8), striding
 * by `step` quads; the caller checked mi4_combine_allowed. */
MI4_DEVICE void mi4_combine_quads(const mi4_combine_params &c, int64_t first, int64_t step)
{
    int quads = c.hidden / 4;
    int64_t total = c.num_tokens * quads;
    for (int64_t i = first; i < total; i += step) {
        int64_t m = i / quads;
        int k = (int)(i % quads) * 4;
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int j = 0; j < c.topk; j++) {
            int64_t slot = m * c.topk + j;
            if (mi4_slot_local(c.check, slot) < 0) /* other rank's, or dropped */
                continue;
            float4 v = *(const float4 *)(c.y + slot * c.hidden + k);
            sum.x += v.x;
            sum.y += v.y;
            sum.z += v.z;
            sum.w += v.w;
        }
        size_t at = (size_t)(m * c.hidden + k);
        float s[4] = {sum.x, sum.y, sum.z, sum.w};
        for (int q = 0; q < 4; q++)
            mi4_combine_store(c, at + q, s[q]);
    }
}

/* True when the output may be written: no bad slot, or an asynchronous
 * forward (which drops bad slots; the routing reported the first). */
MI4_DEVICE bool mi4_combine_allowed(const mi4_combine_params &c)
{
    return c.status[0] == 0 || c.check.sticky;
}

#endif
