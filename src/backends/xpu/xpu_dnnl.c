/* oneDNN matmul, C API. Written against oneDNN 2.6 (Debian 12); the int4
 * path needs oneDNN >= 3.5 and is compiled only there (never built or run
 * here: see README.md). One primitive per shape; oneDNN's primitive cache
 * makes repeated shapes cheap. */
#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_ocl.h>

#include <stdlib.h>

#include "xpu_dnnl.h"
#include "xpu_common.h"

#define MI4_DNNL_3 (DNNL_VERSION_MAJOR >= 3)
#define MI4_DNNL_INT4                                                                              \
    (DNNL_VERSION_MAJOR > 3 || (DNNL_VERSION_MAJOR == 3 && DNNL_VERSION_MINOR >= 5))

struct mi4_xpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int is_gpu;
    int int4;          /* this engine takes int4 weights with grouped scales directly */
    cl_context cl_ctx; /* GPU only: SVM pointers are wrapped into buffers of it */
};

static void detect_int4(mi4_xpu_dnnl *d);

static moeint4_status dnnl_failed(char *err, size_t cap, const char *what, dnnl_status_t rc)
{
    return mi4_xpu_fail(err, cap,
                        rc == dnnl_out_of_memory ? MOEINT4_OUT_OF_MEMORY : MOEINT4_DEVICE_ERROR,
                        "oneDNN: %s returned %d", what, (int)rc);
}

moeint4_status mi4_xpu_dnnl_create_cpu(mi4_xpu_dnnl **out, char *err, size_t cap)
{
    mi4_xpu_dnnl *d = calloc(1, sizeof *d);
    if (!d)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY, "oneDNN: out of memory");
    dnnl_status_t rc = dnnl_engine_create(&d->engine, dnnl_cpu, 0);
    if (rc == dnnl_success)
        rc = dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags);
    if (rc != dnnl_success) {
        mi4_xpu_dnnl_destroy(d);
        return dnnl_failed(err, cap, "creating the CPU engine", rc);
    }
    *out = d;
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_xpu_dnnl_create_ocl(void *device, void *context, void *queue, mi4_xpu_dnnl **out,
                                       char *err, size_t cap)
{
    mi4_xpu_dnnl *d = calloc(1, sizeof *d);
    if (!d)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY, "oneDNN: out of memory");
    d->is_gpu = 1;
    d->cl_ctx = (cl_context)context;
    dnnl_status_t rc =
        dnnl_ocl_interop_engine_create(&d->engine, (cl_device_id)device, (cl_context)context);
    if (rc == dnnl_success)
        rc = dnnl_ocl_interop_stream_create(&d->stream, d->engine, (cl_command_queue)queue);
    if (rc != dnnl_success) {
        mi4_xpu_dnnl_destroy(d);
        return dnnl_failed(err, cap, "creating the OpenCL GPU engine", rc);
    }
    detect_int4(d);
    *out = d;
    return MOEINT4_SUCCESS;
}

void mi4_xpu_dnnl_destroy(mi4_xpu_dnnl *d)
{
    if (!d)
        return;
    if (d->stream)
        dnnl_stream_destroy(d->stream);
    if (d->engine)
        dnnl_engine_destroy(d->engine);
    free(d);
}

moeint4_dtype mi4_xpu_dnnl_dtype(const mi4_xpu_dnnl *d, moeint4_dtype activations)
{
    return d->is_gpu ? activations : MOEINT4_DTYPE_F32;
}

static dnnl_data_type_t dnnl_type(moeint4_dtype dtype)
{
    return dtype == MOEINT4_DTYPE_F16    ? dnnl_f16
           : dtype == MOEINT4_DTYPE_BF16 ? dnnl_bf16
                                         : dnnl_f32;
}

