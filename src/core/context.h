/* What the other entry points need of a context (src/core/context.c). */
#ifndef MOEINT4_CORE_CONTEXT_H
#define MOEINT4_CORE_CONTEXT_H

#include "core/handles.h"

/* The backend context of `entry` inside `ctx`, created on first use.
 * Sets the thread's error on failure. */
moeint4_status mi4_context_backend_slot(moeint4_context *ctx, const mi4_backend_entry *entry,
                                        void **backend_context);

#endif
