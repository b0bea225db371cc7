/* oneDNN matmul for experts that receive many tokens (OpenCL runtime only).
 * On an Intel GPU the engine is built from the backend's own OpenCL context
 * and queue and multiplies matrices in the activations' dtype (f16, bf16 or
 * f32); the tests (and PoCL test mode) use oneDNN's CPU engine with f32
 * matrices: the same calls, another engine kind and dtype. */
#ifndef MOEINT4_BACKENDS_XPU_XPU_DNNL_H
#define MOEINT4_BACKENDS_XPU_XPU_DNNL_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

typedef struct mi4_xpu_dnnl mi4_xpu_dnnl;

/* OpenCL GPU engine on (cl_device_id, cl_context, cl_command_queue). */
moeint4_status mi4_xpu_dnnl_create_ocl(void *device, void *context, void *queue, mi4_xpu_dnnl **out,
                                       char *err, size_t cap);
/* CPU engine (pointers are host pointers). */
moeint4_status mi4_xpu_dnnl_create_cpu(mi4_xpu_dnnl **out, char *err, size_t cap);
void mi4_xpu_dnnl_destroy(mi4_xpu_dnnl *dnnl);

/* The matmul operand dtype for activations of `activations`: on the GPU the
 * activations' own dtype (bf16 stays bf16: its range exceeds f16's), on the
 * CPU engine f32. */
moeint4_dtype mi4_xpu_dnnl_dtype(const mi4_xpu_dnnl *dnnl, moeint4_dtype activations);

/* c[M][N] (f32) = a[M][K] . b[N][K]^T, a and b in `operands`. The pointers
 * are SVM pointers on the GPU engine, host pointers on the CPU engine. Waits
 * for completion. */
moeint4_status mi4_xpu_dnnl_matmul(mi4_xpu_dnnl *dnnl, moeint4_dtype operands, int64_t M, int64_t N,
                                   int64_t K, const void *a, const void *b, void *c, char *err,
                                   size_t cap);

/* 1 when this build can multiply int4 weights with grouped scales directly
 * (oneDNN >= 3.5 on a GPU engine); then mi4_xpu_dnnl_matmul_int4 replaces the
 * dequantize-then-matmul pair. */
int mi4_xpu_dnnl_has_int4(const mi4_xpu_dnnl *dnnl);
/* c[M][N] = a[M][K] (f16 or bf16: `operands`) . W^T, W = (packed codes - 8)
 * * scales, packed [N][K/2] (low nibble = even k), scales [K/group][N] f16
 * (oneDNN's logical order; the backend transposes its [N][K/group]). */
moeint4_status mi4_xpu_dnnl_matmul_int4(mi4_xpu_dnnl *dnnl, moeint4_dtype operands, int64_t M,
                                        int64_t N, int64_t K, int group_size, const void *a,
                                        const void *packed, const void *scales, void *c, char *err,
                                        size_t cap);

#endif
