/* The OpenCL runtime: Intel GPUs (vendor 0x8086, device type GPU) through
 * Intel's OpenCL driver; PoCL's CPU device only in the explicit test mode
 * (MOEINT4_XPU_TEST_CPU_DEVICE=1). Device memory is coarse-grained SVM
 * (clSVMAlloc), so device pointers are real addresses on both drivers. The
 * program is built from the embedded OpenCL C text (PoCL has no SPIR-V
 * ingestion, so one path serves both). */
#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xpu_runtime.h"

#define INTEL_VENDOR_ID 0x8086u
#define MAX_PLATFORMS 16
#define MAX_DEVICES 16

/* MOEINT4_XPU_PROFILE=1 (bench only): the runtime's own queue records an
 * event per launch; each wait adds the device times per kernel, and destroy
 * prints them to stderr. Launches on a caller's queue are not timed. */
#define MAX_PENDING 256

typedef struct ocl_profile {
    cl_event pending[MAX_PENDING];
    mi4_xpu_kernel pending_kernel[MAX_PENDING];
    int num_pending;
    double total_us[MI4_XPU_KERNEL_COUNT], min_us[MI4_XPU_KERNEL_COUNT];
    long count[MI4_XPU_KERNEL_COUNT];
} ocl_profile;

typedef struct ocl_runtime {
    mi4_xpu_runtime base;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    cl_kernel kernels[MI4_XPU_KERNEL_COUNT];
    ocl_profile *profile; /* NULL unless MOEINT4_XPU_PROFILE=1 */
} ocl_runtime;

/* Test selectors (read where a device is chosen: probe and context
 * creation): MOEINT4_XPU_TEST_CPU_DEVICE=1 accepts PoCL's CPU device,
 * MOEINT4_XPU_TEST_ANY_GPU=1 any OpenCL GPU with coarse-grained SVM (e.g.
 * NVIDIA's), so the kernels run on a real GPU that is not Intel's. */
enum { TEST_CPU = 1, TEST_ANY_GPU = 2 };

static int env_is_1(const char *name)
{
    const char *value = getenv(name);
    return value && strcmp(value, "1") == 0;
}

static int test_modes(void)
{
    return (env_is_1("MOEINT4_XPU_TEST_CPU_DEVICE") ? TEST_CPU : 0) |
           (env_is_1("MOEINT4_XPU_TEST_ANY_GPU") ? TEST_ANY_GPU : 0);
}

static void append(char *buf, size_t cap, const char *text)
{
    size_t used = strlen(buf);
    if (used + 1 < cap)
        snprintf(buf + used, cap - used, "%s", text);
}

static const char *device_type_name(cl_device_type type)
{
    if (type & CL_DEVICE_TYPE_GPU)
        return "gpu";
    if (type & CL_DEVICE_TYPE_CPU)
        return "cpu";
    if (type & CL_DEVICE_TYPE_ACCELERATOR)
        return "accelerator";
    return "other";
}

/* Is this device one the backend may use? Writes a short tag into `seen`. */
static int device_acceptable(cl_platform_id platform, cl_device_id device, int test_mode,
                             char *seen, size_t seen_cap)
{
    char platform_name[128] = "";
    cl_device_type type = 0;
    cl_uint vendor = 0;
    cl_device_svm_capabilities svm = 0;
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platform_name, platform_name, NULL);
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    clGetDeviceInfo(device, CL_DEVICE_VENDOR_ID, sizeof vendor, &vendor, NULL);
    if (clGetDeviceInfo(device, CL_DEVICE_SVM_CAPABILITIES, sizeof svm, &svm, NULL) != CL_SUCCESS)
        svm = 0;
    snprintf(seen, seen_cap, "%s/%s%s", platform_name, device_type_name(type),
             (svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) ? "" : " without SVM");
    if (!(svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER))
        return 0;
    if ((type & CL_DEVICE_TYPE_GPU) && (vendor == INTEL_VENDOR_ID || (test_mode & TEST_ANY_GPU)))
        return 1;
    return (test_mode & TEST_CPU) && (type & CL_DEVICE_TYPE_CPU) &&
           strstr(platform_name, "Portable Computing Language") != NULL;
}

