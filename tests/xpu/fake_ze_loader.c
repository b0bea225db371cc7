/* A stand-in libze_loader.so.1 for tests: one "Intel GPU" (vendor 0x8086)
 * whose commands run through OpenCL on PoCL's CPU device, so the backend's
 * Level Zero runtime (USM allocation, immediate command lists, barriers,
 * event waits, kernel arguments by address, group sizes) runs end to end.
 * zeModuleCreate refuses native (ocloc) binaries, as a driver refuses those
 * of another device, and checks that it was handed the backend's embedded SPIR-V
 * module for the EU width the device reports (FAKE_ZE_EU_SIMD_WIDTH, else 8;
 * 16 or more: the SIMD16 module), then builds the same program from the OpenCL C text, or, with
 * FAKE_ZE_SPIR_MODULE naming the build's SPIR translation of that module
 * (spirv_to_spir.cmake: PoCL 3.1 cannot ingest SPIR-V, but builds SPIR
 * 1.2), from that, with no fallback to the text: then the kernels that run
 * are the SPIR-V module's. Exports zeInitDrivers, as loaders >= 1.10 do.
 * Like a real driver it has process-wide state: the OpenCL device. */
#define CL_TARGET_OPENCL_VERSION 200
#include <CL/cl.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <level_zero/ze_api.h>

extern const char mi4_xpu_kernel_source[];
extern const unsigned char mi4_xpu_kernel_spirv[];
extern const size_t mi4_xpu_kernel_spirv_size;
extern const unsigned char mi4_xpu_kernel_spirv_simd16[];
extern const size_t mi4_xpu_kernel_spirv_simd16_size;

/* physicalEUSimdWidth of the fake device */
static uint32_t fake_eu_simd_width(void)
{
    const char *v = getenv("FAKE_ZE_EU_SIMD_WIDTH");
    return v && *v ? (uint32_t)atoi(v) : 8u;
}

struct _ze_driver_handle_t {
    int unused;
};
struct _ze_device_handle_t {
    int unused;
};
struct _ze_context_handle_t {
    cl_context cl;
};
struct _ze_command_list_handle_t {
    cl_command_queue queue;
};
struct _ze_module_handle_t {
    cl_program program;
};
struct _ze_module_build_log_handle_t {
    int unused;
};
struct _ze_kernel_handle_t {
    cl_kernel kernel;
    size_t group[3];
};
struct _ze_event_pool_handle_t {
    int unused;
};
struct _ze_event_handle_t {
    cl_event done;
};

static struct _ze_driver_handle_t the_driver;
static struct _ze_device_handle_t the_device;
static struct fake_state {
    pthread_once_t once;
    cl_device_id device; /* NULL: no PoCL */
} fake = { PTHREAD_ONCE_INIT, NULL };

static void find_pocl(void)
{
    cl_platform_id platforms[8];
    cl_uint count = 0;
    if (clGetPlatformIDs(8, platforms, &count) != CL_SUCCESS)
        return;
    for (cl_uint p = 0; p < count && !fake.device; ++p) {
        cl_uint devices = 0;
        if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_CPU, 1, &fake.device, &devices) !=
                CL_SUCCESS ||
            devices == 0)
            fake.device = NULL;
    }
}

static ze_result_t initialised(void)
{
    pthread_once(&fake.once, find_pocl);
    return fake.device ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNINITIALIZED;
}

ze_result_t zeInit(ze_init_flags_t flags)
{
    (void)flags;
    return initialised();
}

typedef struct fake_init_driver_type_desc {
    ze_structure_type_t stype;
    const void *pNext;
    uint32_t flags;
} fake_init_driver_type_desc;

