/* Contexts: a backend choice (or AUTO) bound to a device, holding one backend
 * context per backend that has served it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/struct_size.h"
#include "core/context.h"
#include "core/handles.h"
#include "core/weights_list.h"
#include "registry/oracle.h"

moeint4_status mi4_context_backend_slot(moeint4_context *ctx, const mi4_backend_entry *entry,
                                        void **backend_context)
{
    moeint4_status status = MOEINT4_SUCCESS;
    pthread_mutex_lock(&ctx->lock);
    int i = 0;
    while (i < ctx->num_slots && ctx->slots[i].entry != entry)
        i++;
    if (i < ctx->num_slots) {
        *backend_context = ctx->slots[i].backend_context;
    } else if (ctx->num_slots == MI4_MAX_BACKENDS) {
        status = mi4_fail(MOEINT4_INTERNAL_ERROR, "context has no room for another backend");
    } else {
        char err[MI4_ERROR_CAPACITY] = "";
        void *created = NULL;
        status = entry->iface.context_create(entry->iface.user_data, &ctx->options, &created, err,
                                             sizeof err);
        err[sizeof err - 1] = '\0';
        if (status == MOEINT4_SUCCESS) {
            ctx->slots[ctx->num_slots].entry = entry;
            ctx->slots[ctx->num_slots].backend_context = created;
            ctx->num_slots++;
            *backend_context = created;
        } else {
            status = mi4_fail_from_backend(entry, status, err);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

static moeint4_status check_options(const moeint4_context_options *options)
{
    if (options->gpu_weights < MOEINT4_GPU_WEIGHTS_AUTO ||
        options->gpu_weights > MOEINT4_GPU_WEIGHTS_INT4)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "options->gpu_weights = %d is not a moeint4_gpu_weights (0 AUTO, 1 BF16, "
                        "2 INT4)",
                        options->gpu_weights);
    if (options->device_index < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "options->device_index = %d is negative",
                        options->device_index);
    if (options->num_threads < 0 || options->num_threads > MOEINT4_MAX_THREADS)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "options->num_threads = %d is outside [0, %d] (0: one per online core)",
                        options->num_threads, MOEINT4_MAX_THREADS);
    if (options->backend != MOEINT4_BACKEND_AUTO && !mi4_registry_find(options->backend))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "options->backend = %d is not a known backend id",
                        (int)options->backend);
    return MOEINT4_SUCCESS;
}

/* Frees a context and all it holds; leaves the thread's error alone (a
 * failing create reports why after undoing itself). */
static void context_free(moeint4_context *ctx)
{
    while (ctx->live_weights)
        mi4_weights_destroy(ctx->live_weights);
    for (int i = ctx->num_slots - 1; i >= 0; i--) {
        const mi4_backend_entry *entry = ctx->slots[i].entry;
        if (entry->iface.context_destroy)
            entry->iface.context_destroy(entry->iface.user_data, ctx->slots[i].backend_context);
    }
    pthread_mutex_destroy(&ctx->lock);
    mi4_free(ctx);
}

MOEINT4_API moeint4_status moeint4_context_create(const moeint4_context_options *options,
                                                  moeint4_context **ctx)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    moeint4_context_options resolved = { 0 };
    resolved.struct_size = sizeof resolved;
    if (options) {
        moeint4_status status = MI4_STRUCT_READ(resolved, options, MOEINT4_CONTEXT_OPTIONS_MIN_SIZE,
                                                "options", "moeint4_context_options");
        if (status == MOEINT4_SUCCESS)
            status = check_options(&resolved);
        if (status != MOEINT4_SUCCESS)
            return status;
    }
    moeint4_backend requested;
    moeint4_status status = mi4_oracle_resolve_request(resolved.backend, &requested, NULL);
    if (status != MOEINT4_SUCCESS)
        return status;
    /* The backend whose state is made now, so that its environment knobs
     * (MOEINT4_CPU_KERNEL, ...) are read at create: the forced one, or for
     * AUTO the first available (where an unbound context's memory helpers
     * go). Another backend an AUTO context binds to later is set up then. */
    const mi4_backend_entry *first = NULL;
    if (requested != MOEINT4_BACKEND_AUTO) {
        status = mi4_oracle_require_available(requested, resolved.device_index, &first);
        if (status != MOEINT4_SUCCESS)
            return status;
    } else {
        first = mi4_oracle_first_available(resolved.device_index);
    }
    resolved.backend = requested;

    moeint4_context *created = mi4_calloc(1, sizeof *created);
    if (!created)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory for a context (%zu bytes)",
                        sizeof *created);
    if (pthread_mutex_init(&created->lock, NULL) != 0) {
        mi4_free(created);
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "cannot create the context's mutex");
    }
    created->options = resolved;
    created->requested = requested;
    if (requested != MOEINT4_BACKEND_AUTO) {
        created->bound = first;
        created->bound_by = "the context's options or MOEINT4_BACKEND";
    }
    if (first) {
        void *backend_context = NULL;
        status = mi4_context_backend_slot(created, first, &backend_context);
        if (status != MOEINT4_SUCCESS) {
            context_free(created);
            return status;
        }
    }
    mi4_clear_error();
    *ctx = created;
    return MOEINT4_SUCCESS;
}

