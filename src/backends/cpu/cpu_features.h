/* Run-time checks for the AVX2, AVX-512, AVX512-BF16 and AMX kernels' instruction sets, from CPUID itself
 * (clang's __builtin_cpu_supports knows no "f16c"), including the OS's
 * support for the YMM register state. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_FEATURES_H
#define MOEINT4_BACKENDS_CPU_CPU_FEATURES_H

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stddef.h>
#include <stdint.h>

/* The register state the OS saves (XCR0); only after CPUID's OSXSAVE bit. */
static inline uint32_t mi4_cpu_xcr0(void)
{
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    return xcr0_lo;
}

static inline int mi4_cpu_has_avx2_fma_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
    if ((c & (fma | osxsave | avx | f16c)) != (fma | osxsave | avx | f16c))
        return 0;
    if ((mi4_cpu_xcr0() & 6u) != 6u) /* XMM and YMM state saved by the OS */
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b & (1u << 5)) != 0; /* AVX2 */
}

/* AVX-512 F/BW/DQ/VL on top of AVX2, with the OS saving the opmask and all
 * 32 ZMM registers (XCR0 bits 5-7). */
static inline int mi4_cpu_has_avx512(void)
{
    if (!mi4_cpu_has_avx2_fma_f16c())
        return 0;
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    if ((b & (f | dq | bw | vl)) != (f | dq | bw | vl))
        return 0;
    return (mi4_cpu_xcr0() & 0xe6u) == 0xe6u;
}

/* AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16: CPUID leaf 7 subleaf 1, EAX bit
 * 5) on top of the above: the bf16 table's instructions. */
static inline int mi4_cpu_has_avx512_bf16(void)
{
    if (!mi4_cpu_has_avx512() || __get_cpuid_max(0, NULL) < 7)
        return 0;
    unsigned a, b, c, d;
    __cpuid_count(7, 1, a, b, c, d);
    return (a & (1u << 5)) != 0;
}

/* AVX512_VBMI2 (vpshrdw: leaf 7 subleaf 0, ECX bit 6): one instruction less
 * per 128 weights in the bf16 table. Every AVX512_BF16 CPU has it but Intel's
 * Cooper Lake, which runs the table's no-VBMI2 build. */
static inline int mi4_cpu_has_avx512_vbmi2(void)
{
    if (!mi4_cpu_has_avx512() || __get_cpuid_max(0, NULL) < 7)
        return 0;
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    return (c & (1u << 6)) != 0;
}

/* AMX-TILE and AMX-BF16 (leaf 7 subleaf 0, EDX bits 24 and 22) on top of
 * the VBMI2 bf16 table, with the OS saving the tile state (XCR0 bits 17-18)
 * and granting this process its use (Linux asks for that once, by
 * arch_prctl: the tile data is 8 KB of signal frame). cpu_features.c. */
int mi4_cpu_has_amx_bf16(void);
#else
static inline int mi4_cpu_has_amx_bf16(void) { return 0; }
static inline int mi4_cpu_has_avx2_fma_f16c(void) { return 0; }
static inline int mi4_cpu_has_avx512(void) { return 0; }
static inline int mi4_cpu_has_avx512_bf16(void) { return 0; }
static inline int mi4_cpu_has_avx512_vbmi2(void) { return 0; }
#endif

#endif
