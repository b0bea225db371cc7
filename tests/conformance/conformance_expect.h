/* What each backend must serve and how close it must come: the
 * expected-supported sets (one data table, conformance_expect.c) and the
 * tolerances derived from the precision each backend states
 * (moeint4_backend_precision). */
#ifndef MOEINT4_TESTS_CONFORMANCE_EXPECT_H
#define MOEINT4_TESTS_CONFORMANCE_EXPECT_H

#include "conformance_cases.h"
#include "moeint4.h"

/* 1 when `backend_name` must serve case `c` (an UNSUPPORTED answer then
 * fails the case); 0 when it may refuse it. Backends absent from the table
 * (third parties) must serve nothing. */
int conf_expected_supported(const char *backend_name, const conf_case *c);

/* The same for a layer and forward described by their parts (vLLM's
 * vector cases: identity map, no g_idx, router weight on the output). */
int conf_expected_supported_parts(const char *backend_name, moeint4_format format, int zero_offset,
                                  int group_size, moeint4_activation activation,
                                  moeint4_dtype dtype, moeint4_dtype scales_dtype);

/* Relative-L2 bound for backend `id`'s output in `dtype`, from the precision
 * it states (derivation in conformance_expect.c); a backend that states none
 * gets the bound of one that rounds everything to bf16. */
double conf_tolerance(moeint4_backend id, moeint4_dtype dtype);

/* One line saying the stated precision and the bound, e.g. for the summary. */
void conf_describe_tolerance(moeint4_backend id, moeint4_dtype dtype, char *text, size_t cap);

#endif
