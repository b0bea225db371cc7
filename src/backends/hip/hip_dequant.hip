/* Load-time dequantization on the device: the checkpoint arrays of one
 * projection are uploaded, expanded to bf16 [E][OUT][IN] with
 * (q - zero) * scale in f32 rounded once to nearest even -- the same bits as
 * moeint4_layout_dequantize_bf16 (the product is exact in f32: at most 5 + 11
 * significant bits) -- and the int4 copies are freed again. Which nibble
 * holds what comes as a table (moeint4_quant_matrix_packing, the same one
 * the layout module reads): the kernel knows no checkpoint format. */
#include <stdio.h>

#include "backends/hip/hip_internal.h"
#include "moeint4_backend.h"

namespace {

struct dequant_params {
    const int32_t *qweight;
    const uint16_t *scales;
    const int32_t *qzeros;
    const int32_t *g_idx; /* [E][IN] or null: act-order looks each input's group up */
    moeint4_int4_packing packing;
    int scales_bf16;
    int experts, in, out, group_size, groups;
    uint16_t *dst;
};

__device__ unsigned nibble(int32_t word, unsigned index) { return ((uint32_t)word >> (4u * index)) & 15u; }

/* Scale and zero of (expert, group, output row). */
__device__ void group_scale_zero(const dequant_params &p, int64_t e, int group, int64_t o,
                                 float *scale, int *zero)
{
    size_t group_at = ((size_t)e * p.groups + (size_t)group);
    uint16_t scale_bits = p.scales[group_at * p.out + o];
    *scale = mi4_dev_scale_to_f32(scale_bits, p.scales_bf16);
    *zero = 8;
    if (p.packing.has_zeros) {
        int32_t zword = p.qzeros[group_at * (p.out / 8) + o / 8];
        *zero = (int)nibble(zword, p.packing.zero_nibble[o % 8]) + p.packing.zero_offset;
    }
}

/* One thread writes 8 consecutive inputs (16 bytes) of one output row. */
__global__ void dequantize(dequant_params p)
{
    const int64_t chunks_per_row = p.in / 8;
    const int64_t total = (int64_t)p.experts * p.out * chunks_per_row;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t chunk = t % chunks_per_row;
        int64_t o = (t / chunks_per_row) % p.out;
        int64_t e = t / (chunks_per_row * p.out);
        int i0 = (int)chunk * 8;
        const moeint4_int4_packing &k = p.packing;
        float scale;
        int zero;
        /* a group never splits 8 inputs, unless act-order scatters them */
        group_scale_zero(p, e, i0 / p.group_size, o, &scale, &zero);
        uint32_t packed[4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            unsigned code;
            if (k.weights_along_out) {
                int32_t word = p.qweight[((size_t)e * p.in + (size_t)(i0 + j)) * (p.out / 8) +
                                         (size_t)(o / 8)];
                code = nibble(word, k.weight_nibble[o % 8]);
            } else {
                int32_t word = p.qweight[((size_t)e * (p.in / 8) + (size_t)chunk) * p.out + o];
                code = nibble(word, k.weight_nibble[j]);
            }
            if (p.g_idx != nullptr)
                group_scale_zero(p, e, p.g_idx[(size_t)e * p.in + (size_t)(i0 + j)], o, &scale,
                                 &zero);
            float value = __fmul_rn((float)((int)code - zero), scale);
            uint32_t bits = mi4_dev_f32_to_bf16(value);
            if (j % 2 == 0)
                packed[j / 2] = bits;
            else
                packed[j / 2] |= bits << 16;
        }
        uint4 v = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        *(uint4 *)(p.dst + ((size_t)e * p.out + (size_t)o) * p.in + i0) = v;
    }
}

} // namespace

moeint4_status mi4_hip_dequantize(const moeint4_quant_matrix *m, uint16_t *out, char *err,
                                  size_t err_cap)
{
    int groups = m->group_size == -1 ? 1 : m->in_features / m->group_size;
    size_t experts = (size_t)m->num_experts;
    size_t words = experts * (size_t)m->in_features * (size_t)m->out_features / 8;
    size_t scale_count = experts * (size_t)groups * (size_t)m->out_features;
    void *qweight = nullptr, *scales = nullptr, *qzeros = nullptr, *g_idx = nullptr;
    moeint4_status st = mi4_hip_upload(&qweight, m->qweight, words * 4, "qweight", err, err_cap);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_upload(&scales, m->scales, scale_count * 2, "scales", err, err_cap);
    const moeint4_int4_packing packing = moeint4_quant_matrix_packing(m);
    if (st == MOEINT4_SUCCESS && packing.has_zeros)
        st = mi4_hip_upload(&qzeros, m->qzeros, scale_count / 8 * 4, "qzeros", err, err_cap);
    if (st == MOEINT4_SUCCESS && m->g_idx != nullptr)
        st = mi4_hip_upload(&g_idx, m->g_idx, experts * (size_t)m->in_features * 4, "g_idx", err,
                            err_cap);
    if (st == MOEINT4_SUCCESS) {
        dequant_params p;
        p.qweight = (const int32_t *)qweight;
        p.scales = (const uint16_t *)scales;
        p.qzeros = (const int32_t *)qzeros;
        p.g_idx = (const int32_t *)g_idx;
        p.packing = packing;
        p.scales_bf16 = m->scales_dtype == MOEINT4_DTYPE_BF16;
        p.experts = m->num_experts;
        p.in = m->in_features;
        p.out = m->out_features;
        p.group_size = m->group_size == -1 ? m->in_features : m->group_size;
        p.groups = groups;
        p.dst = out;
        hipError_t e = mi4_launch(dequantize, dim3(mi4_hip_stride_grid((int64_t)words)),
                                  dim3(256), 0, (hipStream_t)0, p);
        if (e == hipSuccess)
            e = hipStreamSynchronize(0);
        if (e != hipSuccess) {
            snprintf(err, err_cap, "hip: dequantization kernel failed: %s", hipGetErrorString(e));
            st = MOEINT4_DEVICE_ERROR;
        }
    }
    (void)hipFree(qweight);
    (void)hipFree(scales);
    (void)hipFree(qzeros);
    (void)hipFree(g_idx);
    return st;
}

/* Succeeds when the loaded code object has an image for the current device. */
hipError_t mi4_hip_check_kernel_image(void)
{
    hipFuncAttributes attributes;
    return hipFuncGetAttributes(&attributes, (const void *)dequantize);
}
