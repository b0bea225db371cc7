/* JSON records and the gnuplot figure of the bench. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_report.h"

static void cli_json_number(FILE *file, const char *key, double value, int last)
{
    if (isfinite(value))
        fprintf(file, "    \"%s\": %.10g%s\n", key, value, last ? "" : ",");
    else
        fprintf(file, "    \"%s\": null%s\n", key, last ? "" : ",");
}

/* Our strings are names and dates; escape what JSON needs anyway. */
static void cli_json_string(FILE *file, const char *key, const char *value)
{
    fprintf(file, "    \"%s\": \"", key);
    for (const char *c = value; *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(file, "\\%c", *c);
        else if ((unsigned char)*c < 0x20)
            fprintf(file, "\\u%04x", (unsigned)(unsigned char)*c);
        else
            fputc(*c, file);
    }
    fprintf(file, "\",\n");
}

static void cli_json_record(FILE *file, const cli_bench_run *run, const cli_bench_record *r)
{
    const cli_options *o = run->options;
    const cli_preset *p = o->preset;
    fprintf(file, "  {\n");
    cli_json_string(file, "preset", p->name);
    cli_json_string(file, "format", cli_format_name(o->format));
    cli_json_string(file, "backend", run->backend);
    cli_json_string(file, "gpu_weights", cli_gpu_weights_name(o->gpu_weights));
    cli_json_number(file, "M", (double)r->tokens, 0);
    cli_json_number(file, "num_experts", p->num_experts, 0);
    cli_json_number(file, "topk", p->topk, 0);
    cli_json_number(file, "hidden_size", p->hidden_size, 0);
    cli_json_number(file, "intermediate_size", p->intermediate_size, 0);
    cli_json_number(file, "group_size", p->group_size, 0);
    cli_json_string(file, "dtype", cli_dtype_name(o->dtype));
    cli_json_string(file, "activation", cli_activation_name(o->activation));
    cli_json_number(file, "iters", o->iters, 0);
    cli_json_number(file, "warmup", run->warmup, 0);
    cli_json_number(file, "median_ms", r->median_ms, 0);
    cli_json_number(file, "min_ms", r->min_ms, 0);
    cli_json_number(file, "max_ms", r->max_ms, 0);
    cli_json_number(file, "floor_ms", r->floor_ms, 0);
    cli_json_number(file, "ratio_to_floor", r->ratio_to_floor, 0);
    if (r->floor_bound != NULL)
        cli_json_string(file, "floor_bound", r->floor_bound);
    else
        fprintf(file, "    \"floor_bound\": null,\n");
    cli_json_number(file, "baseline_ms", r->baseline_ms, 0);
    cli_json_number(file, "baseline_min_ms", r->baseline_min_ms, 0);
    cli_json_number(file, "baseline_max_ms", r->baseline_max_ms, 0);
    cli_json_number(file, "baseline_ratio_to_floor", r->baseline_ratio_to_floor, 0);
    cli_json_number(file, "speedup_vs_baseline", r->speedup_vs_baseline, 0);
    cli_json_number(file, "gbps", r->gbps, 0);
    cli_json_number(file, "gflops", r->gflops, 0);
    cli_json_number(file, "weight_bytes", r->weight_bytes, 0);
    cli_json_number(file, "experts_hit", r->experts_hit, 0);
    cli_json_number(file, "rel_err", r->rel_err, 0);
    cli_json_number(file, "baseline_rel_err", r->baseline_rel_err, 0);
    cli_json_number(file, "baseline_ref_err", r->baseline_ref_err, 0);
    cli_json_number(file, "compute_fraction", r->compute_fraction, 0);
    fprintf(file, "    \"below_floor\": %s,\n", r->below_floor ? "true" : "false");
    cli_json_number(file, "bandwidth_gbps", run->bandwidth_gbps, 0);
    cli_json_number(file, "peak_gflops", run->peak_gflops, 0);
    if (run->floor != NULL) {
        const cli_floor *f = run->floor;
        cli_json_number(file, "bandwidth_streams", f->bandwidth_streams, 0);
        cli_json_number(file, "bandwidth_prefetch_bytes", f->bandwidth_prefetch, 0);
        cli_json_number(file, "core_bandwidth_gbps", f->core_bandwidth_gbps, 0);
        cli_json_string(file, "kernel_table", f->kernel_table);
        cli_json_string(file, "compute_ceiling",
                        f->kernel_ceiling >= 0 ? f->ceilings[f->kernel_ceiling].name : "none");
        /* peak_gflops is the ceiling's all-core rate over this */
        cli_json_number(file, "compute_ceiling_passes", f->kernel_passes, 0);
        fprintf(file, "    \"ceilings\": {");
        for (int i = 0; i < CLI_CEILING_COUNT; i++) {
            fprintf(file, "%s\"%s\": ", i ? ", " : "", f->ceilings[i].name);
            if (f->ceilings[i].available)
                fprintf(file, "{\"core_gflops\": %.1f, \"all_gflops\": %.1f}",
                        f->ceilings[i].core_gflops, f->ceilings[i].all_gflops);
            else
                fprintf(file, "null");
        }
        fprintf(file, "},\n");
    }
    cli_json_number(file, "prepare_ms", run->prepare_ms, 0);
    cli_json_number(file, "load_average", run->load_average, 0);
    cli_json_number(file, "threads", run->threads, 0);
    cli_json_number(file, "device_pointers", run->device_pointers, 0);
    cli_json_string(file, "cache_policy", run->cache_policy);
    cli_json_string(file, "openblas_core", run->openblas_core);
    cli_json_string(file, "date", run->date);
    fprintf(file, "    \"commit\": \"%s\"\n  }", cli_commit());
}

