/* Finds and loads backend plugins (shared objects exporting
 * moeint4_plugin_backend), so that libmoeint4.so itself links no GPU runtime. */
#ifndef MOEINT4_REGISTRY_PLUGIN_LOADER_H
#define MOEINT4_REGISTRY_PLUGIN_LOADER_H

#include <stddef.h>

#include "moeint4_backend.h"

/* Loads the backend plugin `file_name` (e.g. "libmoeint4-hip.so"), searching
 * every directory of MOEINT4_BACKEND_PATH first, then the directory of
 * libmoeint4.so itself. Returns its checked table (the plugin stays loaded
 * for the life of the process), or NULL with the reason in words
 * ("libmoeint4-hip.so not found in /a:/b"). */
const moeint4_backend_iface *mi4_plugin_load(const char *file_name, moeint4_backend expected_id,
                                             char *reason, size_t reason_cap);

/* Opens the plugin at `path` and asks its entry point for a table (not yet
 * checked: the caller checks and registers it). On success *handle is the
 * open object, to be kept for the life of the process or given to
 * mi4_plugin_close when the table is refused; NULL with the reason (naming
 * the file) otherwise. */
const moeint4_backend_iface *mi4_plugin_open(const char *path, void **handle, char *reason,
                                             size_t reason_cap);
void mi4_plugin_close(void *handle);

#endif
