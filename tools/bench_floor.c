/* Bandwidth and compute floors, measured with plain code in the same run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>

#include "bench_floor.h"
#include "cli.h"

#define CLI_BANDWIDTH_PASSES 7
#define CLI_SGEMM_REPEATS 5
#define CLI_SGEMM_SIZE 2048
#define CLI_MAX_READ_THREADS 256

const char *cli_openblas_core(void) {
    const char *core = openblas_get_corename();
    return core != NULL ? core : "unknown";
}

/* Whether /proc/cpuinfo's flags line lists `flag` (as a whole word). */
static int cli_cpu_flag(const char *flags, const char *flag) {
    size_t length = strlen(flag);
    for (const char *at = strstr(flags, flag); at != NULL; at = strstr(at + 1, flag)) {
        if ((at == flags || at[-1] == ' ') && (at[length] == ' ' || at[length] == '\n' ||
                                               at[length] == '\0'))
            return 1;
    }
    return 0;
}

const char *cli_openblas_suggestion(void) {
    static const char *const pre_avx2[] = {"prescott", "core2", "penryn", "dunnington",
                                           "nehalem", "atom", "sandybridge", "barcelona",
                                           "opteron", "bobcat", "generic", "katmai"};
    const char *core = cli_openblas_core();
    int generic = 0;
    for (size_t i = 0; i < sizeof pre_avx2 / sizeof pre_avx2[0]; i++)
        generic |= strncasecmp(core, pre_avx2[i], strlen(pre_avx2[i])) == 0;
    if (!generic) return NULL;
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    if (cpuinfo == NULL) return NULL;
    char line[8192];
    const char *suggestion = NULL;
    while (fgets(line, sizeof line, cpuinfo) != NULL) {
        if (strncmp(line, "flags", 5) != 0) continue;
        if (cli_cpu_flag(line, "avx512_bf16"))
            suggestion = "Cooperlake";
        else if (cli_cpu_flag(line, "avx512f") && cli_cpu_flag(line, "avx512vl") &&
                 cli_cpu_flag(line, "avx512bw") && cli_cpu_flag(line, "avx512dq"))
            suggestion = "SkylakeX";
        else if (cli_cpu_flag(line, "avx2") && cli_cpu_flag(line, "fma"))
            suggestion = "Haswell";
        break;
    }
    fclose(cpuinfo);
    return suggestion;
}

size_t cli_last_level_cache_bytes(void) {
    long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? (size_t)bytes : (size_t)32 << 20;
}

typedef struct cli_read_task {
    const uint64_t *data;
    size_t words;
    uint64_t sum;
} cli_read_task;

/* Four independent sums so the loop is limited by memory, not by one add chain. */
static void *cli_read_slice(void *argument) {
    cli_read_task *task = argument;
    const uint64_t *data = task->data;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= task->words; i += 4) {
        s0 += data[i];
        s1 += data[i + 1];
        s2 += data[i + 2];
        s3 += data[i + 3];
    }
    for (; i < task->words; i++) s0 += data[i];
    task->sum = s0 + s1 + s2 + s3;
    return NULL;
}

uint64_t cli_parallel_read(const uint64_t *data, size_t words, int threads) {
    if (threads < 1) threads = 1;
    if (threads > CLI_MAX_READ_THREADS) threads = CLI_MAX_READ_THREADS;
    cli_read_task tasks[CLI_MAX_READ_THREADS];
    pthread_t ids[CLI_MAX_READ_THREADS];
    int started[CLI_MAX_READ_THREADS];
    size_t per_thread = (words + (size_t)threads - 1) / (size_t)threads;
    for (int t = 0; t < threads; t++) {
        size_t begin = (size_t)t * per_thread;
        size_t end = begin + per_thread < words ? begin + per_thread : words;
        tasks[t].data = data + (begin < words ? begin : words);
        tasks[t].words = begin < end ? end - begin : 0;
        tasks[t].sum = 0;
        /* thread 0's slice runs on the calling thread */
        started[t] = t > 0 && pthread_create(&ids[t], NULL, cli_read_slice, &tasks[t]) == 0;
    }
    for (int t = 0; t < threads; t++) {
        if (!started[t]) cli_read_slice(&tasks[t]);
    }
    uint64_t sum = 0;
    for (int t = 0; t < threads; t++) {
        if (started[t]) pthread_join(ids[t], NULL);
        sum += tasks[t].sum;
    }
    return sum;
}

