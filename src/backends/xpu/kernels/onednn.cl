/* Helpers of the oneDNN path (one expert with many tokens at a time): gather
 * the expert's rows into a dense matrix, dequantize its weights just in time
 * into scratch, apply the activation between the two matmuls, and scatter the
 * result back to slots. out_dtype is the matmul dtype: f16 on a GPU engine,
 * f32 on the CPU engine used by the tests. Rows are [offsets[e], end) of
 * sorted_slots. */

__kernel void mi4_dnnl_gather(__global const int *route, int num_local, int expert,
                              __global const int *sorted_slots, __global const uchar *hidden,
                              int dtype, __global const float *topk_weights, int weight_on_input,
                              int topk, int K, int out_dtype, __global uchar *a_out)
{
    int k = (int)get_global_id(0);
    int r = (int)get_global_id(1);
    int row0 = route[num_local + expert];
    if (k >= K || r >= route[num_local + expert + 1] - row0)
        return;
    int slot = sorted_slots[row0 + r];
    float x = mi4_load(hidden, dtype, (long)(slot / topk) * K + k);
    if (weight_on_input)
        x *= topk_weights[slot];
    mi4_store(a_out, out_dtype, (long)r * K + k, x);
}

/* w_out[o][i] = (code - zero) * scale for one expert of a packed [E, OUT,
 * IN/2]; zero = 8, or zeros[E, OUT, IN/group] where has_zeros. */
__kernel void mi4_dnnl_dequant(__global const uchar *packed, __global const ushort *scales,
                               int scales_bf16, int expert, int out_features, int in_features,
                               int group_size, int out_dtype, __global uchar *w_out,
                               __global const uchar *zeros, int has_zeros)
{
    int i = (int)get_global_id(0);
    int o = (int)get_global_id(1);
    if (i >= in_features || o >= out_features)
        return;
    long row = (long)expert * out_features + o;
    uint byte = packed[row * (in_features / 2) + i / 2];
    int code = (int)((i & 1) ? (byte >> 4) : (byte & 15u));
    long group = row * (in_features / group_size) + i / group_size;
    float scale = mi4_load_scale(scales, scales_bf16, group);
    float zero = mi4_load_zero(has_zeros ? zeros : 0, group);
    mi4_store(w_out, out_dtype, (long)o * in_features + i, ((float)code - zero) * scale);
}

/* c13 [rows, 2N] f32 -> a2 [rows, N] in out_dtype (the w2 matmul's input). */
__kernel void mi4_dnnl_activate(__global const float *c13, int rows, int N, int act_kind,
                                float limit, float alpha, float beta, int out_dtype,
                                __global uchar *a2_out)
{
    int n = (int)get_global_id(0);
    int r = (int)get_global_id(1);
    if (n >= N || r >= rows)
        return;
    float gate = c13[(long)r * 2 * N + n];
    float up = c13[(long)r * 2 * N + N + n];
    mi4_store(a2_out, out_dtype, (long)r * N + n, mi4_activate(act_kind, gate, up, limit, alpha, beta));
}

__kernel void mi4_dnnl_scatter(__global const int *route, int num_local, int expert,
                               __global const int *sorted_slots, __global const float *c2,
                               __global const float *topk_weights, int weight_on_input, int K,
                               __global float *slot_out)
{
    int k = (int)get_global_id(0);
    int r = (int)get_global_id(1);
    int row0 = route[num_local + expert];
    if (k >= K || r >= route[num_local + expert + 1] - row0)
        return;
    int slot = sorted_slots[row0 + r];
    float scale = weight_on_input ? 1.0f : topk_weights[slot];
    slot_out[(long)slot * K + k] = c2[(long)r * K + k] * scale;
}

/* scales_t[g][o] = scales[expert][o][g] (raw 16-bit patterns): oneDNN reads
 * grouped weight scales in their logical [IN/group][OUT] order, with no way
 * to declare another layout. Used by the oneDNN >= 3.5 int4 path only. */
__kernel void mi4_dnnl_scales_t(__global const ushort *scales, int expert, int out_features,
                                int groups, __global ushort *scales_t)
{
    int o = (int)get_global_id(0);
    int g = (int)get_global_id(1);
    if (o >= out_features || g >= groups)
        return;
    scales_t[(long)g * out_features + o] = scales[((long)expert * out_features + o) * groups + g];
}
