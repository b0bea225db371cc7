/* What the opaque handles of the ABI hold. */
#ifndef MOEINT4_CORE_HANDLES_H
#define MOEINT4_CORE_HANDLES_H

#include <pthread.h>

#include "registry/registry.h"
#include "moeint4.h"

/* A context binds a backend choice (or AUTO) to a device. Backend contexts
 * are created lazily, one per backend the oracle picks, under `lock` so that
 * concurrent prepares are safe. */
typedef struct mi4_backend_slot {
    const mi4_backend_entry *entry;
    void *backend_context;
} mi4_backend_slot;

struct moeint4_context {
    moeint4_context_options options; /* copy, defaults filled in, struct_size = sizeof */
    moeint4_backend requested;       /* AUTO or forced (env var resolved) */
    pthread_mutex_t lock;            /* guards slots, the binding and the weights list */
    /* The one backend this context's weights and memory helpers use: the
     * forced one from the start; for AUTO set by the first prepare (the
     * oracle's choice) or, before any prepare, the first memory helper call
     * (the first available backend), and never changed afterwards. */
    const mi4_backend_entry *bound;
    const char *bound_by; /* what bound it, for messages */
    mi4_backend_slot slots[MI4_MAX_BACKENDS];
    int num_slots;
    struct moeint4_weights *live_weights; /* prepared handles not yet released */
};

struct moeint4_weights {
    moeint4_context *ctx;
    const mi4_backend_entry *backend;
    void *backend_context;
    void *backend_weights;
    int num_experts;                     /* global E: the range of topk ids */
    int hidden_size;                     /* K */
    struct moeint4_weights *prev, *next; /* in ctx->live_weights */
};

#endif
