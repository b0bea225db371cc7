/* Force-included in clang fuzz builds only (cmake/Sanitizers.cmake): clang
 * 14/15 reject __builtin_cpu_supports("f16c"), which gcc accepts, so the
 * CPU backend's run-time dispatch would not compile. This answers "f16c"
 * from CPUID (leaf 1, ECX bit 29) and passes every other feature on. */
#ifndef MOEINT4_CLANG_CPU_SUPPORTS_H
#define MOEINT4_CLANG_CPU_SUPPORTS_H
#if defined(__clang__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <string.h>

static inline int mi4_clang_cpu_supports(const char *feature)
{
    if (strcmp(feature, "f16c") == 0) {
        unsigned a, b, c, d;
        return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    }
    if (strcmp(feature, "avx2") == 0)
        return __builtin_cpu_supports("avx2");
    if (strcmp(feature, "fma") == 0)
        return __builtin_cpu_supports("fma");
    return 0;
}
#define __builtin_cpu_supports(feature) mi4_clang_cpu_supports(feature)
#endif
#endif