MOEINT4_API void moeint4_context_destroy(moeint4_context *ctx)
{
    mi4_clear_error();
    if (ctx)
        context_free(ctx);
}

/* Binds an unbound AUTO context to `entry`; returns the binding in force
 * (another thread's when it bound first). */
static const mi4_backend_entry *context_bind(moeint4_context *ctx, const mi4_backend_entry *entry,
                                             const char *bound_by)
{
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->bound) {
        ctx->bound = entry;
        ctx->bound_by = bound_by;
    }
    const mi4_backend_entry *bound = ctx->bound;
    pthread_mutex_unlock(&ctx->lock);
    return bound;
}

static const mi4_backend_entry *context_binding(moeint4_context *ctx, const char **bound_by)
{
    pthread_mutex_lock(&ctx->lock);
    const mi4_backend_entry *bound = ctx->bound;
    *bound_by = ctx->bound_by;
    pthread_mutex_unlock(&ctx->lock);
    return bound;
}

moeint4_status mi4_context_choose(moeint4_context *ctx, const moeint4_problem *problem,
                                  const mi4_backend_entry **chosen)
{
    int device = ctx->options.device_index;
    const char *bound_by = NULL;
    const mi4_backend_entry *bound = context_binding(ctx, &bound_by);
    if (ctx->requested != MOEINT4_BACKEND_AUTO)
        return mi4_oracle_choose(problem, ctx->requested, device, chosen);
    if (!bound) {
        const mi4_backend_entry *entry = NULL;
        moeint4_status status = mi4_oracle_choose(problem, MOEINT4_BACKEND_AUTO, device, &entry);
        if (status != MOEINT4_SUCCESS)
            return status;
        bound = context_bind(ctx, entry, "its first prepared weights");
        if (bound == entry) {
            *chosen = entry;
            return MOEINT4_SUCCESS;
        }
        context_binding(ctx, &bound_by);
    }
    moeint4_status status = mi4_oracle_choose_bound(problem, bound, bound_by, device);
    if (status == MOEINT4_SUCCESS)
        *chosen = bound;
    return status;
}

/* ---- memory helpers: the backend's own, or aligned host memory ---- */

#define MI4_HOST_ALIGNMENT 64

/* The backend a context's memory helpers use: the one the context is bound
 * to; an AUTO context not bound yet binds to the first available backend. */
static moeint4_status memory_backend(moeint4_context *ctx, const mi4_backend_entry **entry)
{
    const char *bound_by = NULL;
    *entry = context_binding(ctx, &bound_by);
    if (*entry)
        return MOEINT4_SUCCESS;
    const mi4_backend_entry *first = mi4_oracle_first_available(ctx->options.device_index);
    if (!first)
        return mi4_fail(MOEINT4_BACKEND_UNAVAILABLE, "no backend is available on device %d",
                        ctx->options.device_index);
    *entry = context_bind(ctx, first, "a memory helper called before any weights were prepared");
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_context_backend(const moeint4_context *ctx,
                                                   moeint4_backend *backend)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    if (!backend)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "backend is NULL");
    const mi4_backend_entry *entry = NULL;
    /* Binding an AUTO context is internal state (under its lock), not a
     * change the caller can see other than through this answer. */
    moeint4_status status = memory_backend((moeint4_context *)ctx, &entry);
    if (status == MOEINT4_SUCCESS)
        *backend = entry->id;
    return status;
}

