/* The CPU backend's forward pass alone (internal API, no core validation):
 * median wall time per M for a preset-sized layer, with the routing re-drawn
 * and the caches flushed (a read of 2x the last-level cache) before every
 * timed forward, on the selected kernel table (MOEINT4_CPU_KERNEL caps it;
 * BF16 activations). Also reports the wall time of the all-thread CPU
 * time, so a shared machine's stolen time shows,
 * the page faults per forward (fresh scratch memory shows as faults) and the
 * CPU time the process burns in a 2 ms gap after each forward (idle
 * workers spinning between decode steps before they sleep).
 * Usage: bench_cpu_forward [qwen|mixtral|tiny] [M,...] [threads] [iters] */
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu_internal.h"
#include "synth.h"

static double now_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    const char *preset = argc > 1 ? argv[1] : "qwen";
    int e = 128, topk = 8, k = 2048, n = 768;
    if (strcmp(preset, "mixtral") == 0) {
        e = 8;
        topk = 2;
        k = 4096;
        n = 14336;
    } else if (strcmp(preset, "tiny") == 0) {
        e = 8;
        topk = 2;
        k = 256;
        n = 128;
    }
    int token_list[16], num_m = 0;
    char *list = strdup(argc > 2 ? argv[2] : "1,8,64,512");
    for (char *tok = strtok(list, ","); tok && num_m < 16; tok = strtok(NULL, ","))
        token_list[num_m++] = atoi(tok);
    int threads = argc > 3 ? atoi(argv[3]) : 0;
    int iters = argc > 4 ? atoi(argv[4]) : 9;
    moeint4_format format = MOEINT4_FORMAT_GPTQ_SYM;
    const char *env_format = getenv("BENCH_FORMAT");
    if (env_format && strcmp(env_format, "asym") == 0)
        format = MOEINT4_FORMAT_GPTQ_ASYM;
    if (env_format && strcmp(env_format, "awq") == 0)
        format = MOEINT4_FORMAT_AWQ;

    tk_rng rng;
    tk_rng_seed(&rng, 7);
    tk_layer layer;
    if (tk_layer_random(&layer, format, 0, e, k, n, 128, MOEINT4_DTYPE_F16, 0, &rng) != 0) {
        fprintf(stderr, "cannot build the layer\n");
        return 1;
    }
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t flush_words = (size_t)(l3 > 0 ? l3 : 32 << 20) * 2 / sizeof(uint64_t);
    uint64_t *flush = malloc(flush_words * sizeof *flush);
    for (size_t i = 0; i < flush_words; i++)
        flush[i] = i;
    volatile uint64_t sink = 0;

    const mi4_cpu_kernels *kernels = mi4_cpu_kernels_select();
    mi4_cpu_context *ctx;
    if (mi4_cpu_context_create_with(threads, kernels, &ctx) != MOEINT4_SUCCESS)
        return 1;
    mi4_cpu_weights *w;
    char err[256];
    double t0 = now_s(CLOCK_MONOTONIC);
    if (mi4_cpu_weights_prepare(ctx, &desc, &w, err, sizeof err) != MOEINT4_SUCCESS)
        return 1;
    printf("%s: %s format %d, prepare %.2f s, %d threads\n", kernels->name, preset, format,
           now_s(CLOCK_MONOTONIC) - t0, ctx->num_threads);
    size_t tile_bytes_per_expert = w->w13_expert_bytes + w->w2_expert_bytes;
    for (int mi = 0; mi < num_m; mi++) {
        int m = token_list[mi];
        uint16_t *x = malloc(sizeof(uint16_t) * (size_t)m * k);
        uint16_t *out = malloc(sizeof(uint16_t) * (size_t)m * k);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)m * topk);
        float *wts = malloc(sizeof(float) * (size_t)m * topk);
        tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, (size_t)m * k, 1.0, x);
        moeint4_forward_args a =
            tk_forward_args(MOEINT4_DTYPE_BF16, m, topk, x, ids, wts, out, NULL);
        double times[64], cpu[64], bytes = 0, gap_cpu = 0.0;
        long faults = 0;
        for (int it = -1; it < iters && it < 64; it++) {
            tk_route_random(&rng, m, e, topk, ids, wts);
            char hit[1024] = { 0 };
            int distinct = 0;
            for (int s = 0; s < m * topk; s++)
                if (!hit[ids[s]]) {
                    hit[ids[s]] = 1;
                    distinct++;
                }
            uint64_t acc = 0;
            for (size_t i = 0; i < flush_words; i += 8)
                acc += flush[i];
            sink += acc;
            struct rusage u0, u1;
            getrusage(RUSAGE_SELF, &u0);
            double c0 = now_s(CLOCK_PROCESS_CPUTIME_ID), w0 = now_s(CLOCK_MONOTONIC);
            mi4_cpu_forward_with(ctx, kernels, w, &a, err, sizeof err);
            double w1 = now_s(CLOCK_MONOTONIC), c1 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            getrusage(RUSAGE_SELF, &u1);
            nanosleep(&(struct timespec){ 0, 2000000 }, NULL);
            double c2 = now_s(CLOCK_PROCESS_CPUTIME_ID);
            if (it >= 0) {
                faults += u1.ru_minflt - u0.ru_minflt;
                gap_cpu += c2 - c1;
                times[it] = w1 - w0;
                cpu[it] = c1 - c0;
                bytes = (double)distinct * tile_bytes_per_expert;
            }
        }
        qsort(times, (size_t)iters, sizeof(double), compare_doubles);
        qsort(cpu, (size_t)iters, sizeof(double), compare_doubles);
        double med = times[iters / 2];
        printf("M=%4d median %8.3f ms  min %8.3f  max %8.3f  cpu %8.3f ms  faults %5.1f  "
               "gap cpu %5.2f ms/2 ms  %6.2f GB/s  %7.1f GFLOP/s\n",
               m, med * 1e3, times[0] * 1e3, times[iters - 1] * 1e3, cpu[iters / 2] * 1e3,
               (double)faults / iters, gap_cpu / iters * 1e3, bytes / med * 1e-9,
               2.0 * m * topk * 3.0 * n * k / med * 1e-9);
        free(x);
        free(out);
        free(ids);
        free(wts);
    }
    mi4_cpu_weights_release(w);
    mi4_cpu_context_destroy(ctx);
    free(flush);
    free(list);
    tk_layer_free(&layer);
    return 0;
}
