/* Small helpers shared by the core tests (cmocka must be included first). */
#ifndef MOEINT4_TESTS_CORE_UTIL_H
#define MOEINT4_TESTS_CORE_UTIL_H

#include <stdint.h>
#include <string.h>

#include "moeint4.h"
#include "testkit.h"

/* A small valid layer: E = 8 global experts, K = 64, N = 32, group 32,
 * F16 scales. expert_map_mode as tk_layer_random. Fails the test on error. */
void util_make_layer(tk_layer *layer, moeint4_format format, int expert_map_mode, uint64_t seed);

#define UTIL_EXPERTS 8
#define UTIL_HIDDEN 64

/* Options for `backend`, 2 CPU threads, everything else default. */
moeint4_context_options util_options(moeint4_backend backend);

/* Random activations [m][UTIL_HIDDEN] in dtype and softmax top-k routing over
 * UTIL_EXPERTS experts, deterministic per seed. */
void util_random_batch(uint64_t seed, moeint4_dtype dtype, int64_t m, int topk, void *hidden,
                       int32_t *ids, float *router);

/* Forward arguments over those arrays (SiLU, router weight on the output). */
moeint4_forward_args util_args(moeint4_dtype dtype, int64_t m, int topk, const void *hidden,
                               const int32_t *ids, const float *router, void *output);

/* A context on `backend` (AUTO allowed); fails the test on error. */
moeint4_context *util_context(moeint4_backend backend);

/* Asserts `status` == expected and that the last error contains `words`. */
#define assert_status_says(status, expected, words)                                                \
    do {                                                                                           \
        moeint4_status got_ = (status);                                                            \
        if (got_ != (expected) || !strstr(moeint4_last_error(), (words)))                          \
            fail_msg("%s:%d: got %s \"%s\", expected %s containing \"%s\"", __FILE__, __LINE__,    \
                     moeint4_status_string(got_), moeint4_last_error(),                            \
                     moeint4_status_string(expected), (words));                                    \
    } while (0)

#define assert_ok(status)                                                                          \
    do {                                                                                           \
        moeint4_status got_ = (status);                                                            \
        if (got_ != MOEINT4_SUCCESS)                                                               \
            fail_msg("%s:%d: %s: %s", __FILE__, __LINE__, moeint4_status_string(got_),             \
                     moeint4_last_error());                                                        \
    } while (0)

#endif
