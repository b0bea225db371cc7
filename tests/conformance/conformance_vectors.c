/* vLLM's vector cases (tests/data/vllm) on one backend: the checkpoint
 * arrays as vLLM packed them (the kit's packer reproduces them byte for byte:
 * test_packer_vectors), BF16 activations, SiLU; the output must be within
 * relative L2 1e-2 of vLLM's f32 output (README of the vectors). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance_expect.h"
#include "conformance_run.h"
#include "testkit.h"

static int run_vector_case(moeint4_context *ctx, const char *backend_name,
                           const tk_vector_params *p)
{
    tk_vector_case c;
    if (tk_vector_case_load(&c, p) != 0) {
        printf("FAIL %s %s: cannot read the vectors under %s\n", backend_name, p->name,
               MOEINT4_VECTORS_DIR);
        return 1;
    }
    int failures = 1;
    size_t count = (size_t)p->num_tokens * (size_t)p->hidden_size;
    uint16_t *got = malloc(count * sizeof *got);
    double *want = malloc(count * sizeof *want);
    moeint4_weights *weights = NULL;
    moeint4_weights_desc desc = tk_layer_desc(&c.layer);
    moeint4_status status = moeint4_weights_prepare(ctx, &desc, &weights);
    if (!got || !want) {
        printf("FAIL %s %s: out of memory\n", backend_name, p->name);
    } else if (status == MOEINT4_UNSUPPORTED &&
               !conf_expected_supported_parts(backend_name, p->format, 0, p->group_size,
                                              MOEINT4_ACTIVATION_SILU, MOEINT4_DTYPE_BF16,
                                              MOEINT4_DTYPE_F16)) {
        printf("%s %s: unsupported as expected: %s\n", backend_name, p->name, moeint4_last_error());
        failures = 0;
    } else if (status != MOEINT4_SUCCESS) {
        printf("FAIL %s %s: moeint4_weights_prepare: %s: %s\n", backend_name, p->name,
               moeint4_status_string(status), moeint4_last_error());
    } else {
        moeint4_forward_args args =
            tk_forward_args(MOEINT4_DTYPE_BF16, p->num_tokens, p->topk, c.hidden, c.topk_ids,
                            c.topk_weights, NULL, NULL);
        const char *what = "";
        status = conf_forward_through_device(ctx, weights, args, count * sizeof *got,
                                             (size_t)p->num_tokens * (size_t)p->topk, got, &what);
        if (status != MOEINT4_SUCCESS) {
            printf("FAIL %s %s: %s: %s: %s\n", backend_name, p->name, what,
                   moeint4_status_string(status), moeint4_last_error());
        } else {
            for (size_t i = 0; i < count; i++)
                want[i] = c.ref_out[i];
            double error = tk_relative_l2(MOEINT4_DTYPE_BF16, got, want, count);
            printf("%s %s: relative L2 vs vLLM ref_out_f32 %.3g (bound 1e-2)\n", backend_name,
                   p->name, error);
            failures = error <= 1e-2 ? 0 : 1;
        }
    }
    moeint4_weights_release(weights);
    free(got);
    free(want);
    tk_vector_case_free(&c);
    return failures;
}

int conf_run_vectors(moeint4_backend id, const char *backend_name)
{
    moeint4_context *ctx = NULL;
    moeint4_status status = conf_create_context(id, &ctx);
    if (status != MOEINT4_SUCCESS) {
        printf("FAIL %s: moeint4_context_create: %s: %s\n", backend_name,
               moeint4_status_string(status), moeint4_last_error());
        return 1;
    }
    int failures = 0;
    for (int i = 0; tk_vector_case_params(i); i++)
        failures += run_vector_case(ctx, backend_name, tk_vector_case_params(i));
    moeint4_context_destroy(ctx);
    return failures;
}
