/* What the opaque handles of the ABI hold. */
#ifndef MOEINT4_CORE_HANDLES_H
#define MOEINT4_CORE_HANDLES_H

#include "core/registry.h"
#include "moeint4.h"

/* A context binds a backend choice (or AUTO) to a device. Backend contexts
 * are created lazily, one per backend the oracle picks, and guarded by a
 * mutex so that concurrent prepares are safe. */
typedef struct mi4_backend_slot {
    const mi4_backend_entry *entry;
    void *backend_context;
} mi4_backend_slot;

struct moeint4_context {
    moeint4_context_options options;  /* copy, defaults filled in */
    moeint4_backend requested;        /* AUTO or forced (env var resolved) */
    void *lock;                       /* pthread_mutex_t*, kept opaque here */
    mi4_backend_slot slots[MI4_MAX_BACKENDS];
    int num_slots;
    int live_weights;                 /* prepared handles not yet released */
};

struct moeint4_weights {
    moeint4_context *ctx;
    const mi4_backend_entry *backend;
    void *backend_context;
    void *backend_weights;
    moeint4_weights_desc desc;        /* copy; data pointers cleared after prepare */
    int32_t *expert_map;              /* copy [num_experts], always present (identity if none given) */
};

#endif
