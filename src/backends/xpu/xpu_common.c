/* See xpu_common.h. */
#include "xpu_common.h"

#include <stdarg.h>
#include <stdio.h>

const char *const mi4_xpu_kernel_names[MI4_XPU_KERNEL_COUNT] = {
    "mi4_route_init",  "mi4_route_count",   "mi4_route_scan",    "mi4_route_scatter",
    "mi4_w13_gemm",    "mi4_w2_gemm",       "mi4_combine",       "mi4_copy_out",
    "mi4_dnnl_gather", "mi4_dnnl_dequant",  "mi4_dnnl_activate", "mi4_dnnl_scatter",
    "mi4_dnnl_scales_t",
};

moeint4_status mi4_xpu_fail(char *err, size_t cap, moeint4_status status, const char *fmt, ...)
{
    if (err && cap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return status;
}
