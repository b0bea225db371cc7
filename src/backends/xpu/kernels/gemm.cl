/* Int4 grouped GEMMs on the XPU layout. Weights: packed [E, OUT, IN/2] bytes
 * (low nibble = even column), uint4b8 codes (value = code - 8); scales
 * [E, OUT, IN/group] as f16 or bf16 bits. Each work-item owns one output
 * column and one tile of up to MI4_TILE_ROWS sorted slots of one expert;
 * tiles[2t] = expert, tiles[2t+1] = first row of the tile in sorted_slots.
 * Within a group the integer codes times activations are summed in f32 and
 * scaled once per group (the same value as scaling every product, fewer
 * multiplies). The summation order is fixed, so results are deterministic. */

#define MI4_ROUTE_END(route, num_local, e) ((route)[(num_local) + (e) + 1])

/* w13: gate = rows [0, N), up = rows [N, 2N); act_out[slot][n] (f32) =
 * act(gate, up). With weight_on_input the router weight scales x first,
 * which is the same as scaling both dot products. */
__kernel void mi4_w13_gemm(__global const int *tiles, __global const int *route, int num_local,
                           __global const int *sorted_slots, __global const uchar *hidden,
                           int dtype, __global const float *topk_weights, int weight_on_input,
                           int topk, __global const uchar *packed, __global const ushort *scales,
                           int scales_bf16, int K, int N, int group_size, int act_kind,
                           float limit, float alpha, float beta, __global float *act_out)
{
    int n = (int)get_global_id(0);
    int tile = (int)get_global_id(1);
    if (n >= N)
        return;
    int expert = tiles[2 * tile];
    int row0 = tiles[2 * tile + 1];
    int rows = min(MI4_TILE_ROWS, MI4_ROUTE_END(route, num_local, expert) - row0);
    int groups = K / group_size;
    long row_bytes = K / 2;
    __global const uchar *w_gate = packed + ((long)expert * 2 * N + n) * row_bytes;
    __global const uchar *w_up = w_gate + (long)N * row_bytes;
    __global const ushort *s_gate = scales + ((long)expert * 2 * N + n) * groups;
    __global const ushort *s_up = s_gate + (long)N * groups;

    long x_row[MI4_TILE_ROWS];
    float gate[MI4_TILE_ROWS], up[MI4_TILE_ROWS];
    float part_gate[MI4_TILE_ROWS], part_up[MI4_TILE_ROWS];
    for (int r = 0; r < rows; ++r) {
        x_row[r] = (long)(sorted_slots[row0 + r] / topk) * K;
        gate[r] = 0.0f;
        up[r] = 0.0f;
    }
    for (int g = 0; g < groups; ++g) {
        for (int r = 0; r < rows; ++r) {
            part_gate[r] = 0.0f;
            part_up[r] = 0.0f;
        }
        int byte_end = (g + 1) * group_size / 2;
        for (int b = g * group_size / 2; b < byte_end; ++b) {
            uint bg = w_gate[b], bu = w_up[b];
            float g0 = (float)((int)(bg & 15u) - 8), g1 = (float)((int)(bg >> 4) - 8);
            float u0 = (float)((int)(bu & 15u) - 8), u1 = (float)((int)(bu >> 4) - 8);
            for (int r = 0; r < rows; ++r) {
                float x0 = mi4_load(hidden, dtype, x_row[r] + 2 * b);
                float x1 = mi4_load(hidden, dtype, x_row[r] + 2 * b + 1);
                part_gate[r] += g0 * x0 + g1 * x1;
                part_up[r] += u0 * x0 + u1 * x1;
            }
        }
        float sg = mi4_load_scale(s_gate, scales_bf16, g);
        float su = mi4_load_scale(s_up, scales_bf16, g);
        for (int r = 0; r < rows; ++r) {
            gate[r] += part_gate[r] * sg;
            up[r] += part_up[r] * su;
        }
    }
    for (int r = 0; r < rows; ++r) {
        int slot = sorted_slots[row0 + r];
        float scale = weight_on_input ? topk_weights[slot] : 1.0f;
        act_out[(long)slot * N + n] =
            mi4_activate(act_kind, gate[r] * scale, up[r] * scale, limit, alpha, beta);
    }
}

/* w2: slot_out[slot][k] (f32) = (router weight unless applied on the input)
 * * sum_n act[slot][n] * W2[e][k][n]. */
__kernel void mi4_w2_gemm(__global const int *tiles, __global const int *route, int num_local,
                          __global const int *sorted_slots, __global const float *act,
                          __global const float *topk_weights, int weight_on_input,
                          __global const uchar *packed, __global const ushort *scales,
                          int scales_bf16, int K, int N, int group_size,
                          __global float *slot_out)
{
    int k = (int)get_global_id(0);
    int tile = (int)get_global_id(1);
    if (k >= K)
        return;
    int expert = tiles[2 * tile];
    int row0 = tiles[2 * tile + 1];
    int rows = min(MI4_TILE_ROWS, MI4_ROUTE_END(route, num_local, expert) - row0);
    int groups = N / group_size;
    long row_bytes = N / 2;
    __global const uchar *w = packed + ((long)expert * K + k) * row_bytes;
    __global const ushort *s = scales + ((long)expert * K + k) * groups;

    long a_row[MI4_TILE_ROWS];
    float acc[MI4_TILE_ROWS], part[MI4_TILE_ROWS];
    for (int r = 0; r < rows; ++r) {
        a_row[r] = (long)sorted_slots[row0 + r] * N;
        acc[r] = 0.0f;
    }
    for (int g = 0; g < groups; ++g) {
        for (int r = 0; r < rows; ++r)
            part[r] = 0.0f;
        int byte_end = (g + 1) * group_size / 2;
        for (int b = g * group_size / 2; b < byte_end; ++b) {
            uint byte = w[b];
            float w0 = (float)((int)(byte & 15u) - 8), w1 = (float)((int)(byte >> 4) - 8);
            for (int r = 0; r < rows; ++r)
                part[r] += w0 * act[a_row[r] + 2 * b] + w1 * act[a_row[r] + 2 * b + 1];
        }
        float sc = mi4_load_scale(s, scales_bf16, g);
        for (int r = 0; r < rows; ++r)
            acc[r] += part[r] * sc;
    }
    for (int r = 0; r < rows; ++r) {
        int slot = sorted_slots[row0 + r];
        float scale = weight_on_input ? 1.0f : topk_weights[slot];
        slot_out[(long)slot * K + k] = acc[r] * scale;
    }
}

/* out[m][k] = sum over the token's local slots, in slot order (deterministic);
 * a token with no local slot gets 0. Rounded once to dtype. */
__kernel void mi4_combine(__global const int *slot_expert, __global const float *slot_out,
                          int num_tokens, int topk, int K, int dtype, __global uchar *output)
{
    int k = (int)get_global_id(0);
    int m = (int)get_global_id(1);
    if (k >= K || m >= num_tokens)
        return;
    float sum = 0.0f;
    for (int j = 0; j < topk; ++j) {
        int slot = m * topk + j;
        if (slot_expert[slot] >= 0)
            sum += slot_out[(long)slot * K + k];
    }
    mi4_store(output, dtype, (long)m * K + k, sum);
}
