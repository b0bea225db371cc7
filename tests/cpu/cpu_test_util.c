#include "cpu_test_util.h"

#include <string.h>

#include "backends/cpu/cpu_features.h"

int cpu_test_kernel_tables(const mi4_cpu_kernels **tables, int capacity)
{
    int count = 0;
    if (count < capacity)
        tables[count++] = mi4_cpu_kernels_scalar();
#if defined(MOEINT4_HAVE_X86_KERNELS)
    if (count < capacity && mi4_cpu_has_avx2_fma_f16c())
        tables[count++] = mi4_cpu_kernels_avx2();
    if (count < capacity && mi4_cpu_has_avx512())
        tables[count++] = mi4_cpu_kernels_avx512();
    if (count < capacity && mi4_cpu_has_avx512_bf16())
        tables[count++] = mi4_cpu_kernels_avx512bf16_novbmi2();
    if (count < capacity && mi4_cpu_has_avx512_bf16() && mi4_cpu_has_avx512_vbmi2())
        tables[count++] = mi4_cpu_kernels_avx512bf16();
    if (count < capacity && mi4_cpu_has_amx_bf16())
        tables[count++] = mi4_cpu_kernels_amx();
    if (count < capacity && mi4_cpu_has_amx_bf16())
        tables[count++] = mi4_cpu_kernels_amx_f16();
#endif
    return count;
}

int cpu_test_same_bits(const void *a, const void *b, size_t bytes)
{
    return memcmp(a, b, bytes) == 0;
}
