/* A synthetic layer on a backend, reached only through the public ABI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_session.h"

void cli_print_failure(const char *what, moeint4_status status)
{
    fprintf(stderr, "moeint4: %s failed: %s: %s\n", what, moeint4_status_string(status),
            moeint4_last_error());
}

static tk_activation cli_activation_params(const cli_options *options)
{
    tk_activation activation;
    memset(&activation, 0, sizeof activation);
    activation.kind = options->activation;
    if (options->activation == MOEINT4_ACTIVATION_SWIGLU_CLAMP) {
        /* GPT-OSS's values */
        activation.limit = 7.0;
        activation.alpha = 1.702;
        activation.beta = 1.0;
    }
    return activation;
}

int cli_session_open(cli_session *session, const cli_options *options, int threads)
{
    memset(session, 0, sizeof *session);
    session->options = options;
    session->activation = cli_activation_params(options);
    const cli_preset *preset = options->preset;

    moeint4_problem problem = cli_problem(options);
    moeint4_backend chosen = MOEINT4_BACKEND_AUTO;
    moeint4_status status = moeint4_oracle_select(&problem, options->backend, 0, &chosen);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("choosing a backend", status);
        return CLI_EXIT_FAILURE;
    }
    session->backend.struct_size = sizeof session->backend;
    status = moeint4_backend_query(chosen, &session->backend);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_backend_query", status);
        return CLI_EXIT_FAILURE;
    }

    /* Forced to the oracle's choice so the memory helpers and the weights
     * use the same backend. */
    moeint4_context_options context_options;
    memset(&context_options, 0, sizeof context_options);
    context_options.struct_size = sizeof context_options;
    context_options.backend = chosen;
    context_options.num_threads = threads;
    context_options.gpu_weights = options->gpu_weights;
    status = moeint4_context_create(&context_options, &session->ctx);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_context_create", status);
        return CLI_EXIT_FAILURE;
    }

    tk_rng rng;
    tk_rng_seed(&rng, options->seed);
    double start = cli_now();
    if (tk_layer_random(&session->layer, options->format, 0, preset->num_experts,
                        preset->hidden_size, preset->intermediate_size, preset->group_size,
                        MOEINT4_DTYPE_F16, 0, &rng) != 0) {
        fprintf(stderr, "moeint4: out of memory building the synthetic %s layer\n", preset->name);
        return CLI_EXIT_FAILURE;
    }
    session->has_layer = 1;
    session->build_seconds = cli_now() - start;

    moeint4_weights_desc desc = tk_layer_desc(&session->layer);
    start = cli_now();
    status = moeint4_weights_prepare(session->ctx, &desc, &session->weights);
    session->prepare_seconds = cli_now() - start;
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_weights_prepare", status);
        return CLI_EXIT_FAILURE;
    }
    moeint4_backend served = chosen;
    status = moeint4_weights_backend(session->weights, &served);
    if (status == MOEINT4_SUCCESS && served != chosen) {
        fprintf(stderr, "moeint4: weights went to backend %d, not the oracle's %d\n", (int)served,
                (int)chosen);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

void cli_session_close(cli_session *session)
{
    moeint4_weights_release(session->weights);
    session->weights = NULL;
    moeint4_context_destroy(session->ctx);
    session->ctx = NULL;
    if (session->has_layer)
        tk_layer_free(&session->layer);
    session->has_layer = 0;
}

int cli_buffer_create(cli_session *session, cli_buffer *buffer, size_t bytes, const void *host)
{
    buffer->memory = NULL;
    buffer->bytes = bytes;
    moeint4_status status = moeint4_memory_alloc(session->ctx, bytes ? bytes : 1, &buffer->memory);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_memory_alloc", status);
        return CLI_EXIT_FAILURE;
    }
    if (host != NULL && bytes > 0) {
        status = moeint4_memory_copy(session->ctx, buffer->memory, host, bytes,
                                     MOEINT4_COPY_HOST_TO_DEVICE);
        if (status != MOEINT4_SUCCESS) {
            cli_print_failure("moeint4_memory_copy (to the backend)", status);
            return CLI_EXIT_FAILURE;
        }
    }
    return CLI_EXIT_OK;
}

