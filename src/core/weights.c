/* Prepared weights: validated checkpoint tensors handed to the backend the
 * oracle (or the context's forced backend) picked. */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "moeint4_backend.h"
#include "base/error.h"
#include "core/context.h"
#include "core/handles.h"
#include "core/weights_list.h"
#include "core/validate_desc.h"
#include "registry/oracle.h"

MOEINT4_API moeint4_status moeint4_weights_prepare(moeint4_context *ctx,
                                                   const moeint4_weights_desc *desc,
                                                   moeint4_weights **weights)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    if (!desc)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc is NULL");
    if (!weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "weights is NULL");
    moeint4_weights_desc normalized;
    moeint4_status status = mi4_validate_weights_desc(desc, &normalized);
    if (status != MOEINT4_SUCCESS)
        return status;

    moeint4_problem problem = mi4_problem_from_desc(&normalized);
    const mi4_backend_entry *entry = NULL;
    status = mi4_context_choose(ctx, &problem, &entry);
    if (status != MOEINT4_SUCCESS)
        return status;
    void *backend_context = NULL;
    status = mi4_context_backend_slot(ctx, entry, &backend_context);
    if (status != MOEINT4_SUCCESS)
        return status;

    moeint4_weights *prepared = mi4_calloc(1, sizeof *prepared);
    if (!prepared)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory for a weights handle");
    /* Backends see the descriptor at this library's size, defaults filled. */
    char err[MI4_ERROR_CAPACITY] = "";
    void *backend_weights = NULL;
    status = entry->iface.prepare(backend_context, &normalized, &backend_weights, err, sizeof err);
    err[sizeof err - 1] = '\0';
    if (status != MOEINT4_SUCCESS) {
        mi4_free(prepared);
        return mi4_fail_from_backend(entry, status, err);
    }
    prepared->ctx = ctx;
    prepared->backend = entry;
    prepared->backend_context = backend_context;
    prepared->backend_weights = backend_weights;
    prepared->num_experts = normalized.num_experts;
    prepared->hidden_size = normalized.hidden_size;
    mi4_weights_link(ctx, prepared);
    *weights = prepared;
    return MOEINT4_SUCCESS;
}

MOEINT4_API void moeint4_weights_release(moeint4_weights *weights)
{
    mi4_clear_error();
    if (!weights)
        return;
    mi4_weights_destroy(weights);
}

MOEINT4_API moeint4_status moeint4_weights_backend(const moeint4_weights *weights,
                                                   moeint4_backend *backend)
{
    mi4_clear_error();
    if (!weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "weights is NULL");
    if (!backend)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "backend is NULL");
    *backend = weights->backend->id;
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_weights_memory(const moeint4_weights *weights,
                                                  size_t *host_bytes, size_t *device_bytes)
{
    mi4_clear_error();
    if (!weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "weights is NULL");
    size_t host = 0, device = 0;
    const moeint4_backend_iface *iface = &weights->backend->iface;
    if (iface->memory_usage)
        iface->memory_usage(weights->backend_context, weights->backend_weights, &host, &device);
    host += sizeof *weights;
    if (host_bytes)
        *host_bytes = host;
    if (device_bytes)
        *device_bytes = device;
    return MOEINT4_SUCCESS;
}