int cli_bench_write_json(const char *path, const cli_bench_run *run,
                         const cli_bench_record *records, int count)
{
    FILE *file = fopen(path, "w");
    if (file == NULL) {
        fprintf(stderr, "moeint4 bench: cannot write --json file '%s'\n", path);
        return CLI_EXIT_FAILURE;
    }
    fprintf(file, "[\n");
    for (int i = 0; i < count; i++) {
        cli_json_record(file, run, &records[i]);
        fprintf(file, "%s\n", i + 1 < count ? "," : "");
    }
    fprintf(file, "]\n");
    if (fclose(file) != 0) {
        fprintf(stderr, "moeint4 bench: error writing '%s'\n", path);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

static int cli_on_path(const char *program)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        return 0;
    char folder[4096];
    while (*path) {
        size_t length = strcspn(path, ":");
        if (length > 0 && length + strlen(program) + 2 < sizeof folder) {
            memcpy(folder, path, length);
            snprintf(folder + length, sizeof folder - length, "/%s", program);
            if (access(folder, X_OK) == 0)
                return 1;
        }
        path += length;
        if (*path == ':')
            path++;
    }
    return 0;
}

static void cli_plot_script(FILE *gp, const char *path, const cli_bench_run *run,
                            const cli_bench_record *records, int count, int has_floor,
                            int has_baseline)
{
    const cli_options *o = run->options;
    fprintf(gp, "set terminal pngcairo size 960,600 noenhanced\n");
    fprintf(gp, "set output '%s'\n", path);
    fprintf(gp, "set title 'moeint4 %s, %s, %s, %d threads, commit %s'\n", o->preset->name,
            cli_format_name(o->format), run->backend, run->threads, cli_commit());
    fprintf(
        gp,
        "set logscale x 2\nset xlabel 'tokens M'\nset grid\nset key bmargin center horizontal\n");
    fprintf(gp, "set ylabel '%s'\n", has_floor ? "time / floor" : "median time (ms)");
    fprintf(gp, "set logscale y\n"); /* ratios and times span decades */
    fprintf(gp, "$results << EOD\n");
    for (int i = 0; i < count; i++) {
        const cli_bench_record *r = &records[i];
        fprintf(gp, "%lld %.6g %.6g\n", (long long)r->tokens,
                has_floor ? r->ratio_to_floor : r->median_ms,
                has_baseline ? r->baseline_ratio_to_floor : 0.0);
    }
    fprintf(gp, "EOD\n");
    fprintf(gp, "plot $results using 1:2 with linespoints lw 2 title 'moeint4 %s'", run->backend);
    if (has_baseline)
        fprintf(gp, ", $results using 1:3 with linespoints lw 2 "
                    "title 'baseline: f32 weights + OpenBLAS sgemm'");
    if (has_floor)
        fprintf(gp, ", 1 with lines dt 2 lc rgb 'black' title 'floor'");
    fprintf(gp, "\n");
}

int cli_bench_plot(const char *path, const cli_bench_run *run, const cli_bench_record *records,
                   int count)
{
    if (strchr(path, '\'') != NULL || strchr(path, '\n') != NULL) {
        fprintf(stderr, "moeint4 bench: --plot path must not contain quotes or newlines\n");
        return CLI_EXIT_FAILURE;
    }
    if (!cli_on_path("gnuplot")) {
        fprintf(stderr, "moeint4 bench: gnuplot not found on PATH, no plot written "
                        "(Debian: apt-get install gnuplot-nox)\n");
        return CLI_EXIT_FAILURE;
    }
    int has_floor = count > 0 && isfinite(records[0].ratio_to_floor);
    int has_baseline = has_floor && isfinite(records[0].baseline_ratio_to_floor);
    void (*previous)(int) = signal(SIGPIPE, SIG_IGN); /* gnuplot may exit early */
    FILE *gp = popen("gnuplot", "w");
    if (gp == NULL) {
        signal(SIGPIPE, previous);
        fprintf(stderr, "moeint4 bench: could not start gnuplot\n");
        return CLI_EXIT_FAILURE;
    }
    cli_plot_script(gp, path, run, records, count, has_floor, has_baseline);
    int status = pclose(gp);
    signal(SIGPIPE, previous);
    if (status != 0) {
        fprintf(stderr, "moeint4 bench: gnuplot failed (status %d); plot '%s' not written\n",
                status, path);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}
