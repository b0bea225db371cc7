/* fp16 / bf16 <-> f32 conversions shared by the layout module and the CPU
 * backend (host code only). bf16 rounding is to nearest even; NaN stays NaN. */
#ifndef MOEINT4_BASE_HALF_H
#define MOEINT4_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float mi4_bits_to_f32(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline uint32_t mi4_f32_to_bits(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return bits;
}

static inline float mi4_bf16_to_f32(uint16_t h) { return mi4_bits_to_f32((uint32_t)h << 16); }

static inline uint16_t mi4_f32_to_bf16(float f)
{
    uint32_t bits = mi4_f32_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet, keep the sign */
        return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static inline float mi4_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1fu) /* Inf / NaN */
        return mi4_bits_to_f32(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0)
            return mi4_bits_to_f32(sign);
        /* subnormal: value = mantissa * 2^-24 exactly */
        float magnitude = (float)mantissa * (1.0f / 16777216.0f);
        return sign ? -magnitude : magnitude;
    }
    return mi4_bits_to_f32(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/* Round to nearest even, overflow to Inf, NaN preserved. */
static inline uint16_t mi4_f32_to_f16(float f)
{
    uint32_t bits = mi4_f32_to_bits(f);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (abs_bits >= 0x477ff000u) /* >= 65520 rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (abs_bits < 0x38800000u) { /* below the smallest normal 2^-14: subnormal or zero */
        float magnitude = mi4_bits_to_f32(abs_bits);
        /* adding 0.5 makes the FPU round the mantissa at 2^-24 to nearest even */
        uint32_t r = mi4_f32_to_bits(magnitude + 0.5f) - mi4_f32_to_bits(0.5f);
        return (uint16_t)(sign | r);
    }
    uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
    abs_bits += 0xc8000fffu + mantissa_odd; /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(sign | (abs_bits >> 13));
}

#endif
