/* What the opaque handles of the ABI hold. */
#ifndef MOEINT4_CORE_HANDLES_H
#define MOEINT4_CORE_HANDLES_H

#include <pthread.h>

#include "core/registry.h"
#include "moeint4.h"

/* A context binds a backend choice (or AUTO) to a device. Backend contexts
 * are created lazily, one per backend the oracle picks, under `lock` so that
 * concurrent prepares are safe. */
typedef struct mi4_backend_slot {
    const mi4_backend_entry *entry;
    void *backend_context;
} mi4_backend_slot;

struct moeint4_context {
    moeint4_context_options options;  /* copy, defaults filled in, struct_size = sizeof */
    moeint4_backend requested;        /* AUTO or forced (env var resolved) */
    pthread_mutex_t lock;             /* guards slots, the binding and the weights list */
    /* The one backend this context's weights and memory helpers use: the
     * forced one from the start; for AUTO set by the first prepare (the
     * oracle's choice) or, before any prepare, the first memory helper call
     * (the first available backend), and never changed afterwards. */
    const mi4_backend_entry *bound;
    const char *bound_by;             /* what bound it, for messages */
    mi4_backend_slot slots[MI4_MAX_BACKENDS];
    int num_slots;
    struct moeint4_weights *live_weights; /* prepared handles not yet released */
};

struct moeint4_weights {
    moeint4_context *ctx;
    const mi4_backend_entry *backend;
    void *backend_context;
    void *backend_weights;
    int num_experts;                  /* global E: the range of topk ids */
    int hidden_size;                  /* K */
    struct moeint4_weights *prev, *next; /* in ctx->live_weights */
};

/* The backend context of `entry` inside `ctx`, created on first use.
 * Sets the thread's error on failure (src/core/context.c). */
moeint4_status mi4_context_backend_slot(moeint4_context *ctx, const mi4_backend_entry *entry,
                                        void **backend_context);

/* The backend that serves `problem` on ctx: the bound one (which must
 * support it: else UNSUPPORTED saying what bound the context), or for an
 * unbound AUTO context the oracle's choice, which then binds it
 * (src/core/context.c). */
moeint4_status mi4_context_choose(moeint4_context *ctx, const moeint4_problem *problem,
                                  const mi4_backend_entry **chosen);

/* Reports a backend's error text as this thread's message, prefixed with the
 * backend's name. */
moeint4_status mi4_fail_from_backend(const mi4_backend_entry *entry, moeint4_status status,
                                     const char *err);

#endif
