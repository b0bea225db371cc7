/* moeint4_forward: every argument is checked before the backend runs, so a
 * failing call leaves the output untouched. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "base/struct_size.h"
#include "core/handles.h"

static size_t dtype_bytes(moeint4_dtype dtype)
{
    switch (dtype) {
    case MOEINT4_DTYPE_F32: return 4;
    case MOEINT4_DTYPE_F16: return 2;
    case MOEINT4_DTYPE_BF16: return 2;
    }
    return 0;
}

static int is_activation(moeint4_activation activation)
{
    return activation == MOEINT4_ACTIVATION_SILU || activation == MOEINT4_ACTIVATION_GELU ||
           activation == MOEINT4_ACTIVATION_SWIGLU_CLAMP;
}

/* Byte counts of the [M, K] and [M, topk] arrays; 0 when they overflow size_t. */
static int array_bytes(int64_t rows, int64_t columns, size_t element, size_t *bytes)
{
    size_t elements;
    if ((uint64_t)rows > SIZE_MAX ||
        __builtin_mul_overflow((size_t)rows, (size_t)columns, &elements))
        return 0;
    return !__builtin_mul_overflow(elements, element, bytes);
}

static moeint4_status check_scalars(const moeint4_weights *weights,
                                    const moeint4_forward_args *args)
{
    if ((args->flags & ~MOEINT4_FORWARD_ASYNC) != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->flags = 0x%x has unknown bits",
                        (unsigned)args->flags);
    if (args->workspace == NULL && args->workspace_bytes != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "args->workspace_bytes = %zu but args->workspace is NULL",
                        args->workspace_bytes);
    if (dtype_bytes(args->dtype) == 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->dtype = %d is not F32, F16 or BF16",
                        (int)args->dtype);
    if (!is_activation(args->activation))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "args->activation = %d is not a moeint4_activation", (int)args->activation);
    if (args->num_tokens < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->num_tokens = %lld is negative",
                        (long long)args->num_tokens);
    if (args->topk < 1 || args->topk > weights->num_experts)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "args->topk = %d is outside [1, %d] (num_experts)", args->topk,
                        weights->num_experts);
    if (args->apply_router_weight_on_input != 0 && args->apply_router_weight_on_input != 1)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "args->apply_router_weight_on_input = %d must be 0 or 1",
                        args->apply_router_weight_on_input);
    if (args->activation == MOEINT4_ACTIVATION_SWIGLU_CLAMP) {
        if (!isfinite(args->swiglu_limit) || !(args->swiglu_limit > 0.0f))
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "args->swiglu_limit = %g must be finite and > 0",
                            (double)args->swiglu_limit);
        if (!isfinite(args->swiglu_alpha))
            return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->swiglu_alpha = %g is not finite",
                            (double)args->swiglu_alpha);
        if (!isfinite(args->swiglu_beta))
            return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->swiglu_beta = %g is not finite",
                            (double)args->swiglu_beta);
    }
    return MOEINT4_SUCCESS;
}

