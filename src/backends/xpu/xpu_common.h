/* The bottom of the XPU backend: the error helper and the kernel table that
 * every other XPU file uses. Depends on nothing else of the backend, so the
 * runtimes, oneDNN glue and forward sit above it without loops. */
#ifndef MOEINT4_BACKENDS_XPU_XPU_COMMON_H
#define MOEINT4_BACKENDS_XPU_XPU_COMMON_H

#include <stddef.h>

#include "moeint4_backend.h"

/* Kernels of the kernels/ folder, in the order of mi4_xpu_kernel_names. */
typedef enum mi4_xpu_kernel {
    MI4_XPU_ROUTE,
    MI4_XPU_W13_GEMM,
    MI4_XPU_W2_GEMM,
    MI4_XPU_W13_GEMV,
    MI4_XPU_W2_GEMV,
    MI4_XPU_W13_GEMV_WALK,
    MI4_XPU_W2_GEMV_WALK,
    MI4_XPU_W13_GEMV_LANES,
    MI4_XPU_W2_GEMV_LANES,
    MI4_XPU_W13_GEMV_LANES2,
    MI4_XPU_W2_GEMV_LANES2,
    MI4_XPU_W13_GEMV_ROWS,
    MI4_XPU_W2_GEMV_ROWS,
    MI4_XPU_W13_GEMM_ZP, /* the same with zero points: one more argument, the zeros */
    MI4_XPU_W2_GEMM_ZP,
    MI4_XPU_W13_GEMV_ZP,
    MI4_XPU_W2_GEMV_ZP,
    MI4_XPU_W13_GEMV_ROWS_ZP,
    MI4_XPU_W2_GEMV_ROWS_ZP,
    MI4_XPU_GATHER_INPUT,
    MI4_XPU_COMBINE,
    MI4_XPU_COPY_OUT,
    MI4_XPU_RECORD_MERGE,
    MI4_XPU_DNNL_GATHER,
    MI4_XPU_DNNL_DEQUANT,
    MI4_XPU_DNNL_ACTIVATE,
    MI4_XPU_DNNL_SCATTER,
    MI4_XPU_DNNL_SCALES_T,
    MI4_XPU_KERNEL_COUNT
} mi4_xpu_kernel;

extern const char *const mi4_xpu_kernel_names[MI4_XPU_KERNEL_COUNT];

/* err/cap convention of the backend interface; returns `status` (the
 * plugin kit's helper of moeint4_backend.h). */
#define mi4_xpu_fail moeint4_backend_fail

#endif
