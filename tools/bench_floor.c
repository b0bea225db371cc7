/* The bench's floor, measured with plain code in the same run: the best
 * multi-stream read of all cores, and the compute ceilings (bench_ceiling.c). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h>

#include "bench_floor.h"
#include "cli.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CLI_BANDWIDTH_PASSES 3
#define CLI_MAX_READ_THREADS 256

const char *cli_openblas_core(void)
{
    const char *core = openblas_get_corename();
    return core != NULL ? core : "unknown";
}

/* Whether /proc/cpuinfo's flags line lists `flag` (as a whole word). */
static int cli_cpu_flag(const char *flags, const char *flag)
{
    size_t length = strlen(flag);
    for (const char *at = strstr(flags, flag); at != NULL; at = strstr(at + 1, flag)) {
        if ((at == flags || at[-1] == ' ') &&
            (at[length] == ' ' || at[length] == '\n' || at[length] == '\0'))
            return 1;
    }
    return 0;
}

const char *cli_openblas_suggestion(void)
{
    static const char *const pre_avx2[] = { "prescott", "core2",  "penryn",      "dunnington",
                                            "nehalem",  "atom",   "sandybridge", "barcelona",
                                            "opteron",  "bobcat", "generic",     "katmai" };
    const char *core = cli_openblas_core();
    int generic = 0;
    for (size_t i = 0; i < sizeof pre_avx2 / sizeof pre_avx2[0]; i++)
        generic |= strncasecmp(core, pre_avx2[i], strlen(pre_avx2[i])) == 0;
    if (!generic)
        return NULL;
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    if (cpuinfo == NULL)
        return NULL;
    char line[8192];
    const char *suggestion = NULL;
    while (fgets(line, sizeof line, cpuinfo) != NULL) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
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

size_t cli_last_level_cache_bytes(void)
{
    long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (bytes <= 0)
        bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return bytes > 0 ? (size_t)bytes : (size_t)32 << 20;
}

/* What the threads of one parallel read share: they read their slices in
 * rounds of one chunk each, started together (a barrier); a round's rate is
 * its bytes over its slowest thread's time. */
typedef struct cli_read_rounds {
    atomic_int go; /* set once the barrier counts the threads that started */
    pthread_barrier_t barrier;
    int threads;
    size_t rounds;
    double seconds[CLI_MAX_READ_THREADS];
    size_t bytes[CLI_MAX_READ_THREADS];
    double best_gbps; /* the fastest round */
} cli_read_rounds;

typedef struct cli_read_task {
    const uint64_t *data;
    size_t words;
    int streams;
    size_t prefetch_words; /* software prefetch this far ahead of each stream; 0: none */
    int index;
    cli_read_rounds *rounds; /* NULL: read the slice in one go, untimed */
    uint64_t sum;
} cli_read_task;

/* The slices are read and timed in chunks of this many bytes per thread,
 * each far from the caches (the array is walked once), about a forward's
 * worth of weights: on a shared machine a long pass is more likely than a
 * short forward to lose its core for a while, which would understate the
 * bandwidth and overstate the floor. */
#define CLI_READ_CHUNK_BYTES ((size_t)16 << 20)

/* Reads `words` words as `streams` equal parts side by side, 64 bytes of
 * each in turn (several open streams per thread keep more lines in flight,
 * as the kernels' paired tiles do), then what is left over one by one. */
static uint64_t cli_read_streams_plain(const uint64_t *data, size_t words, int streams)
{
    size_t per_stream = words / (size_t)streams / 8 * 8;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < per_stream; i += 8)
        for (int s = 0; s < streams; s++) {
            const uint64_t *p = data + (size_t)s * per_stream + i;
            s0 += p[0] + p[4];
            s1 += p[1] + p[5];
            s2 += p[2] + p[6];
            s3 += p[3] + p[7];
        }
    for (size_t i = per_stream * (size_t)streams; i < words; i++)
        s0 += data[i];
    return s0 + s1 + s2 + s3;
}

#if defined(__x86_64__)
/* As the CPU kernels read their tiles: 256-bit loads, optionally a software
 * prefetch of each line `prefetch_words` ahead. */
__attribute__((target("avx2"))) static uint64_t
cli_read_streams_avx2(const uint64_t *data, size_t words, int streams, size_t prefetch_words)
{
    size_t per_stream = words / (size_t)streams / 8 * 8;
    __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
    for (size_t i = 0; i < per_stream; i += 8)
        for (int s = 0; s < streams; s++) {
            const uint64_t *p = data + (size_t)s * per_stream + i;
            if (prefetch_words > 0)
                _mm_prefetch((const char *)(p + prefetch_words), _MM_HINT_T0);
            s0 = _mm256_add_epi64(s0, _mm256_loadu_si256((const __m256i *)p));
            s1 = _mm256_add_epi64(s1, _mm256_loadu_si256((const __m256i *)(p + 4)));
        }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi64(s0, s1));
    uint64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (size_t i = per_stream * (size_t)streams; i < words; i++)
        sum += data[i];
    return sum;
}
#endif