/* Finds the device_index-th acceptable device; on failure fills `reason`. */
static int find_device(int device_index, cl_device_id *found, int *is_cpu, char *reason, size_t cap)
{
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint num_platforms = 0;
    int test_mode = test_modes();
    cl_int rc = clGetPlatformIDs(MAX_PLATFORMS, platforms, &num_platforms);
    if (rc != CL_SUCCESS || num_platforms == 0) {
        snprintf(reason, cap, "OpenCL: no platform (clGetPlatformIDs returned %d)", (int)rc);
        return 0;
    }
    char seen_list[192] = "";
    int accepted = 0;
    for (cl_uint p = 0; p < num_platforms && p < MAX_PLATFORMS; ++p) {
        cl_device_id devices[MAX_DEVICES];
        cl_uint num_devices = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devices, &num_devices) !=
            CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < num_devices && d < MAX_DEVICES; ++d) {
            char seen[96];
            if (device_acceptable(platforms[p], devices[d], test_mode, seen, sizeof seen)) {
                if (accepted++ == device_index) {
                    cl_device_type type = 0;
                    clGetDeviceInfo(devices[d], CL_DEVICE_TYPE, sizeof type, &type, NULL);
                    *found = devices[d];
                    *is_cpu = (type & CL_DEVICE_TYPE_GPU) == 0;
                    return 1;
                }
            }
            if (seen_list[0])
                append(seen_list, sizeof seen_list, ", ");
            append(seen_list, sizeof seen_list, seen);
        }
    }
    if (accepted > 0)
        snprintf(reason, cap, "OpenCL: device %d requested but only %d usable device(s)",
                 device_index, accepted);
    else
        snprintf(reason, cap, "OpenCL: no Intel GPU platform (found: %s)%s",
                 seen_list[0] ? seen_list : "no devices",
                 (test_mode & TEST_CPU)
                     ? ""
                     : "; MOEINT4_XPU_TEST_CPU_DEVICE=1 accepts PoCL's CPU device");
    return 0;
}

int mi4_xpu_ocl_probe(int device_index, char *reason, size_t cap)
{
    cl_device_id device;
    int is_cpu;
    return find_device(device_index, &device, &is_cpu, reason, cap);
}

static ocl_runtime *as_ocl(mi4_xpu_runtime *rt) { return (ocl_runtime *)rt; }

static cl_command_queue queue_or_default(ocl_runtime *rt, void *queue)
{
    return queue ? (cl_command_queue)queue : rt->queue;
}

static moeint4_status ocl_alloc(mi4_xpu_runtime *base, size_t bytes, void **ptr, char *err,
                                size_t cap)
{
    ocl_runtime *rt = as_ocl(base);
    void *p = clSVMAlloc(rt->context, CL_MEM_READ_WRITE, bytes ? bytes : 1, 0);
    if (!p)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY,
                            "OpenCL: clSVMAlloc of %zu bytes failed", bytes);
    *ptr = p;
    return MOEINT4_SUCCESS;
}

static void ocl_free(mi4_xpu_runtime *base, void *ptr)
{
    if (ptr)
        clSVMFree(as_ocl(base)->context, ptr);
}

static moeint4_status ocl_copy(mi4_xpu_runtime *base, void *queue, void *dst, const void *src,
                               size_t bytes, char *err, size_t cap)
{
    ocl_runtime *rt = as_ocl(base);
    if (bytes == 0)
        return MOEINT4_SUCCESS;
    cl_int rc =
        clEnqueueSVMMemcpy(queue_or_default(rt, queue), CL_TRUE, dst, src, bytes, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "OpenCL: clEnqueueSVMMemcpy of %zu bytes returned %d", bytes, (int)rc);
    return MOEINT4_SUCCESS;
}

static void profile_collect(ocl_runtime *rt)
{
    ocl_profile *p = rt->profile;
    for (int i = 0; p && i < p->num_pending; ++i) {
        cl_ulong start = 0, end = 0;
        clGetEventProfilingInfo(p->pending[i], CL_PROFILING_COMMAND_START, sizeof start, &start,
                                NULL);
        clGetEventProfilingInfo(p->pending[i], CL_PROFILING_COMMAND_END, sizeof end, &end, NULL);
        clReleaseEvent(p->pending[i]);
        mi4_xpu_kernel k = p->pending_kernel[i];
        double us = (double)(end - start) * 1e-3;
        p->total_us[k] += us;
        if (p->count[k] == 0 || us < p->min_us[k])
            p->min_us[k] = us;
        p->count[k]++;
    }
    if (p)
        p->num_pending = 0;
}

