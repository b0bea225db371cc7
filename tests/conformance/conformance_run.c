/* One backend, many cases: random layer -> moeint4_weights_prepare ->
 * device buffers -> poisoned output -> moeint4_forward -> relative L2 error
 * against tk_reference_moe. Layers are shared by consecutive cases with the
 * same spec (the full-size ones are expensive to generate and prepare). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conformance_expect.h"
#include "conformance_run.h"
#include "testkit.h"

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct layer_slot {
    int valid;
    conf_layer_spec spec;
    tk_layer layer;
    moeint4_weights *weights;
    moeint4_status prepare_status;
    char prepare_error[512];
} layer_slot;

static void slot_clear(layer_slot *slot)
{
    moeint4_weights_release(slot->weights);
    tk_layer_free(&slot->layer);
    memset(slot, 0, sizeof *slot);
}

/* Makes `slot` hold spec's layer prepared on ctx. Returns 0, or -1 when
 * the kit could not build it (out of memory). */
static int slot_load(layer_slot *slot, moeint4_context *ctx, const conf_layer_spec *spec)
{
    if (slot->valid && memcmp(&slot->spec, spec, sizeof *spec) == 0)
        return 0;
    slot_clear(slot);
    tk_rng rng;
    tk_rng_seed(&rng, spec->seed);
    if (tk_layer_random(&slot->layer, spec->format, spec->zero_offset, spec->num_experts,
                        spec->hidden_size, spec->intermediate_size, spec->group_size,
                        spec->scales_dtype, spec->expert_map, &rng) != 0 ||
        (spec->with_g_idx && tk_layer_add_g_idx(&slot->layer) != 0))
        return -1;
    if (spec->act_order) { /* 11 shares no factor with any IN of the matrix */
        tk_matrix *m[2] = { &slot->layer.w13, &slot->layer.w2 };
        for (int p = 0; p < 2; p++)
            for (int e = 0; e < m[p]->num_experts; e++)
                for (int k = 0; k < m[p]->in_features; k++)
                    m[p]->g_idx[(size_t)e * m[p]->in_features + k] =
                        ((11 * k + e) % m[p]->in_features) / m[p]->group_size;
    }
    moeint4_weights_desc desc = tk_layer_desc(&slot->layer);
    slot->prepare_status = moeint4_weights_prepare(ctx, &desc, &slot->weights);
    if (slot->prepare_status != MOEINT4_SUCCESS)
        snprintf(slot->prepare_error, sizeof slot->prepare_error, "%s", moeint4_last_error());
    slot->spec = *spec;
    slot->valid = 1;
    return 0;
}

/* Device (or host, for host backends) copies of the forward inputs. */
typedef struct device_buffers {
    void *hidden, *ids, *weights, *output;
} device_buffers;

static moeint4_status upload(moeint4_context *ctx, const void *host, size_t bytes, void **device)
{
    moeint4_status status = moeint4_memory_alloc(ctx, bytes, device);
    if (status == MOEINT4_SUCCESS)
        status = moeint4_memory_copy(ctx, *device, host, bytes, MOEINT4_COPY_HOST_TO_DEVICE);
    return status;
}

static void release_buffers(moeint4_context *ctx, device_buffers *d)
{
    moeint4_memory_free(ctx, d->hidden);
    moeint4_memory_free(ctx, d->ids);
    moeint4_memory_free(ctx, d->weights);
    moeint4_memory_free(ctx, d->output);
    memset(d, 0, sizeof *d);
}

typedef enum case_outcome { CASE_PASSED, CASE_UNSUPPORTED, CASE_FAILED } case_outcome;

/* *same = 1 when `bytes` of device memory equal `host`. */
static moeint4_status compare_device(moeint4_context *ctx, const void *device, const void *host,
                                     size_t bytes, int *same)
{
    void *copy = malloc(bytes);
    if (!copy)
        return MOEINT4_OUT_OF_MEMORY;
    moeint4_status status =
        moeint4_memory_copy(ctx, copy, device, bytes, MOEINT4_COPY_DEVICE_TO_HOST);
    *same = status == MOEINT4_SUCCESS && memcmp(copy, host, bytes) == 0;
    free(copy);
    return status;
}

