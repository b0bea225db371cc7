#include "cpu_test_util.h"

#include <string.h>

int cpu_test_kernel_tables(const mi4_cpu_kernels **tables, int capacity)
{
    int count = 0;
    if (count < capacity)
        tables[count++] = mi4_cpu_kernels_scalar();
#if defined(MOEINT4_HAVE_X86_KERNELS)
    __builtin_cpu_init();
    if (count < capacity && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
        tables[count++] = mi4_cpu_kernels_avx2();
#endif
    return count;
}

int cpu_test_same_bits(const void *a, const void *b, size_t bytes)
{
    return memcmp(a, b, bytes) == 0;
}
