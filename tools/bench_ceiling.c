/* Compute ceilings from register-only loops: 14 (ymm: 16 registers) or 16
 * independent accumulator chains of one instruction (enough to cover its
 * latency at full throughput; AMX: 6 C tiles, the registers left beside A
 * and B), no memory operand, run on one thread and on all threads at
 * once. The best of a few timed runs is kept: a ceiling must not be
 * understated, or a kernel would look faster than the machine. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_ceiling.h"
#include "cli.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define CLI_X86 1
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#endif

#define CLI_CEILING_TRIALS 3
#define CLI_CEILING_SECONDS 0.05
#define CLI_CEILING_MAX_THREADS 256

const char *const cli_ceiling_names[CLI_CEILING_COUNT] = { "f32 FMA ymm", "f32 FMA zmm",
                                                           "vdpbf16ps zmm", "tdpbf16ps tile" };
/* flops per loop iteration: chains x lanes x 2 (x 2 products per lane for
 * vdpbf16ps; a tile: 16 x 16 outputs of 32 products) */
static const double cli_ceiling_flops_per_iteration[CLI_CEILING_COUNT] = { 14 * 8 * 2, 16 * 16 * 2,
                                                                           16 * 16 * 4,
                                                                           6 * 16 * 16 * 32 * 2 };

#if defined(CLI_X86)
/* Each returns a value depending on every chain, so none is optimised away. */
__attribute__((target("avx2,fma"))) static float cli_fma_ymm(long iterations)
{
    __m256 acc[14];
    const __m256 m = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    for (int i = 0; i < 14; i++)
        acc[i] = _mm256_set1_ps((float)i);
    for (long n = 0; n < iterations; n++)
        for (int i = 0; i < 14; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], m, b);
    for (int i = 1; i < 14; i++)
        acc[0] = _mm256_add_ps(acc[0], acc[i]);
    return _mm_cvtss_f32(_mm256_castps256_ps128(acc[0]));
}

__attribute__((target("avx512f,fma"))) static float cli_fma_zmm(long iterations)
{
    __m512 acc[16];
    const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-6f);
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < iterations; n++)
        for (int i = 0; i < 16; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], m, b);
    for (int i = 1; i < 16; i++)
        acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}

/* bf16 pairs of 1/1024 (0x3a80): the sums grow by 2^-19 per step, far from overflow. */
__attribute__((target("avx512f,avx512bf16"))) static float cli_dpbf16_zmm(long iterations)
{
    __m512 acc[16];
    const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3a80);
    const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3a80);
    for (int i = 0; i < 16; i++)
        acc[i] = _mm512_set1_ps((float)i);
    for (long n = 0; n < iterations; n++)
        for (int i = 0; i < 16; i++)
            acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    for (int i = 1; i < 16; i++)
        acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}

/* AMX-TILE + AMX-BF16 (CPUID leaf 7 EDX bits 24, 22), the tile state saved
 * by the OS (XCR0 bits 17-18) and granted to this process (Linux). */
static int cli_has_amx_bf16(void)
{
#if defined(__linux__)
    unsigned a, b, c, d, xcr0, xcr0_hi;
    if (__get_cpuid_max(0, NULL) < 7 || !__builtin_cpu_supports("avx512bf16"))
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
    return ((d >> 22) & (d >> 24) & 1) && (xcr0 & 0x60000u) == 0x60000u &&
           syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return 0;
#endif
}