static void profile_print(ocl_runtime *rt)
{
    ocl_profile *p = rt->profile;
    fprintf(stderr, "xpu profile (%s): kernel, launches, mean us, min us\n", rt->base.device_name);
    for (int k = 0; k < MI4_XPU_KERNEL_COUNT; ++k)
        if (p->count[k] > 0)
            fprintf(stderr, "xpu profile: %-18s %8ld %10.2f %10.2f\n", mi4_xpu_kernel_names[k],
                    p->count[k], p->total_us[k] / (double)p->count[k], p->min_us[k]);
}

static moeint4_status ocl_launch(mi4_xpu_runtime *base, void *queue, mi4_xpu_kernel which,
                                 const size_t global[2], const size_t local[2], int num_args,
                                 const mi4_xpu_arg *args, char *err, size_t cap)
{
    ocl_runtime *rt = as_ocl(base);
    cl_kernel kernel = rt->kernels[which];
    for (int i = 0; i < num_args; ++i) {
        cl_int rc = args[i].is_pointer
                        ? clSetKernelArgSVMPointer(kernel, (cl_uint)i, args[i].value)
                        : clSetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (rc != CL_SUCCESS)
            return mi4_xpu_fail(err, cap, MOEINT4_INTERNAL_ERROR,
                                "OpenCL: setting argument %d of %s returned %d", i,
                                mi4_xpu_kernel_names[which], (int)rc);
    }
    int timed = rt->profile && !queue;
    if (timed && rt->profile->num_pending == MAX_PENDING) {
        clFinish(rt->queue);
        profile_collect(rt);
    }
    cl_event *event = timed ? &rt->profile->pending[rt->profile->num_pending] : NULL;
    cl_int rc = clEnqueueNDRangeKernel(queue_or_default(rt, queue), kernel, 2, NULL, global, local,
                                       0, NULL, event);
    if (timed && rc == CL_SUCCESS)
        rt->profile->pending_kernel[rt->profile->num_pending++] = which;
    if (rc != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "OpenCL: launching %s (%zu x %zu) returned %d",
                            mi4_xpu_kernel_names[which], global[0], global[1], (int)rc);
    return MOEINT4_SUCCESS;
}

static moeint4_status ocl_wait(mi4_xpu_runtime *base, void *queue, char *err, size_t cap)
{
    cl_int rc = clFinish(queue_or_default(as_ocl(base), queue));
    if (!queue)
        profile_collect(as_ocl(base));
    if (rc != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR, "OpenCL: clFinish returned %d",
                            (int)rc);
    return MOEINT4_SUCCESS;
}

/* The kernels rely on the queue's order (no events between launches). */
static moeint4_status ocl_check_queue(mi4_xpu_runtime *base, void *queue, char *err, size_t cap)
{
    cl_context owner = NULL;
    cl_command_queue_properties props = 0;
    if (!queue)
        return MOEINT4_SUCCESS;
    if (clGetCommandQueueInfo((cl_command_queue)queue, CL_QUEUE_CONTEXT, sizeof owner, &owner,
                              NULL) != CL_SUCCESS ||
        owner != as_ocl(base)->context)
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "stream is not a cl_command_queue of the backend's OpenCL context");
    if (clGetCommandQueueInfo((cl_command_queue)queue, CL_QUEUE_PROPERTIES, sizeof props, &props,
                              NULL) != CL_SUCCESS ||
        (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE))
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "stream must be an in-order cl_command_queue");
    return MOEINT4_SUCCESS;
}

static void ocl_destroy(mi4_xpu_runtime *base)
{
    ocl_runtime *rt = as_ocl(base);
    if (!rt)
        return;
    if (rt->profile) {
        if (rt->queue)
            clFinish(rt->queue);
        profile_collect(rt);
        profile_print(rt);
        free(rt->profile);
    }
    for (int i = 0; i < MI4_XPU_KERNEL_COUNT; ++i)
        if (rt->kernels[i])
            clReleaseKernel(rt->kernels[i]);
    if (rt->program)
        clReleaseProgram(rt->program);
    if (rt->queue)
        clReleaseCommandQueue(rt->queue);
    if (rt->context)
        clReleaseContext(rt->context);
    free(rt);
}

