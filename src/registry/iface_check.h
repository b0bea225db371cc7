/* The checks every backend table passes before the registry takes it, from a
 * plugin or from moeint4_register_backend. */
#ifndef MOEINT4_REGISTRY_IFACE_CHECK_H
#define MOEINT4_REGISTRY_IFACE_CHECK_H

#include <stddef.h>

#include "moeint4_backend.h"

/* api_version, struct_size, required functions. Writes the reason into
 * `reason` and returns VERSION_MISMATCH or INVALID_ARGUMENT, else SUCCESS. */
moeint4_status mi4_backend_iface_check(const moeint4_backend_iface *iface, char *reason,
                                       size_t reason_cap);

#endif