/* Looks up the memory backend and its (lazily created) backend context. */
static moeint4_status memory_backend_context(moeint4_context *ctx, const mi4_backend_entry **entry,
                                             void **backend_context)
{
    moeint4_status status = memory_backend(ctx, entry);
    if (status != MOEINT4_SUCCESS)
        return status;
    return mi4_context_backend_slot(ctx, *entry, backend_context);
}

MOEINT4_API moeint4_status moeint4_memory_alloc(moeint4_context *ctx, size_t bytes, void **ptr)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    if (!ptr)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ptr is NULL");
    if (bytes == 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "bytes = 0");
    const mi4_backend_entry *entry = NULL;
    void *backend_context = NULL;
    moeint4_status status = memory_backend_context(ctx, &entry, &backend_context);
    if (status != MOEINT4_SUCCESS)
        return status;
    if (entry->iface.memory_alloc) {
        char err[MI4_ERROR_CAPACITY] = "";
        void *allocated = NULL;
        status = entry->iface.memory_alloc(backend_context, bytes, &allocated, err, sizeof err);
        err[sizeof err - 1] = '\0';
        if (status != MOEINT4_SUCCESS)
            return mi4_fail_from_backend(entry, status, err);
        *ptr = allocated;
        return MOEINT4_SUCCESS;
    }
    if (bytes > SIZE_MAX - MI4_HOST_ALIGNMENT)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "bytes = %zu cannot be allocated", bytes);
    size_t rounded = (bytes + MI4_HOST_ALIGNMENT - 1) / MI4_HOST_ALIGNMENT * MI4_HOST_ALIGNMENT;
    void *allocated = mi4_aligned_alloc(MI4_HOST_ALIGNMENT, rounded);
    if (!allocated)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "cannot allocate %zu bytes of host memory", bytes);
    *ptr = allocated;
    return MOEINT4_SUCCESS;
}

MOEINT4_API void moeint4_memory_free(moeint4_context *ctx, void *ptr)
{
    mi4_clear_error();
    if (!ctx || !ptr)
        return;
    const mi4_backend_entry *entry = NULL;
    void *backend_context = NULL;
    if (memory_backend_context(ctx, &entry, &backend_context) != MOEINT4_SUCCESS)
        return; /* cannot happen for memory this context handed out */
    mi4_clear_error();
    if (entry->iface.memory_free)
        entry->iface.memory_free(backend_context, ptr);
    else if (!entry->iface.memory_alloc)
        mi4_free(ptr);
}

static int is_copy_kind(moeint4_copy_kind kind)
{
    return kind == MOEINT4_COPY_HOST_TO_DEVICE || kind == MOEINT4_COPY_DEVICE_TO_HOST ||
           kind == MOEINT4_COPY_DEVICE_TO_DEVICE;
}

MOEINT4_API moeint4_status moeint4_memory_copy(moeint4_context *ctx, void *dst, const void *src,
                                               size_t bytes, moeint4_copy_kind kind)
{
    mi4_clear_error();
    if (!ctx)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ctx is NULL");
    if (!is_copy_kind(kind))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "kind = %d is not a moeint4_copy_kind",
                        (int)kind);
    if (bytes == 0)
        return MOEINT4_SUCCESS;
    if (!dst)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "dst is NULL");
    if (!src)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "src is NULL");
    const mi4_backend_entry *entry = NULL;
    void *backend_context = NULL;
    moeint4_status status = memory_backend_context(ctx, &entry, &backend_context);
    if (status != MOEINT4_SUCCESS)
        return status;
    if (!entry->iface.memory_copy) {
        memmove(dst, src, bytes);
        return MOEINT4_SUCCESS;
    }
    char err[MI4_ERROR_CAPACITY] = "";
    status = entry->iface.memory_copy(backend_context, dst, src, bytes, kind, err, sizeof err);
    err[sizeof err - 1] = '\0';
    return status == MOEINT4_SUCCESS ? status : mi4_fail_from_backend(entry, status, err);
}
