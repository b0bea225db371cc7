/* Element access by dtype and the column scaling of scaled rows
 * (cpu_kernels.h), shared by every kernel variant's tail code. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_SCALAR_IO_H
#define MOEINT4_BACKENDS_CPU_CPU_SCALAR_IO_H

#include <stddef.h>
#include <stdint.h>

#include "base/half.h"
#include "moeint4.h"

static inline float mi4_cpu_load_value(moeint4_dtype dtype, const void *data, size_t index)
{
    switch (dtype) {
    case MOEINT4_DTYPE_F16: return mi4_f16_to_f32(((const uint16_t *)data)[index]);
    case MOEINT4_DTYPE_BF16: return mi4_bf16_to_f32(((const uint16_t *)data)[index]);
    default: return ((const float *)data)[index];
    }
}

static inline void mi4_cpu_store_value(moeint4_dtype dtype, void *data, size_t index, float v)
{
    switch (dtype) {
    case MOEINT4_DTYPE_F16: ((uint16_t *)data)[index] = mi4_f32_to_f16(v); break;
    case MOEINT4_DTYPE_BF16: ((uint16_t *)data)[index] = mi4_f32_to_bf16(v); break;
    default: ((float *)data)[index] = v; break;
    }
}

/* How column k of a scaled row is scaled: 16^-(k % 8), except 1 for the
 * top nibble (k % 8 == 7), which kernels take with a shift instead of an AND
 * (an AND would leave it in the sign bit). Exact powers of two. */
static inline float mi4_cpu_column_scale(int k)
{
    int c = k % 8;
    return c == 7 ? 1.0f : mi4_bits_to_f32((uint32_t)(127 - 4 * c) << 23);
}

/* Nibble c of a tile word as the kernels multiply it: code * 16^c for
 * c < 7, code for c == 7 (see mi4_cpu_column_scale). */
static inline float mi4_cpu_scaled_nibble(uint32_t word, int c)
{
    return c == 7 ? (float)(word >> 28) : (float)(word & (15u << (4 * c)));
}

#endif
