#include "xpu_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

int xt_level_zero(void)
{
    const char *runtime = getenv("XT_RUNTIME");
    return runtime && strcmp(runtime, "level_zero") == 0;
}

mi4_xpu_runtime *xt_runtime(void)
{
    char err[256] = "";
    mi4_xpu_runtime *rt = NULL;
    moeint4_context_options options = { 0 };
    options.struct_size = sizeof options;
    if (xt_level_zero()) { /* the stand-in driver's one "GPU" (fake_ze_loader.c) */
        if (mi4_xpu_ze_create(&options, &rt, err, sizeof err) != MOEINT4_SUCCESS)
            fail_msg("Level Zero runtime on the stand-in driver: %s", err);
        return rt;
    }
    setenv("MOEINT4_XPU_TEST_CPU_DEVICE", "1", 1);
    moeint4_status st = mi4_xpu_ocl_create(&options, &rt, err, sizeof err);
    if (st != MOEINT4_SUCCESS)
        fail_msg("OpenCL test-mode runtime: %s", err);
    return rt;
}

void *xt_upload(mi4_xpu_runtime *rt, const void *host, size_t bytes)
{
    char err[256] = "";
    void *device = NULL;
    assert_int_equal(rt->ops->alloc(rt, bytes, &device, err, sizeof err), MOEINT4_SUCCESS);
    void *staging = malloc(bytes ? bytes : 1);
    assert_non_null(staging);
    if (host)
        memcpy(staging, host, bytes);
    else
        memset(staging, 0xff, bytes); /* NaN bit patterns for f32/f16/bf16, -1 for ints */
    assert_int_equal(rt->ops->copy(rt, NULL, device, staging, bytes, err, sizeof err),
                     MOEINT4_SUCCESS);
    free(staging);
    return device;
}

void xt_download(mi4_xpu_runtime *rt, void *host, const void *device, size_t bytes)
{
    char err[256] = "";
    assert_int_equal(rt->ops->copy(rt, NULL, host, device, bytes, err, sizeof err),
                     MOEINT4_SUCCESS);
}

void xt_launch(mi4_xpu_runtime *rt, mi4_xpu_kernel kernel, size_t size0, size_t size1, int num_args,
               const mi4_xpu_arg *args)
{
    char err[256] = "";
    size_t lanes = MI4_XPU_GROUP; /* what routing and GEMMs require; any size serves the rest */
    size_t local[2] = { lanes, 1 };
    size_t global[2] = { (size0 + lanes - 1) / lanes * lanes, size1 };
    moeint4_status st =
        rt->ops->launch(rt, NULL, kernel, global, local, num_args, args, err, sizeof err);
    if (st == MOEINT4_SUCCESS)
        st = rt->ops->wait(rt, NULL, err, sizeof err);
    if (st != MOEINT4_SUCCESS)
        fail_msg("%s: %s", mi4_xpu_kernel_names[kernel], err);
}

double xt_sum_error_bound(int n, double sum_abs)
{
    double u = 1.0 / 16777216.0; /* 2^-24 */
    double gamma = n * u / (1.0 - n * u);
    return 2.0 * gamma * sum_abs + 1e-30;
}
