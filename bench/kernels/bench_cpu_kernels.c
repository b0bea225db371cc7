/* Micro-benchmarks of the CPU backend's kernels, outside the library's
 * forward pass:
 *   gemv   one token through 8-row tiles, weights resident in L2 (the
 *          kernel's own speed) and streamed from DRAM (what decode sees),
 *          1 and 2 threads, GB/s of int4 tile bytes;
 *   block  T tokens per tile (the many-tokens path), GFLOP/s;
 *   sgemm  the alternative for many tokens: OpenBLAS sgemm on f32 weights
 *          dequantized once, GFLOP/s (the dequantization not counted).
 * Usage: bench_cpu_kernels [scalar] (default: the selected table; env
 * MOEINT4_CPU_KERNEL=avx2|avx512|avx512bf16|amx caps it). */
#if !defined(MI4_BENCH_NO_BLAS)
#include <cblas.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu_kernels.h"
#include "layout/cpu_repack.h"

typedef struct bench_setup {
    mi4_cpu_pack_geometry geo;
    uint8_t *tiles;
    int num_tiles; /* tiles in the buffer */
    float *x;      /* [tokens][x_stride] */
    size_t x_stride;
    float *xsum;
    int tokens;
    const mi4_cpu_kernels *kernels;
} bench_setup;

typedef struct thread_arg {
    const bench_setup *setup;
    int tile_begin, tile_end, repeats;
} thread_arg;

/* BENCH_CLOCK=cpu: time by process CPU time (per thread), for a machine
 * whose cores are shared with other work; default wall time. */
static clockid_t clock_kind = CLOCK_MONOTONIC;

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

static void make_setup(bench_setup *s, const mi4_cpu_kernels *kernels, int in, int tiles,
                       int tokens)
{
    s->geo = mi4_cpu_pack_geometry_make(in, MI4_CPU_TILE_ROWS, 128);
    s->num_tiles = tiles;
    s->tiles = aligned_alloc(64, s->geo.tile_bytes * (size_t)tiles);
    for (size_t i = 0; i < s->geo.tile_bytes * (size_t)tiles; i++)
        s->tiles[i] = (uint8_t)rng_next();
    for (int t = 0; t < tiles; t++) { /* sane scales (f16 1/64) and zeros */
        uint8_t *tile = s->tiles + (size_t)t * s->geo.tile_bytes;
        for (int g = 0; g < s->geo.num_groups * MI4_CPU_TILE_ROWS; g++) {
            tile[s->geo.scales_offset + 2 * (size_t)g] = 0x00;
            tile[s->geo.scales_offset + 2 * (size_t)g + 1] = 0x24;
            tile[s->geo.zeros_offset + (size_t)g] = 8;
        }
    }
    s->tokens = tokens;
    s->x_stride = (size_t)in;
    s->x = aligned_alloc(64, sizeof(float) * (size_t)in * tokens);
    s->xsum = malloc(sizeof(float) * (size_t)s->geo.num_groups * tokens);
    for (int i = 0; i < in * tokens; i++)
        s->x[i] = (float)(rng_next() % 1000) / 1000.0f - 0.5f;
    for (int i = 0; i < s->geo.num_groups * tokens; i++)
        s->xsum[i] = 1.0f;
    s->kernels = kernels;
}

static void *run_tiles(void *opaque)
{
    thread_arg *a = opaque;
    const bench_setup *s = a->setup;
    float *y = malloc(sizeof(float) * MI4_CPU_TILE_ROWS * 2 * (size_t)s->tokens);
    const float **rows = malloc(sizeof(float *) * 2 * (size_t)s->tokens);
    for (int t = 0; t < s->tokens; t++) {
        rows[t] = s->x + (size_t)t * s->x_stride;
        rows[s->tokens + t] = s->xsum + (size_t)t * s->geo.num_groups;
    }
    mi4_cpu_tile_job job = {
        .geo = &s->geo, .x = rows, .xsum = rows + s->tokens, .tokens = s->tokens, .y = y
    };
    mi4_cpu_tile_job next = job;
    next.y = y + MI4_CPU_TILE_ROWS * (size_t)s->tokens;
    for (int r = 0; r < a->repeats; r++) { /* in pairs, as the forward pass runs them */
        int t = a->tile_begin;
        for (; t + 1 < a->tile_end; t += 2) {
            job.tile = s->tiles + (size_t)t * s->geo.tile_bytes;
            next.tile = job.tile + s->geo.tile_bytes;
            mi4_cpu_run_tile_pair(s->kernels, &job, &next);
        }
        if (t < a->tile_end) {
            job.tile = s->tiles + (size_t)t * s->geo.tile_bytes;
            s->kernels->tile(&job);
        }
    }
    free(y);
    free(rows);
    return NULL;
}

