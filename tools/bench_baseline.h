/* The bench's baseline: what load-time dequantization costs on a CPU. The
 * int4 weights are dequantized once to f32 with the public
 * moeint4_layout_dequantize_f32, then every forward groups the tokens by
 * expert and runs two OpenBLAS sgemm calls per expert hit (w13, then w2;
 * sgemv for an expert with one token),
 * with the same routing, activation and output dtype as the library. */
#ifndef MOEINT4_TOOLS_BENCH_BASELINE_H
#define MOEINT4_TOOLS_BENCH_BASELINE_H

#include "cli_session.h"

typedef struct cli_baseline {
    const cli_session *session;
    float *w13;       /* [E, 2N, K] */
    float *w2;        /* [E, K, N] */
    int64_t capacity; /* tokens the scratch below holds */
    float *x, *gathered, *gate_up, *activated, *down, *out;
    int64_t *slot_order;   /* token slots sorted by expert */
    int64_t *expert_start; /* [E + 1] */
} cli_baseline;

/* Dequantizes the session's layer. Returns CLI_EXIT_OK or prints and fails. */
int cli_baseline_create(cli_baseline *baseline, const cli_session *session);
void cli_baseline_destroy(cli_baseline *baseline);
/* Bytes the f32 weights take (for the cache flush decision and the report). */
double cli_baseline_weight_bytes(const cli_baseline *baseline);
/* One forward on host memory; hidden and output in the session's dtype. */
int cli_baseline_forward(cli_baseline *baseline, int64_t num_tokens, const void *hidden,
                         const int32_t *ids, const float *router_weights, void *output);

#endif
