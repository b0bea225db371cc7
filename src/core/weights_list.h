/* The lifetime of prepared weights handles inside their context, shared by
 * moeint4_weights_release and moeint4_context_destroy. */
#ifndef MOEINT4_CORE_WEIGHTS_LIST_H
#define MOEINT4_CORE_WEIGHTS_LIST_H

#include "core/handles.h"

/* Adds a prepared handle to its context's list of live handles. */
void mi4_weights_link(moeint4_context *ctx, moeint4_weights *weights);

/* Unlinks the handle, lets its backend release what it holds, frees it. */
void mi4_weights_destroy(moeint4_weights *weights);

#endif
