/* Synthetic layers: random numbers, the kit's own 16-bit float conversions (written
 * with ldexp/frexp arithmetic, deliberately unlike the library's bit tricks),
 * and dtype helpers. */
#include <math.h>
#include <string.h>

#include "synth.h"

void tk_rng_seed(tk_rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t tk_rng_next(tk_rng *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double tk_rng_uniform(tk_rng *rng) { return (double)(tk_rng_next(rng) >> 11) * 0x1.0p-53; }

double tk_rng_range(tk_rng *rng, double lo, double hi)
{
    return lo + (hi - lo) * tk_rng_uniform(rng);
}

double tk_rng_normal(tk_rng *rng)
{
    /* Box-Muller; 1 - u keeps the logarithm's argument in (0, 1]. */
    double radius = sqrt(-2.0 * log(1.0 - tk_rng_uniform(rng)));
    const double two_pi = 6.283185307179586476925;
    return radius * cos(two_pi * tk_rng_uniform(rng));
}

int tk_rng_below(tk_rng *rng, int bound)
{
    return (int)((tk_rng_next(rng) >> 33) % (uint64_t)bound);
}

float tk_f16_to_f32(uint16_t h)
{
    int exponent = (h >> 10) & 0x1f;
    int mantissa = h & 0x3ff;
    double magnitude;
    if (exponent == 0x1f)
        magnitude = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
        magnitude = ldexp(mantissa, -24);
    else
        magnitude = ldexp(1024 + mantissa, exponent - 25);
    return (float)((h & 0x8000) ? -magnitude : magnitude);
}

/* Rounds |value| to a binary float with `mantissa_bits` fraction bits and
 * smallest normal exponent `min_exponent`, nearest even (rint in the default
 * rounding mode). Returns the rounded magnitude as a double. */
static double round_to_format(double magnitude, int mantissa_bits, int min_exponent)
{
    int exponent;
    frexp(magnitude, &exponent); /* magnitude = f * 2^exponent, f in [0.5, 1) */
    exponent -= 1;               /* now magnitude = 1.x * 2^exponent */
    if (exponent < min_exponent)
        exponent = min_exponent; /* subnormal: fixed quantum */
    int quantum_exponent = exponent - mantissa_bits;
    return ldexp(rint(ldexp(magnitude, -quantum_exponent)), quantum_exponent);
}

uint16_t tk_f32_to_f16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f))
        return 0x7e00;
    double magnitude = round_to_format(fabs((double)f), 10, -14);
    if (magnitude >= 65536.0) /* rounded past the largest finite, 65504 */
        return sign | 0x7c00;
    if (magnitude < ldexp(1.0, -14))
        return sign | (uint16_t)ldexp(magnitude, 24);
    int exponent;
    double fraction = frexp(magnitude, &exponent); /* [0.5, 1) */
    uint16_t mantissa = (uint16_t)(ldexp(fraction, 11) - 1024.0);
    return sign | (uint16_t)((exponent - 1 + 15) << 10) | mantissa;
}

float tk_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t tk_f32_to_bf16(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f))
        return 0x7fc0;
    double magnitude = round_to_format(fabs((double)f), 7, -126);
    if (magnitude >= ldexp(1.0, 128))
        return sign | 0x7f80;
    float rounded = (float)magnitude; /* exact: it fits bf16, hence f32 */
    uint32_t bits;
    memcpy(&bits, &rounded, sizeof bits);
    return sign | (uint16_t)(bits >> 16);
}

size_t tk_dtype_size(moeint4_dtype dtype) { return dtype == MOEINT4_DTYPE_F32 ? 4 : 2; }

double tk_load(moeint4_dtype dtype, const void *data, size_t index)
{
    if (dtype == MOEINT4_DTYPE_F32)
        return ((const float *)data)[index];
    uint16_t h = ((const uint16_t *)data)[index];
    return dtype == MOEINT4_DTYPE_F16 ? tk_f16_to_f32(h) : tk_bf16_to_f32(h);
}

void tk_store(moeint4_dtype dtype, void *data, size_t index, double value)
{
    if (dtype == MOEINT4_DTYPE_F32)
        ((float *)data)[index] = (float)value;
    else if (dtype == MOEINT4_DTYPE_F16)
        ((uint16_t *)data)[index] = tk_f32_to_f16((float)value);
    else
        ((uint16_t *)data)[index] = tk_f32_to_bf16((float)value);
}

void tk_fill_activations(tk_rng *rng, moeint4_dtype dtype, size_t count, double amplitude,
                         void *data)
{
    for (size_t i = 0; i < count; i++)
        tk_store(dtype, data, i, amplitude * tk_rng_normal(rng));
}

void tk_poison(void *data, size_t bytes) { memset(data, TK_POISON, bytes); }

double tk_relative_l2(moeint4_dtype dtype, const void *got, const double *want, size_t count)
{
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < count; i++) {
        double g = tk_load(dtype, got, i);
        if (!isfinite(g))
            return NAN; /* any NaN/Inf fails every tolerance */
        diff += (g - want[i]) * (g - want[i]);
        norm += want[i] * want[i];
    }
    return norm > 0.0 ? sqrt(diff / norm) : sqrt(diff);
}
