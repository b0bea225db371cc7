/* The machine's limits, measured in the bench's own run: read bandwidth of
 * all cores streaming arrays far larger than the last-level cache, and the
 * OpenBLAS sgemm rate on a large square. Also the cache flush the bench runs
 * between timed forwards. */
#ifndef MOEINT4_TOOLS_BENCH_FLOOR_H
#define MOEINT4_TOOLS_BENCH_FLOOR_H

#include <stddef.h>
#include <stdint.h>

/* The kernel family OpenBLAS picked at load ("Haswell", "Prescott", ...). */
const char *cli_openblas_core(void);
/* When OpenBLAS fell back to pre-AVX2 kernels on a CPU that has AVX2 or
 * AVX-512 (a model missing from its table, common in VMs), the
 * OPENBLAS_CORETYPE value that fits the CPU's flags; NULL otherwise. The sgemm
 * peak and the baseline are understated until it is set (at process start). */
const char *cli_openblas_suggestion(void);

/* Last-level cache bytes (sysconf), 32 MiB when the system does not say. */
size_t cli_last_level_cache_bytes(void);

typedef struct cli_floor {
    double bandwidth_gbps;      /* median of several all-core passes */
    size_t bandwidth_bytes;     /* array size read per pass */
    int bandwidth_threads;
    double peak_gflops;         /* median OpenBLAS sgemm rate */
    int sgemm_size;             /* n of the n x n x n sgemm */
    int sgemm_threads;
} cli_floor;

/* Measures both limits with `threads` threads (all cores for the floor).
 * Returns 0, or -1 when out of memory. */
int cli_floor_measure(cli_floor *floor, int threads);

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