int cli_buffer_fetch(cli_session *session, const cli_buffer *buffer, void *host)
{
    moeint4_status status = moeint4_memory_copy(session->ctx, host, buffer->memory, buffer->bytes,
                                                MOEINT4_COPY_DEVICE_TO_HOST);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_memory_copy (from the backend)", status);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

void cli_buffer_destroy(cli_session *session, cli_buffer *buffer)
{
    if (buffer->memory != NULL)
        moeint4_memory_free(session->ctx, buffer->memory);
    buffer->memory = NULL;
}

int cli_forward(cli_session *session, int64_t num_tokens, const cli_buffer *hidden,
                const cli_buffer *ids, const cli_buffer *router_weights, cli_buffer *output)
{
    moeint4_forward_args args = tk_forward_args(
        session->options->dtype, num_tokens, session->options->preset->topk, hidden->memory,
        ids->memory, router_weights->memory, output->memory, &session->activation);
    moeint4_status status = moeint4_forward(session->ctx, session->weights, &args);
    if (status != MOEINT4_SUCCESS) {
        cli_print_failure("moeint4_forward", status);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

double cli_check_rows(const cli_session *session, int64_t num_tokens, const void *hidden,
                      const int32_t *ids, const float *router_weights, const void *output)
{
    const cli_options *options = session->options;
    const int64_t hidden_size = options->preset->hidden_size;
    const size_t element = tk_dtype_size(options->dtype);
    int64_t rows[CLI_SAMPLE_ROWS];
    int64_t count = num_tokens < CLI_SAMPLE_ROWS ? num_tokens : CLI_SAMPLE_ROWS;
    for (int64_t i = 0; i < count; i++) {
        /* spread evenly, first and last row included */
        rows[i] = count == 1 ? 0 : i * (num_tokens - 1) / (count - 1);
    }
    double *want = malloc((size_t)(count * hidden_size) * sizeof *want);
    unsigned char *got = malloc((size_t)(count * hidden_size) * element);
    if (want == NULL || got == NULL) {
        free(want);
        free(got);
        return -1.0;
    }
    for (int64_t i = 0; i < count; i++) {
        memcpy(got + (size_t)(i * hidden_size) * element,
               (const unsigned char *)output + (size_t)(rows[i] * hidden_size) * element,
               (size_t)hidden_size * element);
    }
    tk_reference_moe(&session->layer, options->dtype, hidden, num_tokens, options->preset->topk,
                     ids, router_weights, &session->activation, rows, count, want);
    double error = tk_relative_l2(options->dtype, got, want, (size_t)(count * hidden_size));
    free(want);
    free(got);
    return error;
}

static double cli_matrix_bytes(moeint4_format format, double in, double out, int group_size)
{
    double groups = group_size > 0 ? in / group_size : 1.0;
    double bytes = in * out / 2.0 + groups * out * 2.0; /* nibbles + fp16 scales */
    if (format != MOEINT4_FORMAT_GPTQ_SYM)
        bytes += groups * out / 2.0; /* packed zeros */
    return bytes;
}

double cli_expert_bytes(const cli_options *options)
{
    const cli_preset *p = options->preset;
    return cli_matrix_bytes(options->format, p->hidden_size, 2.0 * p->intermediate_size,
                            p->group_size) +
           cli_matrix_bytes(options->format, p->intermediate_size, p->hidden_size, p->group_size);
}

int cli_distinct_experts(const cli_options *options, int64_t num_tokens, const int32_t *ids)
{
    const int experts = options->preset->num_experts;
    unsigned char *seen = calloc((size_t)experts, 1);
    if (seen == NULL)
        return 0;
    int distinct = 0;
    for (int64_t i = 0; i < num_tokens * options->preset->topk; i++) {
        if (ids[i] >= 0 && ids[i] < experts && !seen[ids[i]]) {
            seen[ids[i]] = 1;
            distinct++;
        }
    }
    free(seen);
    return distinct;
}
