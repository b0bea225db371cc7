/* The AMX check of cpu_features.h: CPUID and XCR0, then the process's
 * permission to use the tile data, which Linux grants on request. */
#include "backends/cpu/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* arch_prctl codes and the tile data's state component (Linux uapi) */
#define MI4_ARCH_REQ_XCOMP_PERM 0x1023
#define MI4_XFEATURE_XTILEDATA 18

int mi4_cpu_has_amx_bf16(void)
{
    if (!mi4_cpu_has_avx512_bf16() || !mi4_cpu_has_avx512_vbmi2())
        return 0;
    unsigned a, b, c, d;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned amx_bf16 = 1u << 22, amx_tile = 1u << 24;
    if ((d & (amx_bf16 | amx_tile)) != (amx_bf16 | amx_tile))
        return 0;
    const uint32_t tile_state = (1u << 17) | (1u << 18); /* XTILECFG, XTILEDATA */
    if ((mi4_cpu_xcr0() & tile_state) != tile_state)
        return 0;
#if defined(__linux__) && defined(__x86_64__)
    /* idempotent, and for every thread of the process */
    return syscall(SYS_arch_prctl, MI4_ARCH_REQ_XCOMP_PERM, MI4_XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}
#endif
