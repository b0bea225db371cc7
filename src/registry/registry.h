/* The backend registry: the library's only global mutable state. Holds the
 * built-in backends, the GPU plugins found next to the library or on
 * MOEINT4_BACKEND_PATH, and third-party backends. Initialised once
 * (pthread_once) on first use; registration and the probe cache take a
 * mutex. Entries are never removed while the process runs, so pointers to
 * them stay valid and their tables never change once published. */
#ifndef MOEINT4_REGISTRY_REGISTRY_H
#define MOEINT4_REGISTRY_REGISTRY_H

#include <stddef.h>

#include "moeint4_backend.h"

#define MI4_MAX_BACKENDS 32
#define MI4_REASON_CAPACITY 256
#define MI4_NAME_CAPACITY 32

typedef struct mi4_backend_entry {
    moeint4_backend id;
    char name[MI4_NAME_CAPACITY];
    int compiled;                          /* iface is usable */
    char load_reason[MI4_REASON_CAPACITY]; /* why not compiled (plugin missing, ...) */
    moeint4_backend_iface iface;           /* copy; valid when compiled; iface.name == name */
    int priority;                          /* effective platform priority */
} mi4_backend_entry;

/* Entry for `id`, or NULL when unknown. Loads plugins on first use. */
const mi4_backend_entry *mi4_registry_find(moeint4_backend id);

/* Entry whose name matches (case-insensitive), or NULL. */
const mi4_backend_entry *mi4_registry_find_name(const char *name);

/* All entries, in the oracle's priority order for this machine
 * (priority, then id). Returns the count; fills at most `cap`. */
int mi4_registry_list(const mi4_backend_entry **entries, int cap);

/* Is `entry` usable on device `device_index`? 1 yes; 0 no with the reason
 * (plugin not loaded, or the probe's own words). Probe results are cached
 * per device index; thread-safe. */
int mi4_registry_available(const mi4_backend_entry *entry, int device_index, char *reason,
                           size_t reason_cap);

/* Reports a backend's error text as this thread's message, prefixed with the
 * backend's name (a status outside the enum becomes INTERNAL_ERROR). */
moeint4_status mi4_fail_from_backend(const mi4_backend_entry *entry, moeint4_status status,
                                     const char *err);

#endif
