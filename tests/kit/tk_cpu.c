/* Which CPU kernel tables this machine runs, seen through GCC's builtins:
 * independent of the library's own CPUID code (cpu_features.h), so a test
 * can check that code's choice against it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit.h"

int tk_cpu_has_vbmi2(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi2");
#else
    return 0;
#endif
}

/* clang's builtin knows no "f16c"; AVX2 parts all have it. */
int tk_cpu_has_kernels(int level)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (level >= 3)
        return avx512 && __builtin_cpu_supports("avx512bf16");
    if (level == 2)
        return avx512;
    if (level == 1)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return 1;
#else
    return level <= 0;
#endif
}

static const char *const kernel_names[] = { "scalar", "avx2", "avx512", "avx512bf16" };

const char *tk_cpu_kernel_name(int level)
{
    return kernel_names[level < 0 ? 0 : level > 3 ? 3 : level];
}

int tk_cpu_kernel_level(const char *name)
{
    for (int level = 0; name && level < 4; level++)
        if (strcmp(name, kernel_names[level]) == 0)
            return level;
    return 3;
}

int tk_cpu_best_level(int cap)
{
    int level = cap;
    while (level > 0 && !tk_cpu_has_kernels(level))
        level--;
    return level;
}

const char *tk_cpu_forced_kernel_skip(char *why, size_t capacity)
{
    const char *forced = getenv("MOEINT4_CPU_KERNEL");
    if (!forced || !*forced)
        return NULL;
    const int level = tk_cpu_kernel_level(forced);
    if (!tk_cpu_has_kernels(level))
        snprintf(why, capacity,
                 "MOEINT4_CPU_KERNEL=%s: this CPU cannot run that table (the library would "
                 "repeat the run of the table below)",
                 forced);
    else if (level == tk_cpu_best_level(3))
        snprintf(why, capacity,
                 "MOEINT4_CPU_KERNEL=%s: the best table of this CPU, which the run without it "
                 "checks",
                 forced);
    else
        return NULL;
    return why;
}
