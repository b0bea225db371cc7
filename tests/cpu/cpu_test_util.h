/* Helpers shared by the CPU backend tests. */
#ifndef MOEINT4_TESTS_CPU_TEST_UTIL_H
#define MOEINT4_TESTS_CPU_TEST_UTIL_H

#include <stddef.h>

#include "backends/cpu/cpu_kernels.h"

#define CPU_TEST_MAX_TABLES 7

/* Every kernel table this build and machine can run, in this order:
 * scalar, avx2, avx512, avx512bf16-novbmi2, avx512bf16, amx, amx-f16. */
int cpu_test_kernel_tables(const mi4_cpu_kernels **tables, int capacity);

/* 1 when the two buffers hold the same bits. */
int cpu_test_same_bits(const void *a, const void *b, size_t bytes);

#endif
