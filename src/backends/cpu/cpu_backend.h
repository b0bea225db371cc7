/* The CPU backend's table (built into libmoeint4.so). */
#ifndef MOEINT4_BACKENDS_CPU_CPU_BACKEND_H
#define MOEINT4_BACKENDS_CPU_CPU_BACKEND_H

#include "moeint4.h"

const moeint4_backend_iface *mi4_cpu_backend_iface(void);

#endif
