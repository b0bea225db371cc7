/* What the other entry points need of a context (src/core/context.c). */
#ifndef MOEINT4_CORE_CONTEXT_H
#define MOEINT4_CORE_CONTEXT_H

#include "core/handles.h"

/* The backend context of `entry` inside `ctx`, created on first use.
 * Sets the thread's error on failure. */
moeint4_status mi4_context_backend_slot(moeint4_context *ctx, const mi4_backend_entry *entry,
                                        void **backend_context);

/* The backend that serves `problem` on ctx: the bound one (which must
 * support it: else UNSUPPORTED saying what bound the context), or for an
 * unbound AUTO context the oracle's choice, which then binds it. */
moeint4_status mi4_context_choose(moeint4_context *ctx, const moeint4_problem *problem,
                                  const mi4_backend_entry **chosen);

#endif
