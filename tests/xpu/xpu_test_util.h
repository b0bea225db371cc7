/* Helpers of the XPU tests: the OpenCL runtime on PoCL's CPU device (test
 * mode), buffers in and out, poison. */
#ifndef MOEINT4_TESTS_XPU_UTIL_H
#define MOEINT4_TESTS_XPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"
#include "xpu_runtime.h"

/* Creates the OpenCL runtime in test mode, or with XT_RUNTIME=level_zero
 * the Level Zero one (on the stand-in driver: fake_ze_loader.c); fails the
 * test when absent (these tests must run on CI machines with PoCL). */
mi4_xpu_runtime *xt_runtime(void);
/* 1 when XT_RUNTIME=level_zero */
int xt_level_zero(void);
/* Device copy of `bytes` host bytes (NULL host: poisoned with 0xff bytes). */
void *xt_upload(mi4_xpu_runtime *rt, const void *host, size_t bytes);
void xt_download(mi4_xpu_runtime *rt, void *host, const void *device, size_t bytes);
void xt_launch(mi4_xpu_runtime *rt, mi4_xpu_kernel kernel, size_t size0, size_t size1, int num_args,
               const mi4_xpu_arg *args);
/* Bound on |f32 sum - exact sum| of n terms whose magnitudes add to sum_abs. */
double xt_sum_error_bound(int n, double sum_abs);

#endif
