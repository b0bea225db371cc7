/* A configurable fake backend for the core tests: its behaviour (probe,
 * supports, errors) is set through a control block passed as user_data, and
 * it counts what it was asked to do. Host pointers; its forward writes
 * FAKE_OUTPUT_VALUE (in the args' dtype) into every output element. */
#ifndef MOEINT4_TESTS_CORE_FAKE_BACKEND_H
#define MOEINT4_TESTS_CORE_FAKE_BACKEND_H

#include "moeint4_backend.h"

#define FAKE_OUTPUT_VALUE 0.25f

typedef struct fake_control {
    const char *name;
    int priority;
    int probe_ok;
    int supports_ok;
    moeint4_format only_format;    /* 0: every format; else supports() says no to others */
    moeint4_dtype only_dtype;      /* 0: every dtype; else forward() refuses others */
    moeint4_status prepare_status; /* what prepare/forward return (SUCCESS = work) */
    moeint4_status forward_status;
    const char *error_message; /* written into err on a failing status */
    /* counters (atomic: backends are called from many threads) */
    _Atomic int probe_calls, supports_calls, contexts_created, contexts_destroyed;
    _Atomic int weights_prepared, weights_released, forwards;
} fake_control;

/* The table for `control` (valid while `control` lives). */
moeint4_backend_iface fake_backend_iface(fake_control *control);

#endif
