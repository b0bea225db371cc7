/* Element access by dtype and the column scaling of scaled rows
 * (cpu_kernels.h), shared by every kernel variant's tail code. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_SCALAR_IO_H
#define MOEINT4_BACKENDS_CPU_CPU_SCALAR_IO_H

#include <stddef.h>
#include <stdint.h>

#include "core/half.h"
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

/* 16^-(k % 8), exact powers of two. */
static inline float mi4_cpu_column_scale(int k)
{
    return mi4_bits_to_f32((uint32_t)(127 - 4 * (k % 8)) << 23);
}

#endif