static const mi4_xpu_runtime_ops ocl_ops = {
    ocl_alloc, ocl_free, ocl_copy, ocl_launch, ocl_wait, ocl_check_queue, ocl_destroy,
};

static moeint4_status create_kernels(ocl_runtime *rt, char *err, size_t cap)
{
    for (int i = 0; i < MI4_XPU_KERNEL_COUNT; ++i) {
        cl_int rc;
        rt->kernels[i] = clCreateKernel(rt->program, mi4_xpu_kernel_names[i], &rc);
        if (rc != CL_SUCCESS)
            return mi4_xpu_fail(err, cap, MOEINT4_INTERNAL_ERROR, "OpenCL: kernel %s missing (%d)",
                                mi4_xpu_kernel_names[i], (int)rc);
    }
    return MOEINT4_SUCCESS;
}

/* An Intel GPU: the embedded ocloc binary the driver accepts for this
 * device, as Intel's own libraries ship theirs (the driver refuses a binary
 * of another target, and the next one is tried). */
static int load_aot_binary(ocl_runtime *rt)
{
    cl_uint vendor = 0;
    cl_device_type type = 0;
    clGetDeviceInfo(rt->device, CL_DEVICE_VENDOR_ID, sizeof vendor, &vendor, NULL);
    clGetDeviceInfo(rt->device, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    if (vendor != INTEL_VENDOR_ID || !(type & CL_DEVICE_TYPE_GPU))
        return 0;
    for (int i = 0; i < mi4_xpu_aot_count; ++i) {
        const unsigned char *bytes = mi4_xpu_aot_binaries[i];
        size_t size = mi4_xpu_aot_sizes[i];
        cl_int rc, binary_status;
        cl_program program = clCreateProgramWithBinary(rt->context, 1, &rt->device, &size, &bytes,
                                                       &binary_status, &rc);
        if (rc == CL_SUCCESS && binary_status == CL_SUCCESS &&
            clBuildProgram(program, 1, &rt->device, "", NULL, NULL) == CL_SUCCESS) {
            rt->program = program;
            snprintf(rt->base.kernels_from, sizeof rt->base.kernels_from, "ocloc binary for %s",
                     mi4_xpu_aot_targets[i]);
            return 1;
        }
        if (program)
            clReleaseProgram(program);
    }
    return 0;
}

/* Bench only (MOEINT4_XPU_DUMP_PROGRAM=path): the driver's binary of the
 * program built from text (PTX on NVIDIA's driver), for ptxas / cuobjdump. */
static void dump_program(cl_program program, const char *path)
{
    size_t size = 0;
    if (!path || !*path ||
        clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) !=
            CL_SUCCESS ||
        size == 0)
        return;
    unsigned char *binary = malloc(size);
    FILE *file = binary ? fopen(path, "wb") : NULL;
    if (file &&
        clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof binary, &binary, NULL) == CL_SUCCESS)
        fwrite(binary, 1, size, file);
    if (file)
        fclose(file);
    free(binary);
}

static moeint4_status build_program(ocl_runtime *rt, char *err, size_t cap)
{
    const char *text = mi4_xpu_kernel_source;
    cl_int rc = CL_SUCCESS;
    if (load_aot_binary(rt))
        return create_kernels(rt, err, cap);
    /* bench only: e.g. "-DMI4_AHEAD=8" to compare kernel variants in one run */
    const char *options = getenv("MOEINT4_XPU_BUILD_OPTIONS");
    snprintf(rt->base.kernels_from, sizeof rt->base.kernels_from, "OpenCL C text%s%.130s",
             options && *options ? " built with " : "", options ? options : "");
    rt->program = clCreateProgramWithSource(rt->context, 1, &text, NULL, &rc);
    if (rc != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "OpenCL: clCreateProgramWithSource returned %d", (int)rc);
    rc = clBuildProgram(rt->program, 1, &rt->device, options ? options : "", NULL, NULL);
    if (rc != CL_SUCCESS) {
        char log[256] = "";
        clGetProgramBuildInfo(rt->program, rt->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log,
                              NULL);
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "OpenCL: building the kernels returned %d: %s", (int)rc, log);
    }
    dump_program(rt->program, getenv("MOEINT4_XPU_DUMP_PROGRAM"));
    return create_kernels(rt, err, cap);
}

/* The caller's cl_context / cl_device_id / cl_command_queue (retained, so
 * the caller may release its references); the device must pass the same
 * acceptance test as an enumerated one. */
