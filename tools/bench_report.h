/* The bench's results: one record per M, written as JSON and drawn with
 * gnuplot. NaN fields (no floor or baseline on device backends) are null. */
#ifndef MOEINT4_TOOLS_BENCH_REPORT_H
#define MOEINT4_TOOLS_BENCH_REPORT_H

#include <stdint.h>

#include "bench_floor.h"
#include "cli.h"

typedef struct cli_bench_record {
    int64_t tokens;
    double median_ms, min_ms, max_ms;
    double floor_ms, ratio_to_floor;
    const char *floor_bound; /* "memory" or "compute"; NULL without a floor */
    double baseline_ms, baseline_min_ms, baseline_max_ms, baseline_ratio_to_floor;
    double speedup_vs_baseline;
    double weight_bytes; /* mean checkpoint bytes of the experts hit per forward */
    double experts_hit;  /* mean distinct experts per forward */
    double gbps, gflops;
    double rel_err;          /* library vs the double reference, sampled rows */
    double baseline_rel_err; /* baseline vs library, every value */
    double baseline_ref_err; /* baseline vs the double reference, sampled rows */
    double compute_fraction; /* compute term of the floor / median: share of the ceiling */
    int below_floor;         /* a time below its floor: a measurement error */
} cli_bench_record;

/* What holds for every record of one run. */
typedef struct cli_bench_run {
    const cli_options *options;
    const char *backend;
    int device_pointers;
    int threads;
    int warmup;
    double bandwidth_gbps, peak_gflops; /* NaN on device backends */
    const cli_floor *floor;             /* host backends: the whole floor; else NULL */
    double prepare_ms;
    double load_average;       /* 1-minute load when the run began */
    const char *openblas_core; /* OpenBLAS's kernel family (floor, baseline) */
    char cache_policy[192];
    char date[32]; /* UTC, ISO 8601 */
} cli_bench_run;

/* Returns CLI_EXIT_OK or prints why the file could not be written. */
int cli_bench_write_json(const char *path, const cli_bench_run *run,
                         const cli_bench_record *records, int count);
/* PNG of time/floor against M (log x) for the backend and the baseline (or
 * of the time when there is no floor). Fails with a message when gnuplot is
 * missing or fails. */
int cli_bench_plot(const char *path, const cli_bench_run *run, const cli_bench_record *records,
                   int count);

#endif