#if MI4_DNNL_3
typedef dnnl_memory_desc_t mi4_md;
typedef const_dnnl_memory_desc_t mi4_md_ref;
static dnnl_status_t make_md(mi4_md *md, int64_t rows, int64_t cols, dnnl_data_type_t type,
                             dnnl_format_tag_t tag)
{
    dnnl_dims_t dims = { rows, cols };
    return dnnl_memory_desc_create_with_tag(md, 2, dims, type, tag);
}
static mi4_md_ref md_ref(const mi4_md *md) { return *md; }
static void md_free(mi4_md md) { dnnl_memory_desc_destroy(md); }
static dnnl_status_t make_matmul(dnnl_primitive_desc_t *pd, dnnl_engine_t engine, const mi4_md *a,
                                 const mi4_md *b, const mi4_md *c, const_dnnl_primitive_attr_t attr)
{
    return dnnl_matmul_primitive_desc_create(pd, engine, *a, *b, NULL, *c, attr);
}
#else
typedef dnnl_memory_desc_t mi4_md;
typedef const dnnl_memory_desc_t *mi4_md_ref;
static dnnl_status_t make_md(mi4_md *md, int64_t rows, int64_t cols, dnnl_data_type_t type,
                             dnnl_format_tag_t tag)
{
    dnnl_dims_t dims = { rows, cols };
    return dnnl_memory_desc_init_by_tag(md, 2, dims, type, tag);
}
static mi4_md_ref md_ref(const mi4_md *md) { return md; }
static void md_free(mi4_md md) { (void)md; }
static dnnl_status_t make_matmul(dnnl_primitive_desc_t *pd, dnnl_engine_t engine, const mi4_md *a,
                                 const mi4_md *b, const mi4_md *c, const_dnnl_primitive_attr_t attr)
{
    dnnl_matmul_desc_t desc;
    dnnl_status_t rc = dnnl_matmul_desc_init(&desc, a, b, NULL, c);
    return rc == dnnl_success ? dnnl_primitive_desc_create(pd, &desc, attr, engine, NULL) : rc;
}
#endif

/* A dnnl memory over `ptr`: the pointer itself on the CPU engine, a buffer
 * wrapping the SVM allocation on the GPU engine (*wrapper released by the
 * caller after execution); from_host: ptr is host memory, copied in. */
static dnnl_status_t wrap(mi4_xpu_dnnl *d, mi4_md_ref md, void *ptr, int from_host,
                          dnnl_memory_t *mem, cl_mem *wrapper)
{
    *wrapper = NULL;
    if (!d->is_gpu)
        return dnnl_memory_create(mem, md, d->engine, ptr);
    cl_int rc;
    cl_mem_flags flags = from_host ? CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR
                                   : CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR;
    *wrapper = clCreateBuffer(d->cl_ctx, flags, dnnl_memory_desc_get_size(md), ptr, &rc);
    if (rc != CL_SUCCESS)
        return dnnl_runtime_error;
    return dnnl_ocl_interop_memory_create(mem, md, d->engine, dnnl_ocl_interop_buffer, *wrapper);
}

#define MAX_EXEC_ARGS 5

/* Creates the primitive, wraps every operand, executes, waits, cleans up.
 * Operands from index num_device_args on are host memory. */
static moeint4_status run_matmul(mi4_xpu_dnnl *d, const mi4_md *a_md, const mi4_md *b_md,
                                 const mi4_md *c_md, const_dnnl_primitive_attr_t attr, int num_args,
                                 int num_device_args, const int *arg_kinds,
                                 const mi4_md *const *mds, void *const *ptrs, char *err, size_t cap)
{
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_exec_arg_t args[MAX_EXEC_ARGS];
    cl_mem wrappers[MAX_EXEC_ARGS] = { 0 };
    int made = 0;
    dnnl_status_t rc = make_matmul(&pd, d->engine, a_md, b_md, c_md, attr);
    const char *what = "creating the matmul primitive descriptor";
    if (rc == dnnl_success) {
        rc = dnnl_primitive_create(&prim, pd);
        what = "creating the matmul primitive";
    }
    for (; made < num_args && rc == dnnl_success; ++made) {
        args[made].arg = arg_kinds[made];
        rc = wrap(d, md_ref(mds[made]), ptrs[made], made >= num_device_args, &args[made].memory,
                  &wrappers[made]);
        what = "wrapping an operand";
        if (rc != dnnl_success)
            break;
    }
    if (rc == dnnl_success) {
        rc = dnnl_primitive_execute(prim, d->stream, num_args, args);
        what = "executing the matmul";
    }
    if (rc == dnnl_success) {
        rc = dnnl_stream_wait(d->stream);
        what = "waiting for the stream";
    }
    for (int i = 0; i < made; ++i)
        dnnl_memory_destroy(args[i].memory);
    for (int i = 0; i < MAX_EXEC_ARGS; ++i)
        if (wrappers[i])
            clReleaseMemObject(wrappers[i]);
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return rc == dnnl_success ? MOEINT4_SUCCESS : dnnl_failed(err, cap, what, rc);
}