static moeint4_status adopt_native(ocl_runtime *rt, const moeint4_context_options *o, char *err,
                                   size_t cap)
{
    cl_platform_id platform = NULL;
    cl_device_type type = 0;
    char seen[96];
    rt->device = (cl_device_id)o->native_device;
    if (clGetDeviceInfo(rt->device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL) !=
            CL_SUCCESS ||
        clGetDeviceInfo(rt->device, CL_DEVICE_TYPE, sizeof type, &type, NULL) != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "native_device is not an OpenCL cl_device_id");
    if (!device_acceptable(platform, rt->device, test_modes(), seen, sizeof seen))
        return mi4_xpu_fail(err, cap, MOEINT4_BACKEND_UNAVAILABLE,
                            "native_device (%s) is not an Intel GPU with SVM", seen);
    rt->base.is_test_cpu_device = (type & CL_DEVICE_TYPE_GPU) == 0;
    rt->context = (cl_context)o->native_context;
    if (clRetainContext(rt->context) != CL_SUCCESS) {
        rt->context = NULL;
        return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                            "native_context is not an OpenCL cl_context");
    }
    cl_int rc = CL_SUCCESS;
    if (o->native_queue) {
        rt->queue = (cl_command_queue)o->native_queue;
        if (clRetainCommandQueue(rt->queue) != CL_SUCCESS) {
            rt->queue = NULL;
            return mi4_xpu_fail(err, cap, MOEINT4_INVALID_ARGUMENT,
                                "native_queue is not an OpenCL cl_command_queue");
        }
        return ocl_check_queue(&rt->base, rt->queue, err, cap);
    }
    rt->queue = clCreateCommandQueueWithProperties(rt->context, rt->device, NULL, &rc);
    if (rc != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "OpenCL: creating a queue on native_context returned %d", (int)rc);
    return MOEINT4_SUCCESS;
}

static moeint4_status create_own(ocl_runtime *rt, int device_index, char *err, size_t cap)
{
    char reason[256];
    int is_cpu = 0;
    if (!find_device(device_index, &rt->device, &is_cpu, reason, sizeof reason))
        return mi4_xpu_fail(err, cap, MOEINT4_BACKEND_UNAVAILABLE, "%s", reason);
    rt->base.is_test_cpu_device = is_cpu;
    cl_int rc;
    rt->context = clCreateContext(NULL, 1, &rt->device, NULL, NULL, &rc);
    cl_queue_properties timed[] = { CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0 };
    if (env_is_1("MOEINT4_XPU_PROFILE"))
        rt->profile = calloc(1, sizeof *rt->profile);
    if (rc == CL_SUCCESS)
        rt->queue = clCreateCommandQueueWithProperties(rt->context, rt->device,
                                                       rt->profile ? timed : NULL, &rc);
    if (rc != CL_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "OpenCL: creating a context and queue returned %d", (int)rc);
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_xpu_ocl_create(const moeint4_context_options *options, mi4_xpu_runtime **out,
                                  char *err, size_t cap)
{
    ocl_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY, "OpenCL runtime: out of memory");
    rt->base.ops = &ocl_ops;
    rt->base.kind = MI4_XPU_OPENCL;
    moeint4_status status = options->native_device
                                ? adopt_native(rt, options, err, cap)
                                : create_own(rt, options->device_index, err, cap);
    if (status == MOEINT4_SUCCESS) {
        clGetDeviceInfo(rt->device, CL_DEVICE_NAME, sizeof rt->base.device_name - 1,
                        rt->base.device_name, NULL);
        cl_uint units = 0;
        if (clGetDeviceInfo(rt->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL) ==
            CL_SUCCESS)
            rt->base.compute_units = (int)units;
        status = build_program(rt, err, cap);
    }
    if (status != MOEINT4_SUCCESS) {
        ocl_destroy(&rt->base);
        return status;
    }
    *out = &rt->base;
    return MOEINT4_SUCCESS;
}

void mi4_xpu_ocl_handles(mi4_xpu_runtime *base, void **device, void **context, void **queue)
{
    ocl_runtime *rt = base && base->kind == MI4_XPU_OPENCL ? as_ocl(base) : NULL;
    *device = rt ? (void *)rt->device : NULL;
    *context = rt ? (void *)rt->context : NULL;
    *queue = rt ? (void *)rt->queue : NULL;
}