moeint4_status conf_forward_through_device(moeint4_context *ctx, const moeint4_weights *weights,
                                           moeint4_forward_args args, size_t hidden_bytes,
                                           size_t slot_count, void *got, const char **what)
{
    device_buffers d = { NULL, NULL, NULL, NULL };
    moeint4_status status;
    *what = "moeint4_memory_alloc/copy";
    tk_poison(got, hidden_bytes);
    if ((status = upload(ctx, args.hidden_states, hidden_bytes, &d.hidden)) ||
        (status = upload(ctx, args.topk_ids, slot_count * sizeof(int32_t), &d.ids)) ||
        (status = upload(ctx, args.topk_weights, slot_count * sizeof(float), &d.weights)) ||
        (status = upload(ctx, got, hidden_bytes, &d.output))) {
        release_buffers(ctx, &d);
        return status;
    }
    const void *host_hidden = args.hidden_states, *host_ids = args.topk_ids,
               *host_weights = args.topk_weights;
    args.hidden_states = d.hidden;
    args.topk_ids = d.ids;
    args.topk_weights = d.weights;
    args.output = d.output;
    *what = "moeint4_forward";
    status = moeint4_forward(ctx, weights, &args);
    if (status == MOEINT4_SUCCESS) {
        *what = "moeint4_memory_copy (device to host)";
        status = moeint4_memory_copy(ctx, got, d.output, hidden_bytes, MOEINT4_COPY_DEVICE_TO_HOST);
    }
    if (status == MOEINT4_SUCCESS) {
        /* Inputs are never modified (include/moeint4.h). */
        int same = 1;
        status = compare_device(ctx, d.hidden, host_hidden, hidden_bytes, &same);
        if (status == MOEINT4_SUCCESS && same)
            status = compare_device(ctx, d.ids, host_ids, slot_count * sizeof(int32_t), &same);
        if (status == MOEINT4_SUCCESS && same)
            status =
                compare_device(ctx, d.weights, host_weights, slot_count * sizeof(float), &same);
        if (status == MOEINT4_SUCCESS && !same) {
            *what = "moeint4_forward changed one of its inputs";
            status = MOEINT4_INTERNAL_ERROR;
        }
    }
    release_buffers(ctx, &d);
    return status;
}

static case_outcome run_case(moeint4_context *ctx, layer_slot *slot, const conf_case *c,
                             double tolerance, double *error)
{
    *error = NAN;
    if (slot_load(slot, ctx, &c->layer) != 0) {
        printf("FAIL %s: the test kit could not build the layer (out of memory)\n", c->name);
        return CASE_FAILED;
    }
    if (slot->prepare_status == MOEINT4_UNSUPPORTED)
        return CASE_UNSUPPORTED;
    if (slot->prepare_status != MOEINT4_SUCCESS) {
        printf("FAIL %s: moeint4_weights_prepare: %s: %s\n", c->name,
               moeint4_status_string(slot->prepare_status), slot->prepare_error);
        return CASE_FAILED;
    }

    int64_t m = c->num_tokens;
    int k = c->layer.hidden_size, topk = c->topk;
    size_t count = (size_t)m * (size_t)k, slots = (size_t)m * (size_t)topk;
    size_t hidden_bytes = count * tk_dtype_size(c->dtype);
    void *hidden = malloc(hidden_bytes), *got = malloc(hidden_bytes);
    int32_t *ids = malloc(slots * sizeof *ids);
    float *router = malloc(slots * sizeof *router);
    double *want = malloc(count * sizeof *want);
    case_outcome outcome = CASE_FAILED;
    if (!hidden || !got || !ids || !router || !want) {
        printf("FAIL %s: out of host memory\n", c->name);
        goto done;
    }
    tk_rng rng;
    tk_rng_seed(&rng, c->seed);
    tk_fill_activations(&rng, c->dtype, count, 1.0, hidden);
    tk_route_random(&rng, m, c->layer.num_experts, topk, ids, router);
    /* Router weights off the simplex too, so that a backend ignoring them
     * (or applying them twice) fails even with topk = 1. */
    for (size_t i = 0; i < slots; i++)
        router[i] *= (float)tk_rng_range(&rng, 0.5, 1.5);

    tk_activation act = { c->activation, c->limit, c->alpha, c->beta,
                          c->apply_router_weight_on_input };
    tk_reference_moe(&slot->layer, c->dtype, hidden, m, topk, ids, router, &act, NULL, 0, want);

    moeint4_forward_args args = tk_forward_args(c->dtype, m, topk, hidden, ids, router, NULL, &act);
    const char *what = "";
    moeint4_status status =
        conf_forward_through_device(ctx, slot->weights, args, hidden_bytes, slots, got, &what);
    if (status == MOEINT4_UNSUPPORTED && strcmp(what, "moeint4_forward") == 0) {
        outcome = CASE_UNSUPPORTED;
        goto done;
    }
    if (status != MOEINT4_SUCCESS) {
        printf("FAIL %s: %s: %s: %s\n", c->name, what, moeint4_status_string(status),
               moeint4_last_error());
        goto done;
    }
    *error = tk_relative_l2(c->dtype, got, want, count);
    if (*error <= tolerance) {
        outcome = CASE_PASSED;
    } else {
        size_t first_bad = 0;
        while (first_bad < count && isfinite(tk_load(c->dtype, got, first_bad)) &&
               fabs(tk_load(c->dtype, got, first_bad) - want[first_bad]) <=
                   8.0 * tolerance * (fabs(want[first_bad]) + 1e-3))
            first_bad++;
        printf("FAIL %s: relative L2 %.3g > %.3g", c->name, *error, tolerance);
        if (first_bad < count)
            printf(" (first bad out[%zu][%zu] = %.6g, reference %.6g)", first_bad / (size_t)k,
                   first_bad % (size_t)k, tk_load(c->dtype, got, first_bad), want[first_bad]);
        printf("\n");
    }
done:
    free(hidden);
    free(got);
    free(ids);
    free(router);
    free(want);
    return outcome;
}

