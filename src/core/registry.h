/* The backend registry: the library's only global mutable state. Holds the
 * built-in backends, the GPU plugins found next to the library or on
 * MOEINT4_BACKEND_PATH, and third-party backends. Initialised once
 * (pthread_once); registration takes a mutex. Entries are never removed
 * while the process runs, so pointers to them stay valid. */
#ifndef MOEINT4_CORE_REGISTRY_H
#define MOEINT4_CORE_REGISTRY_H

#include "moeint4.h"

#define MI4_MAX_BACKENDS 32
#define MI4_REASON_CAPACITY 256

typedef struct mi4_backend_entry {
    moeint4_backend id;
    char name[32];
    int compiled;                   /* iface is usable */
    char load_reason[MI4_REASON_CAPACITY]; /* why not compiled (plugin missing, ...) */
    moeint4_backend_iface iface;    /* copy; valid when compiled */
} mi4_backend_entry;

/* Entry for `id`, or NULL when unknown. Loads plugins on first use. */
const mi4_backend_entry *mi4_registry_find(moeint4_backend id);

/* All entries, in the oracle's priority order for this machine
 * (platform_priority, then id). Returns the count; fills at most `cap`. */
int mi4_registry_list(const mi4_backend_entry **entries, int cap);

#endif