static uint64_t cli_read_streams(const cli_read_task *task, const uint64_t *data, size_t words)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2"))
        return cli_read_streams_avx2(data, words, task->streams, task->prefetch_words);
#endif
    return cli_read_streams_plain(data, words, task->streams);
}

static void *cli_read_slice(void *argument)
{
    cli_read_task *task = argument;
    cli_read_rounds *rounds = task->rounds;
    task->sum = 0;
    if (rounds == NULL) {
        task->sum = cli_read_streams(task, task->data, task->words);
        return NULL;
    }
    const size_t chunk = CLI_READ_CHUNK_BYTES / sizeof(uint64_t);
    while (!atomic_load(&rounds->go))
        sched_yield();
    for (size_t round = 0; round < rounds->rounds; round++) {
        size_t at = round * chunk;
        size_t words = at >= task->words ? 0 : task->words - at < chunk ? task->words - at : chunk;
        pthread_barrier_wait(&rounds->barrier);
        double start = cli_now();
        if (words > 0)
            task->sum += cli_read_streams(task, task->data + at, words);
        rounds->seconds[task->index] = cli_now() - start;
        rounds->bytes[task->index] = words * sizeof(uint64_t);
        if (pthread_barrier_wait(&rounds->barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
            double slowest = 0.0, bytes = 0.0;
            for (int t = 0; t < rounds->threads; t++) {
                if (rounds->seconds[t] > slowest)
                    slowest = rounds->seconds[t];
                bytes += (double)rounds->bytes[t];
            }
            /* only full rounds: a short last chunk times mostly the barrier */
            if (slowest > 0.0 && bytes >= (double)CLI_READ_CHUNK_BYTES * rounds->threads &&
                bytes / slowest / 1e9 > rounds->best_gbps)
                rounds->best_gbps = bytes / slowest / 1e9;
        }
    }
    return NULL;
}

/* Reads the array with `threads` threads, each its own contiguous slice;
 * returns the sum of the words. With gbps != NULL the slices are read in
 * timed rounds (cli_read_rounds) and *gbps is the fastest round's rate. */
static uint64_t cli_parallel_read_streams(const uint64_t *data, size_t words, int threads,
                                          int streams, size_t prefetch_bytes, double *gbps)
{
    if (threads < 1)
        threads = 1;
    if (threads > CLI_MAX_READ_THREADS)
        threads = CLI_MAX_READ_THREADS;
    cli_read_task tasks[CLI_MAX_READ_THREADS];
    cli_read_rounds rounds;
    pthread_t ids[CLI_MAX_READ_THREADS];
    size_t per_thread = (words + (size_t)threads - 1) / (size_t)threads;
    const size_t chunk = CLI_READ_CHUNK_BYTES / sizeof(uint64_t);
    if (gbps != NULL) {
        memset(&rounds, 0, sizeof rounds);
        rounds.rounds = (per_thread + chunk - 1) / chunk;
    }
    for (int t = 0; t < threads; t++) {
        size_t begin = (size_t)t * per_thread;
        size_t end = begin + per_thread < words ? begin + per_thread : words;
        tasks[t] = (cli_read_task){ data + (begin < words ? begin : words),
                                    begin < end ? end - begin : 0,
                                    streams,
                                    prefetch_bytes / sizeof(uint64_t),
                                    t,
                                    gbps != NULL ? &rounds : NULL,
                                    0 };
    }
    /* thread 0's slice runs on the calling thread */
    int started = 1;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&ids[t], NULL, cli_read_slice, &tasks[t]) != 0)
            break;
        started++;
    }
    if (gbps != NULL) { /* rounds among the threads that started; the others' slices unread */
        rounds.threads = started;
        pthread_barrier_init(&rounds.barrier, NULL, (unsigned)started);
        atomic_store(&rounds.go, 1);
    } else {
        for (int t = started; t < threads; t++)
            cli_read_slice(&tasks[t]);
    }
    cli_read_slice(&tasks[0]);
    uint64_t sum = 0;
    for (int t = 0; t < threads; t++) {
        if (t > 0 && t < started)
            pthread_join(ids[t], NULL);
        sum += tasks[t].sum;
    }
    if (gbps != NULL) {
        *gbps = rounds.best_gbps;
        pthread_barrier_destroy(&rounds.barrier);
    }
    return sum;
}

uint64_t cli_parallel_read(const uint64_t *data, size_t words, int threads)
{
    return cli_parallel_read_streams(data, words, threads, 1, 0, NULL);
}

