/* See xpu_common.h. */
#include "xpu_common.h"

const char *const mi4_xpu_kernel_names[MI4_XPU_KERNEL_COUNT] = {
    "mi4_route",         "mi4_w13_gemm",         "mi4_w2_gemm",         "mi4_w13_gemv",
    "mi4_w2_gemv",       "mi4_w13_gemv_walk",    "mi4_w2_gemv_walk",    "mi4_w13_gemv_lanes",
    "mi4_w2_gemv_lanes", "mi4_w13_gemv_lanes2",  "mi4_w2_gemv_lanes2",  "mi4_w13_gemv_rows",
    "mi4_w2_gemv_rows",  "mi4_w13_gemm_zp",      "mi4_w2_gemm_zp",      "mi4_w13_gemv_zp",
    "mi4_w2_gemv_zp",    "mi4_w13_gemv_rows_zp", "mi4_w2_gemv_rows_zp", "mi4_gather_input",
    "mi4_combine",       "mi4_copy_out",         "mi4_record_merge",    "mi4_dnnl_gather",
    "mi4_dnnl_dequant",  "mi4_dnnl_activate",    "mi4_dnnl_scatter",    "mi4_dnnl_scales_t",
};