ZE_APIEXPORT ze_result_t zeInitDrivers(uint32_t *count, ze_driver_handle_t *drivers,
                                       fake_init_driver_type_desc *desc)
{
    if (!desc || (unsigned)desc->stype != 0x00020021u || !(desc->flags & 1u))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    if (initialised() != ZE_RESULT_SUCCESS)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (drivers && *count >= 1)
        drivers[0] = &the_driver;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGet(uint32_t *count, ze_driver_handle_t *drivers)
{
    if (initialised() != ZE_RESULT_SUCCESS)
        return ZE_RESULT_ERROR_UNINITIALIZED;
    if (drivers && *count >= 1)
        drivers[0] = &the_driver;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t driver, uint32_t *count, ze_device_handle_t *devices)
{
    if (driver != &the_driver)
        return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
    if (devices && *count >= 1)
        devices[0] = &the_device;
    *count = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGetProperties(ze_device_handle_t device, ze_device_properties_t *props)
{
    if (device != &the_device || props->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    props->type = ZE_DEVICE_TYPE_GPU;
    props->vendorId = 0x8086;
    props->physicalEUSimdWidth = fake_eu_simd_width();
    snprintf(props->name, sizeof props->name, "fake Level Zero GPU (PoCL)");
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeContextCreate(ze_driver_handle_t driver, const ze_context_desc_t *desc,
                            ze_context_handle_t *context)
{
    cl_int rc;
    if (driver != &the_driver || desc->stype != ZE_STRUCTURE_TYPE_CONTEXT_DESC)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_context_handle_t c = calloc(1, sizeof *c);
    c->cl = clCreateContext(NULL, 1, &fake.device, NULL, NULL, &rc);
    *context = c;
    return rc == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNKNOWN;
}

ze_result_t zeContextDestroy(ze_context_handle_t context)
{
    clReleaseContext(context->cl);
    free(context);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListCreateImmediate(ze_context_handle_t context, ze_device_handle_t device,
                                         const ze_command_queue_desc_t *desc,
                                         ze_command_list_handle_t *list)
{
    cl_int rc;
    if (device != &the_device || desc->stype != ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    /* out of order, as Level Zero lists may run: the backend's barriers order it */
    cl_queue_properties props[] = { CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE,
                                    0 };
    ze_command_list_handle_t l = calloc(1, sizeof *l);
    l->queue = clCreateCommandQueueWithProperties(context->cl, fake.device, props, &rc);
    if (rc != CL_SUCCESS)
        l->queue = clCreateCommandQueueWithProperties(context->cl, fake.device, NULL, &rc);
    *list = l;
    return rc == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_UNKNOWN;
}

ze_result_t zeCommandListDestroy(ze_command_list_handle_t list)
{
    clFinish(list->queue);
    clReleaseCommandQueue(list->queue);
    free(list);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeMemAllocDevice(ze_context_handle_t context, const ze_device_mem_alloc_desc_t *desc,
                             size_t size, size_t alignment, ze_device_handle_t device, void **ptr)
{
    if (desc->stype != ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC || device != &the_device)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    *ptr = clSVMAlloc(context->cl, CL_MEM_READ_WRITE, size, (cl_uint)alignment);
    return *ptr ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY;
}

ze_result_t zeMemFree(ze_context_handle_t context, void *ptr)
{
    clSVMFree(context->cl, ptr);
    return ZE_RESULT_SUCCESS;
}

/* Completion of this command becomes the event's state. */
static ze_result_t signal_event(ze_event_handle_t event, cl_event done)
{
    if (event) {
        if (event->done)
            clReleaseEvent(event->done);
        event->done = done;
    } else if (done) {
        clReleaseEvent(done);
    }
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeCommandListAppendMemoryCopy(ze_command_list_handle_t list, void *dst, const void *src,
                                          size_t size, ze_event_handle_t event, uint32_t num_waits,
                                          ze_event_handle_t *waits)
{
    cl_event done = NULL;
    if (num_waits != 0 || waits)
        return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    if (clEnqueueSVMMemcpy(list->queue, CL_FALSE, dst, src, size, 0, NULL, &done) != CL_SUCCESS)
        return ZE_RESULT_ERROR_UNKNOWN;
    return signal_event(event, done);
}

ze_result_t zeCommandListAppendBarrier(ze_command_list_handle_t list, ze_event_handle_t event,
                                       uint32_t num_waits, ze_event_handle_t *waits)
{
    cl_event done = NULL;
    if (num_waits != 0 || waits)
        return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
    if (clEnqueueBarrierWithWaitList(list->queue, 0, NULL, &done) != CL_SUCCESS)
        return ZE_RESULT_ERROR_UNKNOWN;
    return signal_event(event, done);
}

/* Native (ocloc) modules offered to the stand-in: it is no Intel GPU, so it
 * refuses them and the runtime must fall back to the SPIR-V. */
int fake_native_modules_refused;

/* The bytes of file `path` (malloc'd), or NULL. */
static unsigned char *read_file(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    unsigned char *bytes = NULL;
    long length = -1;
    if (file && fseek(file, 0, SEEK_END) == 0)
        length = ftell(file);
    if (length > 0 && fseek(file, 0, SEEK_SET) == 0)
        bytes = malloc((size_t)length);
    if (bytes && fread(bytes, 1, (size_t)length, file) != (size_t)length) {
        free(bytes);
        bytes = NULL;
    }
    if (file)
        fclose(file);
    *size = bytes ? (size_t)length : 0;
    return bytes;
}

ze_result_t zeModuleCreate(ze_context_handle_t context, ze_device_handle_t device,
                           const ze_module_desc_t *desc, ze_module_handle_t *module,
                           ze_module_build_log_handle_t *log)
{
    static struct _ze_module_build_log_handle_t the_log;
    if (log)
        *log = &the_log;
    if (desc->stype == ZE_STRUCTURE_TYPE_MODULE_DESC && desc->format == ZE_MODULE_FORMAT_NATIVE) {
        /* as a real driver refuses a binary compiled for another device */
        __atomic_add_fetch(&fake_native_modules_refused, 1, __ATOMIC_RELAXED);
        return ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    }
    if (desc->stype != ZE_STRUCTURE_TYPE_MODULE_DESC || desc->format != ZE_MODULE_FORMAT_IL_SPIRV ||
        device != &the_device)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    const int simd16 = fake_eu_simd_width() >= 16;
    const unsigned char *want = simd16 ? mi4_xpu_kernel_spirv_simd16 : mi4_xpu_kernel_spirv;
    if (desc->inputSize !=
            (simd16 ? mi4_xpu_kernel_spirv_simd16_size : mi4_xpu_kernel_spirv_size) ||
        memcmp(desc->pInputModule, want, desc->inputSize) != 0 ||
        ((const uint32_t *)desc->pInputModule)[0] != 0x07230203u)
        return ZE_RESULT_ERROR_INVALID_NATIVE_BINARY;
    cl_int rc;
    ze_module_handle_t m = calloc(1, sizeof *m);
    const char *spir_path = getenv("FAKE_ZE_SPIR_MODULE");
    if (spir_path && *spir_path) {
        size_t size = 0;
        unsigned char *spir = read_file(spir_path, &size);
        const unsigned char *bytes = spir;
        cl_int binary_status = CL_INVALID_BINARY;
        m->program = spir ? clCreateProgramWithBinary(context->cl, 1, &fake.device, &size, &bytes,
                                                      &binary_status, &rc)
                          : NULL;
        if (!spir)
            rc = CL_INVALID_VALUE;
        else if (rc == CL_SUCCESS && binary_status == CL_SUCCESS)
            rc = clBuildProgram(m->program, 1, &fake.device,
                                "-x spir -spir-std=1.2 -cl-kernel-arg-info", NULL, NULL);
        free(spir);
        if (rc != CL_SUCCESS)
            fprintf(stderr, "fake Level Zero driver: %s does not build as SPIR (%d)\n", spir_path,
                    (int)rc);
    } else {
        const char *text = mi4_xpu_kernel_source;
        m->program = clCreateProgramWithSource(context->cl, 1, &text, NULL, &rc);
        if (rc == CL_SUCCESS)
            rc = clBuildProgram(m->program, 1, &fake.device, "-cl-kernel-arg-info", NULL, NULL);
    }
    *module = m;
    return rc == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_MODULE_BUILD_FAILURE;
}

ze_result_t zeModuleDestroy(ze_module_handle_t module)
{
    clReleaseProgram(module->program);
    free(module);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleBuildLogGetString(ze_module_build_log_handle_t log, size_t *size, char *text)
{
    (void)log;
    if (text && *size > 0)
        text[0] = '\0';
    *size = 1;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeModuleBuildLogDestroy(ze_module_build_log_handle_t log)
{
    (void)log;
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelCreate(ze_module_handle_t module, const ze_kernel_desc_t *desc,
                           ze_kernel_handle_t *kernel)
{
    cl_int rc;
    if (desc->stype != ZE_STRUCTURE_TYPE_KERNEL_DESC)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    ze_kernel_handle_t k = calloc(1, sizeof *k);
    k->kernel = clCreateKernel(module->program, desc->pKernelName, &rc);
    *kernel = k;
    return rc == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_KERNEL_NAME;
}

ze_result_t zeKernelDestroy(ze_kernel_handle_t kernel)
{
    clReleaseKernel(kernel->kernel);
    free(kernel);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeKernelSetGroupSize(ze_kernel_handle_t kernel, uint32_t x, uint32_t y, uint32_t z)
{
    kernel->group[0] = x, kernel->group[1] = y, kernel->group[2] = z;
    return ZE_RESULT_SUCCESS;
}

/* Level Zero passes a pointer argument by the address of the pointer. */
ze_result_t zeKernelSetArgumentValue(ze_kernel_handle_t kernel, uint32_t index, size_t size,
                                     const void *value)
{
    cl_kernel_arg_address_qualifier space = 0;
    if (clGetKernelArgInfo(kernel->kernel, index, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof space,
                           &space, NULL) != CL_SUCCESS)
        return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_INDEX;
    cl_int rc;
    if (space == CL_KERNEL_ARG_ADDRESS_GLOBAL) {
        if (size != sizeof(void *))
            return ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
        rc = clSetKernelArgSVMPointer(kernel->kernel, index, *(void *const *)value);
    } else {
        rc = clSetKernelArg(kernel->kernel, index, size, value);
    }
    return rc == CL_SUCCESS ? ZE_RESULT_SUCCESS : ZE_RESULT_ERROR_INVALID_KERNEL_ARGUMENT_SIZE;
}

ze_result_t zeCommandListAppendLaunchKernel(ze_command_list_handle_t list,
                                            ze_kernel_handle_t kernel,
                                            const ze_group_count_t *groups, ze_event_handle_t event,
                                            uint32_t num_waits, ze_event_handle_t *waits)
{
    cl_event done = NULL;
    if (num_waits != 0 || waits || kernel->group[0] == 0)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    size_t global[3] = { groups->groupCountX * kernel->group[0],
                         groups->groupCountY * kernel->group[1],
                         groups->groupCountZ * kernel->group[2] };
    if (clEnqueueNDRangeKernel(list->queue, kernel->kernel, 3, NULL, global, kernel->group, 0, NULL,
                               &done) != CL_SUCCESS)
        return ZE_RESULT_ERROR_UNKNOWN;
    return signal_event(event, done);
}

ze_result_t zeEventPoolCreate(ze_context_handle_t context, const ze_event_pool_desc_t *desc,
                              uint32_t num_devices, ze_device_handle_t *devices,
                              ze_event_pool_handle_t *pool)
{
    (void)context, (void)num_devices, (void)devices;
    if (desc->stype != ZE_STRUCTURE_TYPE_EVENT_POOL_DESC ||
        !(desc->flags & ZE_EVENT_POOL_FLAG_HOST_VISIBLE))
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    *pool = calloc(1, sizeof **pool);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventPoolDestroy(ze_event_pool_handle_t pool)
{
    free(pool);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventCreate(ze_event_pool_handle_t pool, const ze_event_desc_t *desc,
                          ze_event_handle_t *event)
{
    (void)pool;
    if (desc->stype != ZE_STRUCTURE_TYPE_EVENT_DESC)
        return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    *event = calloc(1, sizeof **event);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventDestroy(ze_event_handle_t event)
{
    signal_event(event, NULL);
    free(event);
    return ZE_RESULT_SUCCESS;
}

ze_result_t zeEventHostSynchronize(ze_event_handle_t event, uint64_t timeout)
{
    (void)timeout;
    if (!event->done)
        return ZE_RESULT_NOT_READY; /* never signalled: a real wait would hang */
    return clWaitForEvents(1, &event->done) == CL_SUCCESS ? ZE_RESULT_SUCCESS
                                                          : ZE_RESULT_ERROR_DEVICE_LOST;
}

ze_result_t zeEventHostReset(ze_event_handle_t event) { return signal_event(event, NULL); }
