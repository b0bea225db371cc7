/* The compute ceilings of the bench's floor: GFLOP/s of register-only loops
 * of the instructions the CPU backend's kernels use, per core and on all
 * cores, and which of them bounds the kernel table the library runs. */
#ifndef MOEINT4_TOOLS_BENCH_CEILING_H
#define MOEINT4_TOOLS_BENCH_CEILING_H

#include "moeint4.h"

enum {
    CLI_CEILING_FMA_YMM,
    CLI_CEILING_FMA_ZMM,
    CLI_CEILING_DPBF16,
    CLI_CEILING_TDPBF16,
    CLI_CEILING_COUNT
};

extern const char *const cli_ceiling_names[CLI_CEILING_COUNT];

typedef struct cli_ceiling {
    const char *name;   /* "f32 FMA ymm", "f32 FMA zmm", "vdpbf16ps zmm", "tdpbf16ps tile" */
    int available;      /* the CPU (and OS) runs it */
    int threads;        /* threads of all_gflops */
    double core_gflops; /* one thread */
    double all_gflops;  /* `threads` threads at once */
} cli_ceiling;

/* 1 when the CPU runs instruction `which` (CLI_CEILING_*). */
int cli_ceiling_available(int which);

/* Fills ceilings[CLI_CEILING_COUNT] (unavailable ones with 0 GFLOP/s). */
void cli_ceiling_measure(cli_ceiling *ceilings, int threads);

/* The CPU kernel table the library runs for activations of `dtype` (its
 * name into *table) and the CLI_CEILING_* instruction that bounds it; -1
 * when none of them does (no x86 SIMD). *passes: how many times that
 * instruction multiplies each weight by each input (2 for the two bf16
 * planes of amx-f16), so the table's rate is the ceiling / *passes. */
int cli_cpu_kernel_ceiling(moeint4_dtype dtype, const char **table, int *passes);

#endif
