/* Argument checks shared by the public entry points of src/core. Each sets
 * the thread's error (naming the field) and returns its status. */
#ifndef MOEINT4_CORE_VALIDATE_DESC_H
#define MOEINT4_CORE_VALIDATE_DESC_H

#include "moeint4.h"

/* The whole weights descriptor: struct_size, counts, sizes, enums, expert_map
 * and both projections through the layout module's checks. On success
 * *normalized is the caller's descriptor at this library's size, defaults
 * filled (scales_dtype 0 -> F16): what backends and the oracle see. */
moeint4_status mi4_validate_weights_desc(const moeint4_weights_desc *caller,
                                         moeint4_weights_desc *normalized);

/* What the oracle needs to know about a (validated) descriptor. */
moeint4_problem mi4_problem_from_desc(const moeint4_weights_desc *desc);

#endif
