/* The machine's limits, measured in the bench's own run: read bandwidth of
 * all cores streaming an array far larger than the last-level cache (the
 * best of 1-8 streams per thread, with and without software prefetch), and the compute ceilings of the
 * instructions the CPU kernels use (bench_ceiling.h). Also the cache flush
 * the bench runs between timed forwards, and OpenBLAS's kernel family (the
 * baseline's). */
#ifndef MOEINT4_TOOLS_BENCH_FLOOR_H
#define MOEINT4_TOOLS_BENCH_FLOOR_H

#include <stddef.h>
#include <stdint.h>

#include "bench_ceiling.h"

/* The kernel family OpenBLAS picked at load ("Haswell", "Prescott", ...). */
const char *cli_openblas_core(void);
/* When OpenBLAS fell back to pre-AVX2 kernels on a CPU that has AVX2 or
 * AVX-512 (a model missing from its table, common in VMs), the
 * OPENBLAS_CORETYPE value that fits the CPU's flags; NULL otherwise. The
 * baseline is understated until it is set (at process start). */
const char *cli_openblas_suggestion(void);

/* Last-level cache bytes (sysconf), 32 MiB when the system does not say. */
size_t cli_last_level_cache_bytes(void);

typedef struct cli_floor {
    double bandwidth_gbps;      /* best all-core pass of the best reader */
    int bandwidth_streams;      /* streams per thread of that reader */
    int bandwidth_prefetch;     /* its software prefetch distance in bytes (0: none) */
    double core_bandwidth_gbps; /* the same on one thread */
    int core_bandwidth_streams;
    size_t bandwidth_bytes; /* array size read per pass */
    int bandwidth_threads;
    cli_ceiling ceilings[CLI_CEILING_COUNT];
    int kernel_ceiling;       /* CLI_CEILING_* bounding the kernel table, or -1 */
    const char *kernel_table; /* the CPU kernel table the library runs */
    int kernel_passes;        /* times kernel_ceiling's instruction takes each product */
    double peak_gflops;       /* all-core GFLOP/s of kernel_ceiling / passes (NaN: none) */
} cli_floor;

/* Measures the limits with `threads` threads (all cores for the floor),
 * for activations of `dtype` (which picks the kernel table). Returns 0, or
 * -1 when out of memory. */
int cli_floor_measure(cli_floor *floor, int threads, moeint4_dtype dtype);

/* Reads `words` 64-bit words with `threads` threads; returns their sum (so
 * the reads cannot be optimised away). */
uint64_t cli_parallel_read(const uint64_t *data, size_t words, int threads);

/* A buffer of twice the last-level cache, read between timed iterations so
 * that weights touched by the previous iteration are evicted. */
typedef struct cli_flusher {
    uint64_t *data;
    size_t words;
    int threads;
    uint64_t sink;
} cli_flusher;
int cli_flusher_create(cli_flusher *flusher, int threads);
void cli_flusher_run(cli_flusher *flusher);
void cli_flusher_destroy(cli_flusher *flusher);

#endif
