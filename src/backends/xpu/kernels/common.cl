/* Helpers shared by every kernel of the XPU backend. The build concatenates
 * the kernel files in a fixed order (common.cl first) into one program, so
 * both runtimes see the same text: Level Zero as SPIR-V, OpenCL as source.
 *
 * Dtype codes follow moeint4_dtype: 1 = f32, 2 = f16, 3 = bf16. Activations
 * arrive as bytes and are read through load_act/store_act so one kernel
 * serves every dtype; arithmetic is f32 throughout. */

#define MI4_DT_F32 1
#define MI4_DT_F16 2
#define MI4_DT_BF16 3

#define MI4_ACT_SILU 0
#define MI4_ACT_GELU 1
#define MI4_ACT_SWIGLU_CLAMP 2

/* Rows of the sorted slot list one work-item of a grouped GEMM handles. The
 * host builds its tile list with the same number (MI4_XPU_TILE_ROWS). */
#define MI4_TILE_ROWS 8
/* Work-items per work-group of the routing and GEMM kernels (the host's
 * MI4_XPU_GROUP). */
#define MI4_GROUP 256

float mi4_bf16_to_f32(ushort bits) { return as_float((uint)bits << 16); }

/* Round to nearest even; NaN stays a quiet NaN with its sign. */
ushort mi4_f32_to_bf16(float value)
{
    uint bits = as_uint(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (ushort)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (ushort)(bits >> 16);
}

float mi4_load(__global const uchar *base, int dtype, long index)
{
    if (dtype == MI4_DT_F32)
        return ((__global const float *)base)[index];
    if (dtype == MI4_DT_F16)
        return vload_half((size_t)index, (__global const half *)base);
    return mi4_bf16_to_f32(((__global const ushort *)base)[index]);
}

void mi4_store(__global uchar *base, int dtype, long index, float value)
{
    if (dtype == MI4_DT_F32)
        ((__global float *)base)[index] = value;
    else if (dtype == MI4_DT_F16)
        vstore_half_rte(value, (size_t)index, (__global half *)base);
    else
        ((__global ushort *)base)[index] = mi4_f32_to_bf16(value);
}

/* Scales are stored as the checkpoint had them: f16 or bf16 bits. */
float mi4_load_scale(__global const ushort *scales, int scales_bf16, long index)
{
    if (scales_bf16)
        return mi4_bf16_to_f32(scales[index]);
    return vload_half((size_t)index, (__global const half *)scales);
}

/* A scale's bits (f16 or bf16, as loaded) as f32, exactly (f16 subnormals
 * through an exact int-to-float conversion). The lanes GEMVs load the bits
 * with their batch of codes and convert them when the batch is used:
 * converting right after the load (mi4_load_scale) made NVIDIA's compiler
 * wait for each scale before issuing the next row's loads (SASS of
 * 2026-12-02), one memory round trip per row. The staged GEMMs and GEMVs
 * keep mi4_load_scale: converting at use measured 8-9% slower there. */
float mi4_scale_from_bits(uint bits, int scales_bf16)
{
    if (scales_bf16)
        return as_float(bits << 16);
    uint e = (bits >> 10) & 31u, m = bits & 1023u;
    uint bits32 = e == 31u ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13);
    float magnitude = e == 0 ? (float)m * 0x1p-24f : as_float(bits32);
    return (bits & 0x8000u) ? -magnitude : magnitude;
}

float mi4_sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }

/* The activations exactly as include/moeint4.h defines them. */
float mi4_activate(int kind, float gate, float up, float limit, float alpha, float beta)
{
    if (kind == MI4_ACT_SILU)
        return gate * mi4_sigmoid(gate) * up;
    if (kind == MI4_ACT_GELU)
        return 0.5f * gate * (1.0f + erf(gate * 0.70710678118654752f)) * up;
    float g = fmin(gate, limit);
    float u = fmin(fmax(up, -limit), limit);
    return (u + beta) * g * mi4_sigmoid(alpha * g);
}