moeint4_status mi4_xpu_dnnl_matmul(mi4_xpu_dnnl *d, moeint4_dtype operands, int64_t M, int64_t N,
                                   int64_t K, const void *a, const void *b, void *c, char *err,
                                   size_t cap)
{
    mi4_md a_md, b_md, c_md;
    dnnl_data_type_t type = dnnl_type(operands);
    /* b is stored [N][K]: the K x N weights matrix in column-major ("ba") */
    if (make_md(&a_md, M, K, type, dnnl_ab) != dnnl_success ||
        make_md(&b_md, K, N, type, dnnl_ba) != dnnl_success ||
        make_md(&c_md, M, N, dnnl_f32, dnnl_ab) != dnnl_success)
        return mi4_xpu_fail(err, cap, MOEINT4_INTERNAL_ERROR, "oneDNN: bad matmul shape");
    const int kinds[3] = { DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST };
    const mi4_md *mds[3] = { &a_md, &b_md, &c_md };
    void *ptrs[3] = { (void *)a, (void *)b, c };
    moeint4_status status =
        run_matmul(d, &a_md, &b_md, &c_md, NULL, 3, 3, kinds, mds, ptrs, err, cap);
    md_free(a_md), md_free(b_md), md_free(c_md);
    return status;
}

int mi4_xpu_dnnl_has_int4(const mi4_xpu_dnnl *d) { return d->int4; }

#if MI4_DNNL_INT4
static int int4_matmul_accepted(mi4_xpu_dnnl *d);
#endif

/* Decided once per engine at run time: the oneDNN loaded (dnnl_version(),
 * not the headers) must be >= 3.5, this build must have its int4 API, and
 * the engine must accept a small int4 matmul with grouped scales. Debian's
 * oneDNN 2.6 answers no at the first step. */
static void detect_int4(mi4_xpu_dnnl *d)
{
    const dnnl_version_t *v = dnnl_version();
    int new_enough = v && (v->major > 3 || (v->major == 3 && v->minor >= 5));
#if MI4_DNNL_INT4
    d->int4 = d->is_gpu && new_enough && int4_matmul_accepted(d);
#else
    (void)new_enough;
    d->int4 = 0;
#endif
}

#if MI4_DNNL_INT4

/* Never compiled on Debian 12 (oneDNN 2.6); written to oneDNN 3.5's
 * documented weight-decompression API (signatures checked against its
 * dnnl.h): u4 weights stored [N][K/2] (the "ba" K x N matrix), zero point 8
 * (uint4b8), f16 scales grouped along K in [K/group][N] order (oneDNN takes
 * no layout for scales), fpmath f16/bf16 applied to integer weights. Whether
 * oneDNN's GPU matmul takes u4 weights in "ba" is unverified. */