static size_t cli_physical_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)4 << 30;
}

static double cli_measure_bandwidth(int threads, size_t *bytes_out) {
    /* 8x the last-level cache, between 512 MiB and 2 GiB (and 1/8 of RAM). */
    size_t bytes = 8 * cli_last_level_cache_bytes();
    if (bytes < ((size_t)512 << 20)) bytes = (size_t)512 << 20;
    if (bytes > ((size_t)2 << 30)) bytes = (size_t)2 << 30;
    if (bytes > cli_physical_bytes() / 8) bytes = cli_physical_bytes() / 8;
    size_t words = bytes / sizeof(uint64_t);
    uint64_t *data = malloc(words * sizeof *data);
    if (data == NULL) return -1.0;
    for (size_t i = 0; i < words; i++) data[i] = i; /* touch every page before timing */
    double rates[CLI_BANDWIDTH_PASSES];
    volatile uint64_t sink = cli_parallel_read(data, words, threads); /* warm-up */
    for (int pass = 0; pass < CLI_BANDWIDTH_PASSES; pass++) {
        double start = cli_now();
        sink += cli_parallel_read(data, words, threads);
        rates[pass] = (double)(words * sizeof *data) / (cli_now() - start) / 1e9;
    }
    (void)sink;
    free(data);
    *bytes_out = words * sizeof(uint64_t);
    return cli_median(rates, CLI_BANDWIDTH_PASSES);
}

static double cli_measure_sgemm(int threads, int n) {
    size_t count = (size_t)n * (size_t)n;
    float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
    float *c = malloc(count * sizeof *c);
    if (a == NULL || b == NULL || c == NULL) {
        free(a);
        free(b);
        free(c);
        return -1.0;
    }
    for (size_t i = 0; i < count; i++) {
        a[i] = (float)((i * 7 % 13) + 1) / 13.0f;
        b[i] = (float)((i * 5 % 11) + 1) / 11.0f;
    }
    openblas_set_num_threads(threads);
    double rates[CLI_SGEMM_REPEATS];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c,
                n); /* warm-up: thread pool start, page faults */
    for (int r = 0; r < CLI_SGEMM_REPEATS; r++) {
        double start = cli_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f,
                    c, n);
        rates[r] = 2.0 * n * (double)n * n / (cli_now() - start) / 1e9;
    }
    free(a);
    free(b);
    free(c);
    return cli_median(rates, CLI_SGEMM_REPEATS);
}

int cli_floor_measure(cli_floor *floor, int threads) {
    memset(floor, 0, sizeof *floor);
    floor->bandwidth_threads = threads;
    floor->sgemm_threads = threads;
    floor->sgemm_size = CLI_SGEMM_SIZE;
    floor->bandwidth_gbps = cli_measure_bandwidth(threads, &floor->bandwidth_bytes);
    floor->peak_gflops = cli_measure_sgemm(threads, CLI_SGEMM_SIZE);
    return floor->bandwidth_gbps > 0.0 && floor->peak_gflops > 0.0 ? 0 : -1;
}

int cli_flusher_create(cli_flusher *flusher, int threads) {
    memset(flusher, 0, sizeof *flusher);
    flusher->threads = threads;
    flusher->words = 2 * cli_last_level_cache_bytes() / sizeof(uint64_t);
    flusher->data = malloc(flusher->words * sizeof(uint64_t));
    if (flusher->data == NULL) return -1;
    for (size_t i = 0; i < flusher->words; i++) flusher->data[i] = i;
    return 0;
}

void cli_flusher_run(cli_flusher *flusher) {
    if (flusher->data != NULL)
        flusher->sink += cli_parallel_read(flusher->data, flusher->words, flusher->threads);
}

void cli_flusher_destroy(cli_flusher *flusher) {
    free(flusher->data);
    flusher->data = NULL;
}
