/* A synthetic MoE layer prepared on a backend through the public ABI, and the
 * helpers `run` and `bench` share: forward memory (host or device, through
 * moeint4_memory_alloc/copy), one forward call, and the accuracy check
 * against the double-precision reference of tools/synth. */
#ifndef MOEINT4_TOOLS_CLI_SESSION_H
#define MOEINT4_TOOLS_CLI_SESSION_H

#include "cli.h"
#include "synth.h"

typedef struct cli_session {
    const cli_options *options;
    tk_layer layer;
    int has_layer;
    tk_activation activation;
    moeint4_context *ctx;
    moeint4_weights *weights;
    moeint4_backend_info backend; /* the backend serving the weights */
    double build_seconds;         /* random checkpoint + packing (tools/synth) */
    double prepare_seconds;       /* moeint4_weights_prepare */
} cli_session;

/* Builds the layer, asks the oracle for a backend (honouring --backend and
 * MOEINT4_BACKEND), creates a context forced to it with `threads` CPU
 * threads (0 = all cores) and prepares the weights. Prints what failed and
 * returns CLI_EXIT_FAILURE, else CLI_EXIT_OK. Close it either way. */
int cli_session_open(cli_session *session, const cli_options *options, int threads);
void cli_session_close(cli_session *session);

/* Memory forward() accepts on the session's backend, with a host copy. */
typedef struct cli_buffer {
    void *memory;
    size_t bytes;
} cli_buffer;

/* Allocates `bytes` and, when `host` is not NULL, copies it in. */
int cli_buffer_create(cli_session *session, cli_buffer *buffer, size_t bytes, const void *host);
int cli_buffer_fetch(cli_session *session, const cli_buffer *buffer, void *host);
void cli_buffer_destroy(cli_session *session, cli_buffer *buffer);

/* One moeint4_forward on forward memory. Prints the error on failure. */
int cli_forward(cli_session *session, int64_t num_tokens, const cli_buffer *hidden,
                const cli_buffer *ids, const cli_buffer *router_weights, cli_buffer *output);

/* Relative L2 error of up to CLI_SAMPLE_ROWS rows of `output` (host copy),
 * spread over [0, M), against the reference. Negative when out of memory. */
double cli_check_rows(const cli_session *session, int64_t num_tokens, const void *hidden,
                      const int32_t *ids, const float *router_weights, const void *output);

/* Checkpoint bytes of one expert (int4 nibbles + scales + zeros, w13 + w2). */
double cli_expert_bytes(const cli_options *options);
/* Distinct local experts hit by one routing. */
int cli_distinct_experts(const cli_options *options, int64_t num_tokens, const int32_t *ids);

/* Prints "moeint4: <what>: STATUS: last error" to stderr. */
void cli_print_failure(const char *what, moeint4_status status);

#endif
