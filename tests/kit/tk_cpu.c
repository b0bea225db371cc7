/* Which CPU kernel tables this machine runs, seen through GCC's builtins:
 * independent of the library's own CPUID code (cpu_features.h), so a test
 * can check that code's choice against it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#include "testkit.h"

/* AMX-TILE + AMX-BF16 in CPUID (clang 15's builtin knows neither), the
 * tile state in XCR0, and Linux's grant of it to this process. */
static int has_amx_bf16(void)
{
#if defined(__x86_64__) && defined(__linux__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!(d & (1u << 22)) || !(d & (1u << 24)))
        return 0;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0x60000u) != 0x60000u)
        return 0;
    const long req_xcomp_perm = 0x1023, xtiledata = 18;
    return syscall(SYS_arch_prctl, req_xcomp_perm, xtiledata) == 0;
#else
    return 0;
#endif
}

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
    if (level >= 4)
        return avx512 && __builtin_cpu_supports("avx512bf16") &&
               __builtin_cpu_supports("avx512vbmi2") && has_amx_bf16();
    if (level == 3)
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

static const char *const kernel_names[] = { "scalar", "avx2", "avx512", "avx512bf16", "amx" };
#define TOP_LEVEL 4

const char *tk_cpu_kernel_name(int level)
{
    return kernel_names[level < 0 ? 0 : level > TOP_LEVEL ? TOP_LEVEL : level];
}

int tk_cpu_kernel_level(const char *name)
{
    for (int level = 0; name && level <= TOP_LEVEL; level++)
        if (strcmp(name, kernel_names[level]) == 0)
            return level;
    return TOP_LEVEL;
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
    else if (level == tk_cpu_best_level(TOP_LEVEL))
        snprintf(why, capacity,
                 "MOEINT4_CPU_KERNEL=%s: the best table of this CPU, which the run without it "
                 "checks",
                 forced);
    else
        return NULL;
    return why;
}