/* Six C tiles += A x B, with A and B bf16 tiles of 1/1024 as above. */
__attribute__((target("amx-tile,amx-bf16"))) static float cli_tdpbf16_tiles(long iterations)
{
    struct {
        unsigned char palette, start_row, reserved[14];
        unsigned short colsb[16];
        unsigned char rows[16];
    } config;
    memset(&config, 0, sizeof config);
    config.palette = 1;
    for (int t = 0; t < 8; t++) {
        config.colsb[t] = 64;
        config.rows[t] = 16;
    }
    unsigned short operand[16 * 32];
    for (int i = 0; i < 16 * 32; i++)
        operand[i] = 0x3a80;
    float out[16 * 16];
    __asm__ volatile("" ::: "memory"); /* GCC's intrinsics name no memory they read */
    _tile_loadconfig(&config);
    _tile_loadd(0, operand, 64);
    _tile_loadd(1, operand, 64);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    for (long n = 0; n < iterations; n++) {
        _tile_dpbf16ps(2, 0, 1);
        _tile_dpbf16ps(3, 0, 1);
        _tile_dpbf16ps(4, 0, 1);
        _tile_dpbf16ps(5, 0, 1);
        _tile_dpbf16ps(6, 0, 1);
        _tile_dpbf16ps(7, 0, 1);
    }
    _tile_stored(7, out, 64);
    _tile_release();
    return out[0];
}
#endif

int cli_ceiling_available(int which)
{
#if defined(CLI_X86)
    __builtin_cpu_init();
    switch (which) {
    case CLI_CEILING_FMA_YMM:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CLI_CEILING_FMA_ZMM: return __builtin_cpu_supports("avx512f");
    case CLI_CEILING_DPBF16: return __builtin_cpu_supports("avx512bf16");
    case CLI_CEILING_TDPBF16: return cli_has_amx_bf16();
    default: return 0;
    }
#else
    (void)which;
    return 0;
#endif
}

static float cli_ceiling_loop(int which, long iterations)
{
#if defined(CLI_X86)
    switch (which) {
    case CLI_CEILING_FMA_YMM: return cli_fma_ymm(iterations);
    case CLI_CEILING_FMA_ZMM: return cli_fma_zmm(iterations);
    case CLI_CEILING_TDPBF16: return cli_tdpbf16_tiles(iterations);
    default: return cli_dpbf16_zmm(iterations);
    }
#else
    (void)which;
    (void)iterations;
    return 0.0f;
#endif
}

typedef struct cli_ceiling_task {
    int which;
    long iterations;
    pthread_barrier_t *start;
    double seconds;
    volatile float sink;
} cli_ceiling_task;

static double cli_thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *cli_ceiling_thread(void *argument)
{
    cli_ceiling_task *task = argument;
    pthread_barrier_wait(task->start);
    double begin = cli_thread_seconds();
    task->sink = cli_ceiling_loop(task->which, task->iterations);
    task->seconds = cli_thread_seconds() - begin;
    return NULL;
}

/* GFLOP/s of `threads` threads running the loop at once: the sum of their
 * rates, each over its own CPU time. */