static size_t cli_physical_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)4 << 30;
}

/* The best reader: 1, 2, 4 or 8 streams per thread, each with no software
 * prefetch and with prefetches 4 and 16 KB ahead (the kernels prefetch),
 * its fastest round (cli_read_rounds: the threads' chunks of
 * CLI_READ_CHUNK_BYTES, started together) of a few passes. A bandwidth must
 * not be understated (the floor would be too high): the best, not the
 * median. */
static double cli_best_read(const uint64_t *data, size_t words, int threads, int *best_streams,
                            int *best_prefetch)
{
    static const int stream_counts[] = { 1, 2, 4, 8 };
    static const int prefetch_bytes[] = { 0, 4096, 16384 };
    double best = -1.0;
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < sizeof stream_counts / sizeof stream_counts[0]; i++)
        for (size_t j = 0; j < sizeof prefetch_bytes / sizeof prefetch_bytes[0]; j++)
            for (int pass = 0; pass < CLI_BANDWIDTH_PASSES; pass++) {
                double rate = 0.0;
                sink += cli_parallel_read_streams(data, words, threads, stream_counts[i],
                                                  (size_t)prefetch_bytes[j], &rate);
                if (rate > best) {
                    best = rate;
                    *best_streams = stream_counts[i];
                    *best_prefetch = prefetch_bytes[j];
                }
            }
    (void)sink;
    return best;
}

static int cli_measure_bandwidth(cli_floor *floor, int threads)
{
    /* 8x the last-level cache, between 512 MiB and 2 GiB (and 1/8 of RAM). */
    size_t bytes = 8 * cli_last_level_cache_bytes();
    if (bytes < ((size_t)512 << 20))
        bytes = (size_t)512 << 20;
    if (bytes > ((size_t)2 << 30))
        bytes = (size_t)2 << 30;
    if (bytes > cli_physical_bytes() / 8)
        bytes = cli_physical_bytes() / 8;
    size_t words = bytes / sizeof(uint64_t);
    uint64_t *data = malloc(words * sizeof *data);
    if (data == NULL)
        return -1;
    for (size_t i = 0; i < words; i++)
        data[i] = i; /* touch every page before timing */
    volatile uint64_t sink = cli_parallel_read(data, words, threads); /* warm-up */
    (void)sink;
    floor->bandwidth_gbps =
        cli_best_read(data, words, threads, &floor->bandwidth_streams, &floor->bandwidth_prefetch);
    int core_prefetch = 0;
    floor->core_bandwidth_gbps =
        cli_best_read(data, words, 1, &floor->core_bandwidth_streams, &core_prefetch);
    /* the floor takes the best reader, even one thread beating all of them */
    if (floor->core_bandwidth_gbps > floor->bandwidth_gbps) {
        floor->bandwidth_gbps = floor->core_bandwidth_gbps;
        floor->bandwidth_streams = floor->core_bandwidth_streams;
        floor->bandwidth_prefetch = core_prefetch;
        floor->bandwidth_threads = 1;
    }
    free(data);
    floor->bandwidth_bytes = words * sizeof(uint64_t);
    return floor->bandwidth_gbps > 0.0 ? 0 : -1;
}

int cli_floor_measure(cli_floor *floor, int threads, moeint4_dtype dtype)
{
    memset(floor, 0, sizeof *floor);
    floor->bandwidth_threads = threads;
    if (cli_measure_bandwidth(floor, threads) != 0)
        return -1;
    cli_ceiling_measure(floor->ceilings, threads);
    floor->kernel_ceiling =
        cli_cpu_kernel_ceiling(dtype, &floor->kernel_table, &floor->kernel_passes);
    floor->peak_gflops =
        floor->kernel_ceiling >= 0
            ? floor->ceilings[floor->kernel_ceiling].all_gflops / floor->kernel_passes
            : NAN;
    return 0;
}

int cli_flusher_create(cli_flusher *flusher, int threads)
{
    memset(flusher, 0, sizeof *flusher);
    flusher->threads = threads;
    flusher->words = 2 * cli_last_level_cache_bytes() / sizeof(uint64_t);
    flusher->data = malloc(flusher->words * sizeof(uint64_t));
    if (flusher->data == NULL)
        return -1;
    for (size_t i = 0; i < flusher->words; i++)
        flusher->data[i] = i;
    return 0;
}

void cli_flusher_run(cli_flusher *flusher)
{
    if (flusher->data != NULL)
        flusher->sink += cli_parallel_read(flusher->data, flusher->words, flusher->threads);
}

void cli_flusher_destroy(cli_flusher *flusher)
{
    free(flusher->data);
    flusher->data = NULL;
}
