/* `moeint4 bench`: timed forwards per M against the floor and the OpenBLAS
 * baseline, both measured in the same run (bench/README.md says how). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "bench_baseline.h"
#include "bench_floor.h"
#include "bench_report.h"
#include "cli.h"
#include "cli_session.h"

#define CLI_BENCH_WARMUP 2

/* Everything one bench run holds. */
typedef struct cli_bench {
    cli_options options;
    cli_session session;
    cli_bench_run run;
    cli_floor floor;
    cli_baseline baseline;
    cli_flusher flusher;
    int host;            /* CPU-side backend: floors, baseline, cache flush */
    double expert_bytes; /* bytes a forward streams per expert hit */
    int failed_checks;
    int below_floor; /* ratios below 1: measurement errors, flagged */
    cli_bench_record records[CLI_MAX_TOKEN_LIST];
} cli_bench;

/* One progress line on stderr, rewritten in place on a terminal. */
static void cli_progress(int transient, const char *fmt, ...)
{
    static const char prefix[] = "moeint4 bench: ";
    int tty = isatty(fileno(stderr));
    if (transient && !tty)
        return;
    va_list list;
    va_start(list, fmt);
    fprintf(stderr, "%s%s", tty ? "\r\033[K" : "", prefix);
    vfprintf(stderr, fmt, list);
    fprintf(stderr, "%s", tty && transient ? "" : "\n");
    fflush(stderr);
    va_end(list);
}

/* The inputs of one M: one activation batch and warm-up + iters routings,
 * each drawn afresh so every forward hits other experts. */
typedef struct cli_bench_inputs {
    int count;
    void *hidden, *output, *baseline_output;
    int32_t *ids;
    float *router_weights;
    cli_buffer hidden_memory, output_memory;
    cli_buffer *ids_memory, *weights_memory;
} cli_bench_inputs;

static void cli_inputs_free(cli_bench *bench, cli_bench_inputs *in)
{
    cli_buffer_destroy(&bench->session, &in->hidden_memory);
    cli_buffer_destroy(&bench->session, &in->output_memory);
    for (int i = 0; i < in->count && in->ids_memory && in->weights_memory; i++) {
        cli_buffer_destroy(&bench->session, &in->ids_memory[i]);
        cli_buffer_destroy(&bench->session, &in->weights_memory[i]);
    }
    free(in->ids_memory);
    free(in->weights_memory);
    free(in->hidden);
    free(in->output);
    free(in->baseline_output);
    free(in->ids);
    free(in->router_weights);
    memset(in, 0, sizeof *in);
}