static double cli_ceiling_run(int which, int threads, long iterations)
{
    cli_ceiling_task tasks[CLI_CEILING_MAX_THREADS];
    pthread_t ids[CLI_CEILING_MAX_THREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    int started = 1;
    for (int t = 0; t < threads; t++) {
        tasks[t] = (cli_ceiling_task){ which, iterations, &start, 0.0, 0.0f };
        if (t > 0 && pthread_create(&ids[t], NULL, cli_ceiling_thread, &tasks[t]) == 0)
            started++;
    }
    if (started < threads) { /* could not start them all: a barrier would hang */
        pthread_barrier_destroy(&start);
        return -1.0;
    }
    cli_ceiling_thread(&tasks[0]);
    double rate = 0.0;
    for (int t = 0; t < threads; t++) {
        if (t > 0)
            pthread_join(ids[t], NULL);
        if (tasks[t].seconds > 0.0)
            rate += cli_ceiling_flops_per_iteration[which] * (double)iterations / tasks[t].seconds;
    }
    pthread_barrier_destroy(&start);
    return rate / 1e9;
}

static double cli_ceiling_best(int which, int threads)
{
    /* size the loop to about CLI_CEILING_SECONDS on one thread */
    long iterations = 1L << 16;
    double begin = cli_thread_seconds();
    volatile float sink = cli_ceiling_loop(which, iterations);
    (void)sink;
    double seconds = cli_thread_seconds() - begin;
    if (seconds > 0.0)
        iterations = (long)((double)iterations * CLI_CEILING_SECONDS / seconds) + 1;
    double best = -1.0;
    for (int trial = 0; trial < CLI_CEILING_TRIALS; trial++) {
        double rate = cli_ceiling_run(which, threads, iterations);
        if (rate > best)
            best = rate;
    }
    return best;
}

void cli_ceiling_measure(cli_ceiling *ceilings, int threads)
{
    if (threads < 1)
        threads = 1;
    if (threads > CLI_CEILING_MAX_THREADS)
        threads = CLI_CEILING_MAX_THREADS;
    for (int which = 0; which < CLI_CEILING_COUNT; which++) {
        cli_ceiling *c = &ceilings[which];
        memset(c, 0, sizeof *c);
        c->name = cli_ceiling_names[which];
        c->available = cli_ceiling_available(which);
        c->threads = threads;
        if (!c->available)
            continue;
        c->core_gflops = cli_ceiling_best(which, 1);
        c->all_gflops = threads > 1 ? cli_ceiling_best(which, threads) : c->core_gflops;
    }
}

int cli_cpu_kernel_ceiling(moeint4_dtype dtype, const char **table, int *passes)
{
    /* the library's rule (cpu_kernels_select): the best table the CPU runs,
     * capped by MOEINT4_CPU_KERNEL; the bf16 tables hand F16 and F32
     * activations to the AVX-512F one, except that the AMX table hands F16
     * to amx-f16 (two bf16 planes) where experts see 2+ rows
     * (cpu_kernels.h): the tile unit at half its rate bounds both from
     * above, as it outruns the f32 FMAs more than twice over */
    *passes = 1;
    const char *forced = getenv("MOEINT4_CPU_KERNEL");
    int cap = 4;
    if (forced != NULL && strcmp(forced, "scalar") == 0)
        cap = 0;
    else if (forced != NULL && strcmp(forced, "avx2") == 0)
        cap = 1;
    else if (forced != NULL && strcmp(forced, "avx512") == 0)
        cap = 2;
    else if (forced != NULL && strcmp(forced, "avx512bf16") == 0)
        cap = 3;
    int avx512 = 0, avx2 = 0;
#if defined(CLI_X86)
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    /* the bf16 table runs with or without VBMI2 (cpu_features.h): its
     * no-VBMI2 build has its own name */
    int bf16_table = avx512 && cli_ceiling_available(CLI_CEILING_DPBF16), vbmi2 = 0;
#if defined(CLI_X86)
    vbmi2 = __builtin_cpu_supports("avx512vbmi2");
#endif
    /* the AMX table runs on the VBMI2 bf16 build, and its jobs of few
     * tokens on that build's kernels: the tile unit's rate bounds both */
    if (cap >= 4 && bf16_table && vbmi2 && dtype != MOEINT4_DTYPE_F32 &&
        cli_ceiling_available(CLI_CEILING_TDPBF16)) {
        *table = dtype == MOEINT4_DTYPE_BF16 ? "amx" : "amx-f16 (2+ rows an expert; else avx512)";
        *passes = dtype == MOEINT4_DTYPE_BF16 ? 1 : 2;
        return CLI_CEILING_TDPBF16;
    }
    if (cap >= 3 && bf16_table && dtype == MOEINT4_DTYPE_BF16) {
        *table = vbmi2 ? "avx512bf16" : "avx512bf16-novbmi2";
        return CLI_CEILING_DPBF16;
    }
    if (cap >= 2 && avx512) {
        *table = cap >= 3 && bf16_table ? "avx512 (f16/f32 input)" : "avx512";
        return CLI_CEILING_FMA_ZMM;
    }
    if (cap >= 1 && avx2) {
        *table = "avx2";
        return CLI_CEILING_FMA_YMM;
    }
    /* compiled for the baseline ISA (SSE2 on x86-64): FMA ymm bounds it from above */
    *table = "scalar";
    return avx2 ? CLI_CEILING_FMA_YMM : -1;
}
