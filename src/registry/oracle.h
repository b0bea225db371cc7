/* The oracle: which backend serves a weights problem on this machine, and
 * why. It only decides; it never touches data. */
#ifndef MOEINT4_REGISTRY_ORACLE_H
#define MOEINT4_REGISTRY_ORACLE_H

#include "registry/registry.h"
#include "moeint4.h"

/* Resolves a request: AUTO becomes the backend MOEINT4_BACKEND names (when
 * set to something other than "auto"); anything else must be a known id.
 * *from_env (may be NULL) says whether the environment decided. Sets the
 * thread's error on failure (INVALID_ARGUMENT). */
moeint4_status mi4_oracle_resolve_request(moeint4_backend requested, moeint4_backend *resolved,
                                          int *from_env);

/* The entry of a forced backend, which must be compiled and whose probe must
 * pass on `device_index` (else BACKEND_UNAVAILABLE with the reason). */
moeint4_status mi4_oracle_require_available(moeint4_backend id, int device_index,
                                            const mi4_backend_entry **entry);

/* First-fit in priority order over (probe ok) and (supports ok), or the
 * resolved forced backend, which must serve the problem (never a silent
 * fallback). Sets the thread's error with every reason on failure. */
moeint4_status mi4_oracle_choose(const moeint4_problem *problem, moeint4_backend resolved,
                                 int device_index, const mi4_backend_entry **chosen);

/* An AUTO context already bound to `bound` (by `bound_by`, in words) can
 * serve `problem` only there: SUCCESS, or UNSUPPORTED / BACKEND_UNAVAILABLE
 * saying what bound it and why the bound backend cannot. */
moeint4_status mi4_oracle_choose_bound(const moeint4_problem *problem,
                                       const mi4_backend_entry *bound, const char *bound_by,
                                       int device_index);

/* The first backend in priority order whose probe passes (the memory
 * helpers' backend for AUTO contexts not bound yet); NULL when none is. */
const mi4_backend_entry *mi4_oracle_first_available(int device_index);

#endif