moeint4_status conf_create_context(moeint4_backend id, moeint4_context **ctx)
{
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.backend = id;
    return moeint4_context_create(&options, ctx);
}

void conf_run_matrix(moeint4_backend id, const char *backend_name, const conf_case *cases,
                     int num_cases, int skip_large, const char *filter, conf_summary *summary)
{
    memset(summary, 0, sizeof *summary);
    double start = now_seconds();
    moeint4_context *ctx = NULL;
    moeint4_status status = conf_create_context(id, &ctx);
    if (status != MOEINT4_SUCCESS) {
        printf("FAIL %s: moeint4_context_create: %s: %s\n", backend_name,
               moeint4_status_string(status), moeint4_last_error());
        summary->failed = 1;
        return;
    }
    layer_slot slot;
    memset(&slot, 0, sizeof slot);
    for (int i = 0; i < num_cases; i++) {
        const conf_case *c = &cases[i];
        if ((skip_large && c->large) || (filter && *filter && !strstr(c->name, filter))) {
            summary->filtered_out++;
            continue;
        }
        double case_start = now_seconds(), error;
        double tolerance = conf_tolerance(id, c->dtype);
        int expected = conf_expected_supported(backend_name, c);
        case_outcome outcome = run_case(ctx, &slot, c, tolerance, &error);
        if (outcome == CASE_PASSED) {
            summary->passed++;
            summary->served_beyond_set += !expected;
            if (error > summary->max_error[c->dtype])
                summary->max_error[c->dtype] = error;
        } else if (outcome == CASE_UNSUPPORTED && !expected) {
            summary->unsupported++;
        } else if (outcome == CASE_UNSUPPORTED) {
            printf("FAIL %s: UNSUPPORTED, but %s must serve it (conformance_expect.c): %s\n",
                   c->name, backend_name,
                   slot.prepare_status == MOEINT4_UNSUPPORTED ? slot.prepare_error
                                                              : moeint4_last_error());
            summary->unexpectedly_unsupported++;
            summary->failed++;
        } else {
            summary->failed++;
        }
        if (c->large)
            printf("%s %s: %s, relative L2 %.3g, %.1f s (layer generation and prepare "
                   "included when new)\n",
                   backend_name, c->name,
                   outcome == CASE_PASSED        ? "passed"
                   : outcome == CASE_UNSUPPORTED ? "unsupported"
                                                 : "FAILED",
                   error, now_seconds() - case_start);
    }
    slot_clear(&slot);
    moeint4_context_destroy(ctx);
    summary->seconds = now_seconds() - start;
}

void conf_print_summary(moeint4_backend id, const char *backend_name, const conf_summary *s)
{
    printf("conformance %s: %d passed, %d failed (%d of them UNSUPPORTED though expected), %d "
           "unsupported as expected, %d filtered out; %d passed outside the expected set; %.1f s\n",
           backend_name, s->passed, s->failed, s->unexpectedly_unsupported, s->unsupported,
           s->filtered_out, s->served_beyond_set, s->seconds);
    for (int d = MOEINT4_DTYPE_F32; d <= MOEINT4_DTYPE_BF16; d++) {
        char bound[160];
        conf_describe_tolerance(id, (moeint4_dtype)d, bound, sizeof bound);
        printf("  %s; max relative L2 %.3g\n", bound, s->max_error[d]);
    }
}