/* Seconds for `repeats` passes over all tiles, split over `threads`. */
static double time_tiles(const bench_setup *s, int threads, int repeats)
{
    pthread_t ids[8];
    thread_arg args[8];
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = now_s(clock_kind);
        for (int i = 0; i < threads; i++) {
            args[i] = (thread_arg){ s, s->num_tiles * i / threads, s->num_tiles * (i + 1) / threads,
                                    repeats };
            pthread_create(&ids[i], NULL, run_tiles, &args[i]);
        }
        for (int i = 0; i < threads; i++)
            pthread_join(ids[i], NULL);
        double dt = now_s(clock_kind) - t0;
        if (clock_kind == CLOCK_PROCESS_CPUTIME_ID)
            dt /= threads; /* CPU seconds per thread: immune to stolen time */
        if (dt < best)
            best = dt;
    }
    return best;
}

static void bench_gemv(const mi4_cpu_kernels *kernels)
{
    const int in = 2048;
    bench_setup l2, dram;
    make_setup(&l2, kernels, in, 64, 1);      /* 64 x 8 KB tiles = 0.5 MB: L2 */
    make_setup(&dram, kernels, in, 65536, 1); /* 0.5 GB: beyond any cache */
    for (int threads = 1; threads <= 2; threads++) {
        double bytes_l2 = (double)l2.geo.tile_bytes * l2.num_tiles * 2000;
        double t_l2 = time_tiles(&l2, threads, 2000);
        double bytes_dram = (double)dram.geo.tile_bytes * dram.num_tiles;
        double t_dram = time_tiles(&dram, threads, 1);
        printf("gemv %-6s threads %d: L2-resident %6.1f GB/s   DRAM %6.1f GB/s   (tile bytes)\n",
               kernels->name, threads, bytes_l2 / t_l2 * 1e-9, bytes_dram / t_dram * 1e-9);
    }
}

static void bench_blocks(const mi4_cpu_kernels *kernels)
{
    const int in = 2048;
    const int token_counts[] = { 1, 2, 3, 4, 8, 12, 16, 32, 64, 128 };
    for (int i = 0; i < 10; i++) {
        bench_setup s;
        make_setup(&s, kernels, in, 96, token_counts[i]);
        int repeats = 4096 / token_counts[i];
        for (int threads = 1; threads <= 2; threads += 1) {
            double t = time_tiles(&s, threads, repeats);
            double flops = 2.0 * MI4_CPU_TILE_ROWS * in * (double)s.tokens * s.num_tiles * repeats;
            printf("block %-6s T=%2d threads %d: %7.1f GFLOP/s\n", kernels->name, s.tokens, threads,
                   flops / t * 1e-9);
        }
        free(s.tiles);
        free(s.x);
        free(s.xsum);
    }
}

static void bench_sgemm(void)
{
#if defined(MI4_BENCH_NO_BLAS)
    printf("sgemm: built without OpenBLAS\n");
#else
    const int k = 2048, n = 1536;
    const int ms[] = { 8, 16, 32, 64, 256 };
    float *w = malloc(sizeof(float) * (size_t)k * n);
    float *x = malloc(sizeof(float) * (size_t)k * 256);
    float *y = malloc(sizeof(float) * (size_t)n * 256);
    for (size_t i = 0; i < (size_t)k * n; i++)
        w[i] = (float)(rng_next() % 1000) / 1000.0f;
    for (size_t i = 0; i < (size_t)k * 256; i++)
        x[i] = (float)(rng_next() % 1000) / 1000.0f;
    for (int i = 0; i < 5; i++) {
        int m = ms[i];
        double best = 1e30;
        for (int trial = 0; trial < 5; trial++) {
            double t0 = now_s(clock_kind);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y,
                        n);
            double dt = now_s(clock_kind) - t0;
            if (clock_kind == CLOCK_PROCESS_CPUTIME_ID) /* per thread, as time_tiles */
                dt /= openblas_get_num_threads();
            if (dt < best)
                best = dt;
        }
        printf("sgemm openblas M=%3d N=%d K=%d (%d threads): %7.1f GFLOP/s\n", m, n, k,
               openblas_get_num_threads(), 2.0 * m * n * k / best * 1e-9);
    }
    free(w);
    free(x);
    free(y);
#endif
}

int main(int argc, char **argv)
{
    const mi4_cpu_kernels *kernels = mi4_cpu_kernels_select();
    if (argc > 1 && strcmp(argv[1], "scalar") == 0)
        kernels = mi4_cpu_kernels_scalar();
    const char *clock_env = getenv("BENCH_CLOCK");
    if (clock_env && strcmp(clock_env, "cpu") == 0)
        clock_kind = CLOCK_PROCESS_CPUTIME_ID;
    const char *only = getenv("BENCH_ONLY");
    if (only && strcmp(only, "block") == 0) {
        bench_blocks(kernels);
        return 0;
    }
    bench_gemv(kernels);
    if (only && strcmp(only, "gemv") == 0)
        return 0;
    bench_blocks(kernels);
    bench_sgemm();
    return 0;
}
