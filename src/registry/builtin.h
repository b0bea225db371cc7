/* Backends linked into libmoeint4.so itself (no plugin to load). The registry
 * lists them first; each table is defined by its own folder above the
 * registry (src/backends/cpu/cpu_backend.c) and declared here, so that the
 * registry includes nothing from the layers above it. */
#ifndef MOEINT4_REGISTRY_BUILTIN_H
#define MOEINT4_REGISTRY_BUILTIN_H

#include "moeint4_backend.h"

const moeint4_backend_iface *mi4_cpu_backend_iface(void);

#endif
