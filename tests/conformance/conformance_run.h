/* Running conformance cases on one backend through the public ABI. */
#ifndef MOEINT4_TESTS_CONFORMANCE_RUN_H
#define MOEINT4_TESTS_CONFORMANCE_RUN_H

#include "conformance_cases.h"
#include "moeint4.h"

typedef struct conf_summary {
    int passed;
    int unsupported;              /* UNSUPPORTED, and outside the backend's expected set */
    int unexpectedly_unsupported; /* UNSUPPORTED inside it (counted in failed too) */
    int failed;
    int filtered_out;
    int served_beyond_set; /* passed though outside the expected set */
    double max_error[4];   /* worst relative L2 per output dtype (index = dtype) */
    double seconds;
} conf_summary;

/* Runs every selected case on backend `id`, printing each failure. A case
 * the backend answers UNSUPPORTED fails when it is in the backend's expected
 * set (conformance_expect.c), else is counted as unsupported. */
void conf_run_matrix(moeint4_backend id, const char *backend_name, const conf_case *cases,
                     int num_cases, int skip_large, const char *filter, conf_summary *summary);
void conf_print_summary(moeint4_backend id, const char *backend_name, const conf_summary *summary);

/* A context forced to backend `id`. */
moeint4_status conf_create_context(moeint4_backend id, moeint4_context **ctx);

/* Uploads args' host inputs with moeint4_memory_alloc/copy, poisons the
 * output (NaN bytes), runs moeint4_forward on the device copies and
 * downloads the output into `got` (hidden_bytes long), then checks the
 * device inputs are unchanged (else INTERNAL_ERROR). Returns the first
 * failing status; *what names the step that failed. */
moeint4_status conf_forward_through_device(moeint4_context *ctx, const moeint4_weights *weights,
                                           moeint4_forward_args args, size_t hidden_bytes,
                                           size_t slot_count, void *got, const char **what);

/* vLLM's vector cases on backend `id`; returns the number of failures. */
int conf_run_vectors(moeint4_backend id, const char *backend_name);

#endif