static int ranges_overlap(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

/* Host-pointer backends only: the data itself is readable here. */
static moeint4_status check_host_data(const moeint4_weights *weights,
                                      const moeint4_forward_args *args, size_t activation_bytes,
                                      size_t routing_bytes)
{
    int topk = args->topk, num_experts = weights->num_experts;
    for (int64_t m = 0; m < args->num_tokens; m++) {
        for (int j = 0; j < topk; j++) {
            int32_t id = args->topk_ids[m * topk + j];
            if (id < 0 || id >= num_experts)
                return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                "args->topk_ids[%lld][%d] = %d is outside [0, %d)", (long long)m, j,
                                (int)id, num_experts);
            float w = args->topk_weights[m * topk + j];
            if (!isfinite(w))
                return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                "args->topk_weights[%lld][%d] = %g is not finite", (long long)m, j,
                                (double)w);
        }
    }
    if (ranges_overlap(args->output, activation_bytes, args->hidden_states, activation_bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->output overlaps args->hidden_states");
    if (ranges_overlap(args->output, activation_bytes, args->topk_ids, routing_bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->output overlaps args->topk_ids");
    if (ranges_overlap(args->output, activation_bytes, args->topk_weights, routing_bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->output overlaps args->topk_weights");
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_forward(moeint4_context *ctx, const moeint4_weights *weights,
                                           const moeint4_forward_args *caller_args)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    if (!weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "weights is NULL");
    if (!caller_args)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args is NULL");
    if (weights->ctx != ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "weights were prepared with another context than ctx");
    /* Everything below, the backend included, sees the full-size copy. */
    moeint4_forward_args normalized;
    moeint4_status status = MI4_STRUCT_READ(normalized, caller_args, MOEINT4_FORWARD_ARGS_MIN_SIZE,
                                            "args", "moeint4_forward_args");
    if (status != MOEINT4_SUCCESS)
        return status;
    const moeint4_forward_args *args = &normalized;
    status = check_scalars(weights, args);
    if (status != MOEINT4_SUCCESS)
        return status;
    size_t activation_bytes, routing_bytes;
    if (!array_bytes(args->num_tokens, weights->hidden_size, dtype_bytes(args->dtype),
                     &activation_bytes) ||
        !array_bytes(args->num_tokens, args->topk, sizeof(int32_t), &routing_bytes))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "args->num_tokens = %lld: the [num_tokens, %d] arrays overflow size_t",
                        (long long)args->num_tokens, weights->hidden_size);
    if (args->num_tokens == 0)
        return MOEINT4_SUCCESS;
    const char *missing = !args->hidden_states  ? "hidden_states"
                          : !args->topk_ids     ? "topk_ids"
                          : !args->topk_weights ? "topk_weights"
                          : !args->output       ? "output"
                                                : NULL;
    if (missing)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "args->%s is NULL", missing);
    const mi4_backend_entry *entry = weights->backend;
    if (!entry->iface.device_pointers) {
        status = check_host_data(weights, args, activation_bytes, routing_bytes);
        if (status != MOEINT4_SUCCESS)
            return status;
    }
    char err[MI4_ERROR_CAPACITY] = "";
    status = entry->iface.forward(weights->backend_context, weights->backend_weights, args, err,
                                  sizeof err);
    err[sizeof err - 1] = '\0';
    return status == MOEINT4_SUCCESS ? status : mi4_fail_from_backend(entry, status, err);
}

MOEINT4_API moeint4_status moeint4_forward_workspace_size(const moeint4_weights *weights,
                                                          int64_t max_tokens, int topk,
                                                          moeint4_dtype dtype, size_t *bytes)
{
    mi4_clear_error();
    if (!weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "weights is NULL");
    if (!bytes)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "bytes is NULL");
    if (max_tokens < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "max_tokens = %lld is negative",
                        (long long)max_tokens);
    if (topk < 1 || topk > weights->num_experts)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "topk = %d is outside [1, %d] (num_experts)",
                        topk, weights->num_experts);
    if (dtype_bytes(dtype) == 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "dtype = %d is not F32, F16 or BF16", (int)dtype);
    const mi4_backend_entry *entry = weights->backend;
    size_t needed = 0;
    if (entry->iface.forward_workspace_size) {
        char err[MI4_ERROR_CAPACITY] = "";
        moeint4_status status =
            entry->iface.forward_workspace_size(weights->backend_context, weights->backend_weights,
                                                max_tokens, topk, dtype, &needed, err, sizeof err);
        err[sizeof err - 1] = '\0';
        if (status != MOEINT4_SUCCESS)
            return mi4_fail_from_backend(entry, status, err);
    }
    *bytes = needed;
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_forward_check(moeint4_context *ctx,
                                                 const moeint4_weights *weights, void *stream)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    if (!weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "weights is NULL");
    if (weights->ctx != ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "weights were prepared with another context than ctx");
    const mi4_backend_entry *entry = weights->backend;
    if (!entry->iface.forward_check)
        return MOEINT4_SUCCESS;
    char err[MI4_ERROR_CAPACITY] = "";
    moeint4_status status = entry->iface.forward_check(
        weights->backend_context, weights->backend_weights, stream, err, sizeof err);
    err[sizeof err - 1] = '\0';
    return status == MOEINT4_SUCCESS ? status : mi4_fail_from_backend(entry, status, err);
}
