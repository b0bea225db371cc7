/* A look at a plugin file before dlopen maps it: a truncated shared object
 * makes the loader touch pages past the end of the file (SIGBUS), so the
 * file must be whole before it is handed over. */
#ifndef MOEINT4_REGISTRY_PLUGIN_ELF_H
#define MOEINT4_REGISTRY_PLUGIN_ELF_H

#include <stddef.h>

/* 1 when `path` is an ELF shared object of this machine's class whose
 * program headers and loadable segments lie inside the file and whose
 * segments and dynamic table point only into loaded memory; else 0 with
 * the reason. */
int mi4_plugin_file_is_whole(const char *path, char *reason, size_t reason_cap);

#endif