moeint4_status mi4_xpu_dnnl_matmul_int4(mi4_xpu_dnnl *d, moeint4_dtype operands, int64_t M,
                                        int64_t N, int64_t K, int group_size, const void *a,
                                        const void *packed, const void *scales, void *c, char *err,
                                        size_t cap)
{
    static const int32_t zero_point = 8;
    dnnl_data_type_t src_type = dnnl_type(operands);
    dnnl_fpmath_mode_t math = src_type == dnnl_bf16 ? dnnl_fpmath_mode_bf16 : dnnl_fpmath_mode_f16;
    mi4_md a_md, b_md, c_md, s_md, z_md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_dims_t groups = { group_size, 1 };
    if (make_md(&a_md, M, K, src_type, dnnl_ab) != dnnl_success ||
        make_md(&b_md, K, N, dnnl_u4, dnnl_ba) != dnnl_success ||
        make_md(&c_md, M, N, dnnl_f32, dnnl_ab) != dnnl_success ||
        make_md(&s_md, K / group_size, N, dnnl_f16, dnnl_ab) != dnnl_success ||
        make_md(&z_md, 1, 1, dnnl_s32, dnnl_ab) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success ||
        dnnl_primitive_attr_set_fpmath_mode_v2(attr, math, 1) != dnnl_success ||
        dnnl_primitive_attr_set_scales(attr, DNNL_ARG_WEIGHTS, 3, 2, groups, dnnl_f16) !=
            dnnl_success ||
        dnnl_primitive_attr_set_zero_points_mask(attr, DNNL_ARG_WEIGHTS, 0) != dnnl_success) {
        dnnl_primitive_attr_destroy(attr);
        return mi4_xpu_fail(err, cap, MOEINT4_UNSUPPORTED,
                            "oneDNN: int4 matmul attributes refused");
    }
    const int kinds[5] = { DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST,
                           DNNL_ARG_ATTR_SCALES | DNNL_ARG_WEIGHTS,
                           DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS };
    const mi4_md *mds[5] = { &a_md, &b_md, &c_md, &s_md, &z_md };
    void *ptrs[5] = { (void *)a, (void *)packed, c, (void *)scales, (void *)&zero_point };
    moeint4_status status =
        run_matmul(d, &a_md, &b_md, &c_md, attr, 5, 4, kinds, mds, ptrs, err, cap);
    dnnl_primitive_attr_destroy(attr);
    md_free(a_md), md_free(b_md), md_free(c_md), md_free(s_md), md_free(z_md);
    return status;
}

/* A 32 x 64 x 32 int4 matmul primitive descriptor: does this engine take it? */
static int int4_matmul_accepted(mi4_xpu_dnnl *d)
{
    mi4_md a_md, b_md, c_md;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_dims_t groups = { 32, 1 };
    int ok =
        make_md(&a_md, 32, 64, dnnl_f16, dnnl_ab) == dnnl_success &&
        make_md(&b_md, 64, 32, dnnl_u4, dnnl_ba) == dnnl_success &&
        make_md(&c_md, 32, 32, dnnl_f32, dnnl_ab) == dnnl_success &&
        dnnl_primitive_attr_create(&attr) == dnnl_success &&
        dnnl_primitive_attr_set_fpmath_mode_v2(attr, dnnl_fpmath_mode_f16, 1) == dnnl_success &&
        dnnl_primitive_attr_set_scales(attr, DNNL_ARG_WEIGHTS, 3, 2, groups, dnnl_f16) ==
            dnnl_success &&
        dnnl_matmul_primitive_desc_create(&pd, d->engine, a_md, b_md, NULL, c_md, attr) ==
            dnnl_success;
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    md_free(a_md), md_free(b_md), md_free(c_md);
    return ok;
}
#else

moeint4_status mi4_xpu_dnnl_matmul_int4(mi4_xpu_dnnl *d, moeint4_dtype operands, int64_t M,
                                        int64_t N, int64_t K, int group_size, const void *a,
                                        const void *packed, const void *scales, void *c, char *err,
                                        size_t cap)
{
    (void)d, (void)operands, (void)M, (void)N, (void)K, (void)group_size, (void)a, (void)packed,
        (void)scales, (void)c;
    return mi4_xpu_fail(err, cap, MOEINT4_UNSUPPORTED,
                        "oneDNN %d.%d has no int4 weights (needs >= 3.5)", DNNL_VERSION_MAJOR,
                        DNNL_VERSION_MINOR);
}
#endif
