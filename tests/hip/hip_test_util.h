/* Helpers of the HIP backend tests: availability (skip with 77 when there is
 * no GPU or no plugin), forced-HIP contexts, and one forward through device
 * buffers made with the public memory helpers. */
#ifndef MOEINT4_TESTS_HIP_UTIL_H
#define MOEINT4_TESTS_HIP_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"
#include "testkit.h"

#define HIP_TEST_SKIP 77

/* The relative L2 error a HIP forward is held to against the double
 * reference, in both weights modes and for every dtype alike: input rows
 * and the intermediate are rounded to bf16, the weights too in the BF16
 * mode (int4 mode: only on the paths that round them once to BF16, the
 * q64 / q128 tiles and the expansion). ~4e-3 through both projections, more
 * on tiny layers (tests/conformance/conformance_run.c derives the bound). */
#define HIP_TOLERANCE 1e-2

/* 1 when the HIP backend is loaded and has a device; otherwise prints why. */
int hip_test_available(void);

/* 1 when MOEINT4_HIP_WEIGHTS names `mode` ("bf16", "int4"; any case, as
 * the backend reads it). */
int hip_test_weights_env_is(const char *mode);

/* A copy of environment variable `name`'s value (NULL when unset), so that
 * a test that changes it can give it back with hip_test_env_restore. */
char *hip_test_env_save(const char *name);

/* Gives `name` the value hip_test_env_save copied (unsets it when that was
 * NULL) and frees the copy. */
void hip_test_env_restore(const char *name, char *saved);

/* A context forced to the HIP backend with MOEINT4_HIP_GEMM = gemm ("mma" or
 * "fma"; NULL leaves the variable alone). Fails the test on error. */
moeint4_context *hip_test_context(const char *gemm);

/* One forward of a random batch: activations and routing from `seed`,
 * router weights off the simplex. Output downloaded to `got` (M*K of dtype,
 * poisoned first); the reference in `want` when not NULL. Returns forward's
 * status. `misalign` shifts the device input by one element. */
typedef struct hip_test_case {
    moeint4_dtype dtype;
    int64_t num_tokens;
    int topk;
    moeint4_activation activation;
    float limit, alpha, beta;
    int on_input;
    uint64_t seed;
    int misalign;
} hip_test_case;

moeint4_status hip_test_forward(moeint4_context *ctx, const moeint4_weights *weights,
                                const tk_layer *layer, const hip_test_case *c, void *got,
                                double *want);

/* Relative L2 error of one case (prints it); NAN when forward failed. */
double hip_test_error(moeint4_context *ctx, const moeint4_weights *weights, const tk_layer *layer,
                      const hip_test_case *c);

/* A device copy of `bytes` host bytes made with the public memory helpers
 * (fails the test on error). */
void *hip_test_upload(moeint4_context *ctx, const void *host, size_t bytes);

/* A random layer prepared on ctx (fails the test on error). */
moeint4_weights *hip_test_prepare(moeint4_context *ctx, tk_layer *layer, moeint4_format format,
                                  int num_experts, int hidden, int intermediate, int group_size,
                                  int expert_map_mode, uint64_t seed);

#endif