static int cli_inputs_create(cli_bench *bench, int64_t m, cli_bench_inputs *in)
{
    const cli_options *o = &bench->options;
    const size_t slots = (size_t)m * (size_t)o->preset->topk;
    const size_t values = (size_t)m * (size_t)o->preset->hidden_size;
    const size_t bytes = values * tk_dtype_size(o->dtype);
    memset(in, 0, sizeof *in);
    in->count = CLI_BENCH_WARMUP + o->iters;
    in->hidden = malloc(bytes);
    in->output = malloc(bytes);
    in->baseline_output = malloc(bytes);
    in->ids = malloc(slots * (size_t)in->count * sizeof *in->ids);
    in->router_weights = malloc(slots * (size_t)in->count * sizeof *in->router_weights);
    in->ids_memory = calloc((size_t)in->count, sizeof *in->ids_memory);
    in->weights_memory = calloc((size_t)in->count, sizeof *in->weights_memory);
    if (!in->hidden || !in->output || !in->baseline_output || !in->ids || !in->router_weights ||
        !in->ids_memory || !in->weights_memory) {
        fprintf(stderr, "moeint4 bench: out of memory for M=%lld\n", (long long)m);
        return CLI_EXIT_FAILURE;
    }
    tk_rng rng;
    tk_rng_seed(&rng, o->seed * 1000003u + (uint64_t)m);
    tk_fill_activations(&rng, o->dtype, values, 1.0, in->hidden);
    memset(in->output, 0xff, bytes); /* NaN poison: an unwritten row fails the check */
    if (cli_buffer_create(&bench->session, &in->hidden_memory, bytes, in->hidden) ||
        cli_buffer_create(&bench->session, &in->output_memory, bytes, in->output))
        return CLI_EXIT_FAILURE;
    for (int i = 0; i < in->count; i++) {
        int32_t *ids = in->ids + (size_t)i * slots;
        float *weights = in->router_weights + (size_t)i * slots;
        tk_route_random(&rng, m, o->preset->num_experts, o->preset->topk, ids, weights);
        if (cli_buffer_create(&bench->session, &in->ids_memory[i], slots * sizeof *ids, ids) ||
            cli_buffer_create(&bench->session, &in->weights_memory[i], slots * sizeof *weights,
                              weights))
            return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

static void cli_summarise(const double *seconds, int count, double *median, double *lo, double *hi)
{
    double sorted[4096];
    int n = count < 4096 ? count : 4096;
    memcpy(sorted, seconds, (size_t)n * sizeof *sorted);
    *median = 1e3 * cli_median(sorted, n);
    *lo = 1e3 * sorted[0];
    *hi = 1e3 * sorted[n - 1];
}

/* Times the library (which = 0) or the baseline (which = 1) over every
 * routing; the first CLI_BENCH_WARMUP are not counted. */
static int cli_time_forwards(cli_bench *bench, int which, int64_t m, cli_bench_inputs *in,
                             double *seconds)
{
    const size_t slots = (size_t)m * (size_t)bench->options.preset->topk;
    cli_progress(0, "M=%lld: timing %s (%d warm-up + %d forwards)", (long long)m,
                 which ? "the baseline" : "moeint4", CLI_BENCH_WARMUP, bench->options.iters);
    for (int i = 0; i < in->count; i++) {
        cli_progress(1, "M=%lld %s %s %d/%d", (long long)m, which ? "baseline" : "moeint4",
                     i < CLI_BENCH_WARMUP ? "warm-up" : "forward",
                     i < CLI_BENCH_WARMUP ? i + 1 : i - CLI_BENCH_WARMUP + 1,
                     i < CLI_BENCH_WARMUP ? CLI_BENCH_WARMUP : bench->options.iters);
        if (bench->host)
            cli_flusher_run(&bench->flusher);
        double start = cli_now();
        int status;
        if (which == 0)
            status = cli_forward(&bench->session, m, &in->hidden_memory, &in->ids_memory[i],
                                 &in->weights_memory[i], &in->output_memory);
        else
            status =
                cli_baseline_forward(&bench->baseline, m, in->hidden, in->ids + (size_t)i * slots,
                                     in->router_weights + (size_t)i * slots, in->baseline_output);
        double elapsed = cli_now() - start;
        if (status != CLI_EXIT_OK)
            return status;
        if (i >= CLI_BENCH_WARMUP)
            seconds[i - CLI_BENCH_WARMUP] = elapsed;
    }
    return CLI_EXIT_OK;
}

/* Baseline vs library, every value of the last forward. */
static double cli_baseline_agreement(const cli_bench *bench, int64_t m, const void *library,
                                     const void *baseline)
{
    const moeint4_dtype dtype = bench->options.dtype;
    const size_t values = (size_t)m * (size_t)bench->options.preset->hidden_size;
    double *want = malloc(values * sizeof *want);
    if (want == NULL)
        return NAN;
    for (size_t i = 0; i < values; i++)
        want[i] = tk_load(dtype, library, i);
    double error = tk_relative_l2(dtype, baseline, want, values);
    free(want);
    return error;
}

static void cli_fill_rates(cli_bench *bench, cli_bench_record *r, const cli_bench_inputs *in)
{
    const cli_options *o = &bench->options;
    const cli_preset *p = o->preset;
    const size_t slots = (size_t)r->tokens * (size_t)p->topk;
    double hit = 0.0;
    for (int i = CLI_BENCH_WARMUP; i < in->count; i++)
        hit += cli_distinct_experts(o, r->tokens, in->ids + (size_t)i * slots);
    r->experts_hit = hit / o->iters;
    r->weight_bytes = r->experts_hit * bench->expert_bytes;
    double flops =
        2.0 * (double)r->tokens * p->topk * 3.0 * p->intermediate_size * (double)p->hidden_size;
    r->gbps = r->weight_bytes / (r->median_ms * 1e-3) / 1e9;
    r->gflops = flops / (r->median_ms * 1e-3) / 1e9;
    r->floor_ms = r->ratio_to_floor = NAN;
    if (bench->host) {
        /* activations in and out count too (negligible next to the weights) */
        double activation_bytes =
            2.0 * (double)r->tokens * p->hidden_size * (double)tk_dtype_size(o->dtype) +
            (double)slots * 8.0;
        double memory_s =
            (r->weight_bytes + activation_bytes) / (bench->floor.bandwidth_gbps * 1e9);
        double compute_s =
            isfinite(bench->floor.peak_gflops) ? flops / (bench->floor.peak_gflops * 1e9) : 0.0;
        r->floor_ms = 1e3 * (memory_s > compute_s ? memory_s : compute_s);
        r->floor_bound = memory_s > compute_s ? "memory" : "compute";
        r->ratio_to_floor = r->median_ms / r->floor_ms;
        r->compute_fraction = compute_s > 0.0 ? 1e3 * compute_s / r->median_ms : NAN;
        r->below_floor = r->ratio_to_floor < 1.0;
    }
}

static int cli_bench_one(cli_bench *bench, int64_t m, cli_bench_record *r)
{
    cli_bench_inputs in;
    double seconds[4096];
    memset(r, 0, sizeof *r);
    r->tokens = m;
    r->baseline_ms = r->baseline_min_ms = r->baseline_max_ms = NAN;
    r->baseline_ratio_to_floor = r->speedup_vs_baseline = r->baseline_rel_err = NAN;
    r->baseline_ref_err = NAN;
    int status = cli_inputs_create(bench, m, &in);
    if (status == CLI_EXIT_OK)
        status = cli_time_forwards(bench, 0, m, &in, seconds);
    if (status == CLI_EXIT_OK)
        status = cli_buffer_fetch(&bench->session, &in.output_memory, in.output);
    if (status != CLI_EXIT_OK) {
        cli_inputs_free(bench, &in);
        return status;
    }
    cli_summarise(seconds, bench->options.iters, &r->median_ms, &r->min_ms, &r->max_ms);
    cli_fill_rates(bench, r, &in);

    const size_t last = (size_t)(in.count - 1) * (size_t)m * (size_t)bench->options.preset->topk;
    cli_progress(1, "M=%lld checking sampled rows against the reference", (long long)m);
    r->rel_err = cli_check_rows(&bench->session, m, in.hidden, in.ids + last,
                                in.router_weights + last, in.output);
    if (!(r->rel_err >= 0.0 && r->rel_err <= CLI_MAX_REL_ERROR))
        bench->failed_checks++;

    if (bench->host) {
        /* The library's idle workers may spin for a while after a forward
         * (MOEINT4_CPU_IDLE_MS): let them go to sleep before the baseline runs. */
        nanosleep(&(struct timespec){ .tv_sec = 0, .tv_nsec = 400000000L }, NULL);
        status = cli_time_forwards(bench, 1, m, &in, seconds);
        if (status == CLI_EXIT_OK) {
            cli_summarise(seconds, bench->options.iters, &r->baseline_ms, &r->baseline_min_ms,
                          &r->baseline_max_ms);
            r->baseline_ratio_to_floor = r->baseline_ms / r->floor_ms;
            r->below_floor |= r->baseline_ratio_to_floor < 1.0;
            r->speedup_vs_baseline = r->baseline_ms / r->median_ms;
            r->baseline_rel_err = cli_baseline_agreement(bench, m, in.output, in.baseline_output);
            r->baseline_ref_err = cli_check_rows(&bench->session, m, in.hidden, in.ids + last,
                                                 in.router_weights + last, in.baseline_output);
            if (!(r->baseline_rel_err <= CLI_MAX_REL_ERROR))
                bench->failed_checks++;
        }
    }
    cli_inputs_free(bench, &in);
    return status;
}

static void cli_print_header(const cli_bench *bench)
{
    const cli_options *o = &bench->options;
    const cli_preset *p = o->preset;
    printf("moeint4 bench: %s (E=%d topk=%d K=%d N=%d group %d), %s, %s, %s, backend %s, "
           "%d threads, commit %s, %s\n",
           p->name, p->num_experts, p->topk, p->hidden_size, p->intermediate_size, p->group_size,
           cli_format_name(o->format), cli_dtype_name(o->dtype), cli_activation_name(o->activation),
           bench->run.backend, bench->run.threads, cli_commit(), bench->run.date);
    printf("load average when the run began: %.2f (other work on the machine skews every "
           "figure below)\n",
           bench->run.load_average);
    if (bench->host) {
        const char *suggestion = cli_openblas_suggestion();
        printf("OpenBLAS kernels (baseline): %s%s%s%s\n", bench->run.openblas_core,
               suggestion ? " -- WARNING: pre-AVX2 kernels on a CPU with wider vectors: the "
                            "baseline is understated; rerun with OPENBLAS_CORETYPE="
                          : "",
               suggestion ? suggestion : "", suggestion ? " (bench/run_cpu.sh does)" : "");
        const cli_floor *f = &bench->floor;
        printf("floor memory term: read bandwidth %.2f GB/s (%d threads x %d streams, prefetch "
               "%d bytes ahead, fastest round; one thread %.2f GB/s; %.0f MiB array)\n",
               f->bandwidth_gbps, f->bandwidth_threads, f->bandwidth_streams, f->bandwidth_prefetch,
               f->core_bandwidth_gbps, f->bandwidth_bytes / 1048576.0);
        printf("compute ceilings (register-only loops, GFLOP/s per core / all %d cores):",
               f->ceilings[0].threads);
        for (int i = 0; i < CLI_CEILING_COUNT; i++) {
            if (f->ceilings[i].available)
                printf(" %s %.1f / %.1f;", f->ceilings[i].name, f->ceilings[i].core_gflops,
                       f->ceilings[i].all_gflops);
            else
                printf(" %s not on this CPU;", f->ceilings[i].name);
        }
        printf("\nfloor compute term: kernel table %s, bounded by %s%s (%.1f GFLOP/s all cores)\n",
               f->kernel_table,
               f->kernel_ceiling >= 0 ? f->ceilings[f->kernel_ceiling].name : "none",
               f->kernel_passes == 2 ? " at half rate (two bf16 planes)" : "", f->peak_gflops);
    }
    printf("caches: %s\n", bench->run.cache_policy);
    printf("%6s %10s %9s %9s %9s %7s %8s %8s %11s %7s %7s %9s %9s %9s\n", "M", "median_ms",
           "min_ms", "max_ms", "floor_ms", "xfloor", "GB/s", "GFLOP/s", "baseline_ms", "xfloor",
           "speedup", "err_ref", "err_base", "base_ref");
    fflush(stdout);
}

static void cli_print_record(const cli_bench_record *r)
{
    printf(
        "%6lld %10.3f %9.3f %9.3f %9.3f %7.2f %8.2f %8.1f %11.3f %7.2f %7.2f %9.2e %9.2e %9.2e\n",
        (long long)r->tokens, r->median_ms, r->min_ms, r->max_ms, r->floor_ms, r->ratio_to_floor,
        r->gbps, r->gflops, r->baseline_ms, r->baseline_ratio_to_floor, r->speedup_vs_baseline,
        r->rel_err, r->baseline_rel_err, r->baseline_ref_err);
    if (r->below_floor)
        printf("       ^ MEASUREMENT ERROR: a time below its floor (x floor < 1) means the floor "
               "was measured too low (other work on the machine?); do not read this row\n");
    fflush(stdout);
}

/* Floors, baseline and flush buffer: host backends only. */
static int cli_bench_prepare_host(cli_bench *bench)
{
    const int cores = cli_online_cores();
    cli_progress(0, "measuring the floor: read bandwidth and compute ceilings on %d cores", cores);
    if (cli_floor_measure(&bench->floor, cores, bench->options.dtype) != 0) {
        fprintf(stderr, "moeint4 bench: out of memory measuring the floor\n");
        return CLI_EXIT_FAILURE;
    }
    bench->run.bandwidth_gbps = bench->floor.bandwidth_gbps;
    bench->run.peak_gflops = bench->floor.peak_gflops;
    bench->run.floor = &bench->floor;
    cli_progress(0, "dequantizing the weights to f32 for the baseline");
    if (cli_baseline_create(&bench->baseline, &bench->session) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    if (cli_flusher_create(&bench->flusher, cores) != 0) {
        fprintf(stderr, "moeint4 bench: out of memory for the cache flush buffer\n");
        return CLI_EXIT_FAILURE;
    }
    snprintf(bench->run.cache_policy, sizeof bench->run.cache_policy,
             "routing re-drawn every forward; %.0f MiB (2x last-level cache) read by all cores "
             "before every timed forward, outside the timing",
             (double)(bench->flusher.words * sizeof(uint64_t)) / 1048576.0);
    /* the baseline runs on as many threads as the library */
    openblas_set_num_threads(bench->run.threads);
    return CLI_EXIT_OK;
}

static void cli_utc_date(char *buffer, size_t capacity)
{
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(buffer, capacity, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

static int cli_bench_execute(cli_bench *bench)
{
    cli_options *o = &bench->options;
    bench->run.options = o;
    bench->run.threads = o->threads > 0 ? o->threads : cli_online_cores();
    bench->run.warmup = CLI_BENCH_WARMUP;
    bench->run.openblas_core = cli_openblas_core();
    bench->run.bandwidth_gbps = bench->run.peak_gflops = NAN;
    cli_utc_date(bench->run.date, sizeof bench->run.date);
    /* other work on the machine skews the floor and the times: record it */
    if (getloadavg(&bench->run.load_average, 1) != 1)
        bench->run.load_average = NAN;
    cli_progress(0, "building and preparing the synthetic %s layer (%s)", o->preset->name,
                 cli_format_name(o->format));
    int status = cli_session_open(&bench->session, o, bench->run.threads);
    if (status != CLI_EXIT_OK)
        return status;
    bench->run.backend = bench->session.backend.name;
    bench->run.device_pointers = bench->session.backend.device_pointers;
    bench->run.prepare_ms = 1e3 * bench->session.prepare_seconds;
    bench->host = !bench->session.backend.device_pointers;
    /* A device backend's prepared experts may be larger than the int4
     * checkpoint (HIP keeps BF16: 4x): count what its forward streams. */
    bench->expert_bytes = cli_expert_bytes(o);
    size_t device_bytes = 0;
    if (!bench->host &&
        moeint4_weights_memory(bench->session.weights, NULL, &device_bytes) == MOEINT4_SUCCESS &&
        device_bytes > 0)
        bench->expert_bytes = (double)device_bytes / o->preset->num_experts;
    if (bench->host) {
        status = cli_bench_prepare_host(bench);
        if (status != CLI_EXIT_OK)
            return status;
    } else {
        snprintf(bench->run.cache_policy, sizeof bench->run.cache_policy,
                 "routing re-drawn every forward; device backend: wall clock around forward, "
                 "no CPU floor or baseline");
    }
    cli_print_header(bench);
    for (int i = 0; i < o->num_token_counts; i++) {
        status = cli_bench_one(bench, o->tokens[i], &bench->records[i]);
        if (status != CLI_EXIT_OK)
            return status;
        cli_progress(1, "M=%lld done", (long long)o->tokens[i]);
        if (isatty(fileno(stderr)))
            fprintf(stderr, "\r\033[K");
        cli_print_record(&bench->records[i]);
        bench->below_floor += bench->records[i].below_floor;
    }
    if (bench->below_floor > 0)
        printf("moeint4 bench: %d row(s) ran below their floor: measurement errors (marked "
               "below_floor in the JSON), not speed\n",
               bench->below_floor);
    int count = o->num_token_counts;
    if (o->json_path != NULL)
        status = cli_bench_write_json(o->json_path, &bench->run, bench->records, count);
    if (o->plot_path != NULL &&
        cli_bench_plot(o->plot_path, &bench->run, bench->records, count) != CLI_EXIT_OK)
        status = CLI_EXIT_FAILURE;
    if (bench->failed_checks > 0) {
        fprintf(stderr,
                "moeint4 bench: %d accuracy check(s) above %.0e (err_ref: library vs "
                "reference, err_base: baseline vs library)\n",
                bench->failed_checks, CLI_MAX_REL_ERROR);
        status = CLI_EXIT_FAILURE;
    }
    return status;
}

int cli_bench_main(int argc, char **argv)
{
    cli_bench *bench = calloc(1, sizeof *bench);
    if (bench == NULL) {
        fprintf(stderr, "moeint4 bench: out of memory\n");
        return CLI_EXIT_FAILURE;
    }
    int status = cli_parse_options("bench",
                                   CLI_FLAG_PRESET | CLI_FLAG_FORMAT | CLI_FLAG_TOKEN_LIST |
                                       CLI_FLAG_BACKEND | CLI_FLAG_ACTIVATION | CLI_FLAG_DTYPE |
                                       CLI_FLAG_SEED | CLI_FLAG_ITERS | CLI_FLAG_THREADS |
                                       CLI_FLAG_JSON | CLI_FLAG_PLOT | CLI_FLAG_CHECKPOINT |
                                       CLI_FLAG_LAYER | CLI_FLAG_GPU_WEIGHTS,
                                   argc, argv, &bench->options);
    if (status == CLI_EXIT_OK && bench->options.checkpoint_path) {
        status = cli_checkpoint_bench_main(&bench->options);
        free(bench);
        return status;
    }
    if (status == CLI_EXIT_OK && bench->options.iters < 7)
        fprintf(stderr,
                "moeint4 bench: note: %d timed forwards per M; a median and spread want at "
                "least 7\n",
                bench->options.iters);
    if (status == CLI_EXIT_OK)
        status = cli_bench_execute(bench);
    cli_flusher_destroy(&bench->flusher);
    if (bench->baseline.session != NULL)
        cli_baseline_destroy(&bench->baseline);
    cli_session_close(&bench->session);
    free(bench);
    return status;
}
