/* `moeint4 run`: one synthetic layer, one routed batch, checked against the
 * double-precision reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_session.h"

#define CLI_RUN_TIMED_FORWARDS 3

typedef struct cli_run_data {
    void *hidden;
    int32_t *ids;
    float *router_weights;
    void *output;
    cli_buffer hidden_memory, ids_memory, weights_memory, output_memory;
} cli_run_data;

static void cli_run_data_free(cli_session *session, cli_run_data *data)
{
    cli_buffer_destroy(session, &data->hidden_memory);
    cli_buffer_destroy(session, &data->ids_memory);
    cli_buffer_destroy(session, &data->weights_memory);
    cli_buffer_destroy(session, &data->output_memory);
    free(data->hidden);
    free(data->ids);
    free(data->router_weights);
    free(data->output);
}

/* Random activations and routing on the host, copied to forward memory; the
 * output is poisoned with NaN bit patterns so an unwritten element fails. */
static int cli_run_data_create(cli_session *session, int64_t num_tokens, cli_run_data *data)
{
    const cli_options *options = session->options;
    const size_t slots = (size_t)num_tokens * (size_t)options->preset->topk;
    const size_t values = (size_t)num_tokens * (size_t)options->preset->hidden_size;
    const size_t bytes = values * tk_dtype_size(options->dtype);
    memset(data, 0, sizeof *data);
    data->hidden = malloc(bytes);
    data->output = malloc(bytes);
    data->ids = malloc(slots * sizeof *data->ids);
    data->router_weights = malloc(slots * sizeof *data->router_weights);
    if (!data->hidden || !data->output || !data->ids || !data->router_weights) {
        fprintf(stderr, "moeint4: out of memory for %lld tokens\n", (long long)num_tokens);
        return CLI_EXIT_FAILURE;
    }
    tk_rng rng;
    tk_rng_seed(&rng, options->seed * 7919u + 17u);
    tk_fill_activations(&rng, options->dtype, values, 1.0, data->hidden);
    tk_route_random(&rng, num_tokens, options->preset->num_experts, options->preset->topk,
                    data->ids, data->router_weights);
    memset(data->output, 0xff, bytes);
    if (cli_buffer_create(session, &data->hidden_memory, bytes, data->hidden) ||
        cli_buffer_create(session, &data->ids_memory, slots * sizeof *data->ids, data->ids) ||
        cli_buffer_create(session, &data->weights_memory, slots * sizeof *data->router_weights,
                          data->router_weights) ||
        cli_buffer_create(session, &data->output_memory, bytes, data->output))
        return CLI_EXIT_FAILURE;
    return CLI_EXIT_OK;
}

static void cli_run_print_header(const cli_session *session, int64_t num_tokens)
{
    const cli_options *o = session->options;
    const cli_preset *p = o->preset;
    size_t host_bytes = 0, device_bytes = 0;
    moeint4_weights_memory(session->weights, &host_bytes, &device_bytes);
    printf("problem: %s (E=%d topk=%d K=%d N=%d group %d), %s, M=%lld, %s, %s, seed %llu\n",
           p->name, p->num_experts, p->topk, p->hidden_size, p->intermediate_size, p->group_size,
           cli_format_name(o->format), (long long)num_tokens, cli_dtype_name(o->dtype),
           cli_activation_name(o->activation), (unsigned long long)o->seed);
    printf("backend: %s (%s pointers)\n", session->backend.name,
           session->backend.device_pointers ? "device" : "host");
    printf("synthetic checkpoint: %.2f s to generate and pack\n", session->build_seconds);
    printf("prepare: %.2f ms (prepared weights hold %.1f MB host, %.1f MB device)\n",
           1e3 * session->prepare_seconds, host_bytes / 1e6, device_bytes / 1e6);
}

int cli_run_main(int argc, char **argv)
{
    cli_options options;
    int status = cli_parse_options("run",
                                   CLI_FLAG_PRESET | CLI_FLAG_FORMAT | CLI_FLAG_TOKENS |
                                       CLI_FLAG_BACKEND | CLI_FLAG_ACTIVATION | CLI_FLAG_DTYPE |
                                       CLI_FLAG_SEED | CLI_FLAG_THREADS | CLI_FLAG_CHECKPOINT |
                                       CLI_FLAG_LAYER | CLI_FLAG_GPU_WEIGHTS,
                                   argc, argv, &options);
    if (status != CLI_EXIT_OK)
        return status;
    if (options.checkpoint_path)
        return cli_checkpoint_run_main(&options);
    const int64_t num_tokens = options.tokens[0];

    cli_session session;
    cli_run_data data;
    memset(&data, 0, sizeof data);
    status = cli_session_open(&session, &options, options.threads);
    if (status == CLI_EXIT_OK)
        status = cli_run_data_create(&session, num_tokens, &data);
    if (status != CLI_EXIT_OK) {
        cli_run_data_free(&session, &data);
        cli_session_close(&session);
        return status;
    }
    cli_run_print_header(&session, num_tokens);

    double first = 0.0, timed[CLI_RUN_TIMED_FORWARDS];
    for (int i = 0; i <= CLI_RUN_TIMED_FORWARDS && status == CLI_EXIT_OK; i++) {
        double start = cli_now();
        status = cli_forward(&session, num_tokens, &data.hidden_memory, &data.ids_memory,
                             &data.weights_memory, &data.output_memory);
        double seconds = cli_now() - start;
        if (i == 0)
            first = seconds;
        else
            timed[i - 1] = seconds;
    }
    if (status == CLI_EXIT_OK)
        status = cli_buffer_fetch(&session, &data.output_memory, data.output);
    if (status == CLI_EXIT_OK) {
        double best = timed[0];
        for (int i = 1; i < CLI_RUN_TIMED_FORWARDS; i++)
            best = timed[i] < best ? timed[i] : best;
        printf("forward: first %.3f ms, then median %.3f ms, min %.3f ms (%d calls)\n", 1e3 * first,
               1e3 * cli_median(timed, CLI_RUN_TIMED_FORWARDS), 1e3 * best, CLI_RUN_TIMED_FORWARDS);
        double error = cli_check_rows(&session, num_tokens, data.hidden, data.ids,
                                      data.router_weights, data.output);
        int rows = num_tokens < CLI_SAMPLE_ROWS ? (int)num_tokens : CLI_SAMPLE_ROWS;
        if (error < 0.0) {
            fprintf(stderr, "moeint4: out of memory for the reference check\n");
            status = CLI_EXIT_FAILURE;
        } else if (!(error <= CLI_MAX_REL_ERROR)) {
            printf("check: rel-L2 error %.3e over %d sampled rows: FAILED (limit %.0e)\n", error,
                   rows, CLI_MAX_REL_ERROR);
            status = CLI_EXIT_FAILURE;
        } else {
            printf("check: rel-L2 error %.3e over %d sampled rows: ok (limit %.0e)\n", error, rows,
                   CLI_MAX_REL_ERROR);
        }
    }
    cli_run_data_free(&session, &data);
    cli_session_close(&session);
    return status;
}
