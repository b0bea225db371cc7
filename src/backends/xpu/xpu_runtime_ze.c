/* The Level Zero runtime. The loader is opened with dlopen so that the plugin
 * loads on machines without it; zeInitDrivers (loader >= 1.10) is looked up
 * with dlsym and zeInit used otherwise (Debian 12 ships loader 1.8.12).
 * Device pointers are USM device allocations; the queue is an immediate
 * command list (the caller's, or our own), synchronised with a host-visible
 * event after a barrier because loader 1.8 has no
 * zeCommandListHostSynchronize. Kernels come from the embedded SPIR-V. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <level_zero/ze_api.h>
#include <level_zero/ze_ddi.h>

#include "xpu_runtime.h"

#define INTEL_VENDOR_ID 0x8086u
#define MAX_DRIVERS 8
#define MAX_ZE_DEVICES 16

/* zeInitDrivers (Level Zero 1.10) as declared there; absent from the 1.8
 * headers, so declared here with its documented values. */
typedef struct mi4_ze_init_driver_type_desc {
    ze_structure_type_t stype; /* ZE_STRUCTURE_TYPE_INIT_DRIVER_TYPE_DESC = 0x00020021 */
    const void *pNext;
    uint32_t flags; /* ZE_INIT_DRIVER_TYPE_FLAG_GPU = 1 */
} mi4_ze_init_driver_type_desc;
typedef ze_result_t (*mi4_ze_init_drivers_fn)(uint32_t *, ze_driver_handle_t *,
                                              mi4_ze_init_driver_type_desc *);

typedef struct ze_api {
    void *library;
    mi4_ze_init_drivers_fn init_drivers; /* may be NULL */
    ze_pfnInit_t init;
    ze_pfnDriverGet_t driver_get;
    ze_pfnDeviceGet_t device_get;
    ze_pfnDeviceGetProperties_t device_properties;
    ze_pfnContextCreate_t context_create;
    ze_pfnContextDestroy_t context_destroy;
    ze_pfnCommandListCreateImmediate_t list_create_immediate;
    ze_pfnCommandListDestroy_t list_destroy;
    ze_pfnCommandListAppendLaunchKernel_t append_launch;
    ze_pfnCommandListAppendBarrier_t append_barrier;
    ze_pfnCommandListAppendMemoryCopy_t append_copy;
    ze_pfnModuleCreate_t module_create;
    ze_pfnModuleDestroy_t module_destroy;
    ze_pfnModuleBuildLogGetString_t build_log_string;
    ze_pfnModuleBuildLogDestroy_t build_log_destroy;
    ze_pfnKernelCreate_t kernel_create;
    ze_pfnKernelDestroy_t kernel_destroy;
    ze_pfnKernelSetGroupSize_t kernel_group_size;
    ze_pfnKernelSetArgumentValue_t kernel_argument;
    ze_pfnMemAllocDevice_t mem_alloc_device;
    ze_pfnMemFree_t mem_free;
    ze_pfnEventPoolCreate_t event_pool_create;
    ze_pfnEventPoolDestroy_t event_pool_destroy;
    ze_pfnEventCreate_t event_create;
    ze_pfnEventDestroy_t event_destroy;
    ze_pfnEventHostSynchronize_t event_synchronize;
    ze_pfnEventHostReset_t event_reset;
} ze_api;

typedef struct ze_runtime {
    mi4_xpu_runtime base;
    ze_api api;
    ze_driver_handle_t driver;
    ze_device_handle_t device;
    ze_context_handle_t context;
    ze_command_list_handle_t list;
    int owns_context, owns_list;
    int eu_simd_width; /* ze_device_properties_t.physicalEUSimdWidth: 8 on Xe-LP / Xe-HPG */
    ze_module_handle_t module;
    ze_kernel_handle_t kernels[MI4_XPU_KERNEL_COUNT];
    ze_event_pool_handle_t event_pool;
    ze_event_handle_t done;
} ze_runtime;

static const char *result_name(ze_result_t rc)
{
    switch ((unsigned)rc) {
    case ZE_RESULT_SUCCESS: return "ZE_RESULT_SUCCESS";
    case ZE_RESULT_ERROR_UNINITIALIZED: return "ZE_RESULT_ERROR_UNINITIALIZED";
    case ZE_RESULT_ERROR_UNSUPPORTED_VERSION: return "ZE_RESULT_ERROR_UNSUPPORTED_VERSION";
    case ZE_RESULT_ERROR_DEVICE_LOST: return "ZE_RESULT_ERROR_DEVICE_LOST";
    case ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY: return "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY";
    case ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY: return "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY";
    case ZE_RESULT_ERROR_MODULE_BUILD_FAILURE: return "ZE_RESULT_ERROR_MODULE_BUILD_FAILURE";
    default: return "a Level Zero error";
    }
}

#define LOAD(field, symbol)                                                                        \
    do {                                                                                           \
        *(void **)&api->field = dlsym(api->library, symbol);                                       \
        if (!api->field) {                                                                         \
            snprintf(reason, cap, "Level Zero: libze_loader.so.1 lacks %s", symbol);               \
            dlclose(api->library);                                                                 \
            return 0;                                                                              \
        }                                                                                          \
    } while (0)

/* Once initialised, the loader and its drivers hold process-wide state that
 * is not meant to be torn down and set up again, so a loaded loader is never
 * dlclose'd (dlopen only counts references; nothing is loaded twice). */
static int load_api(ze_api *api, char *reason, size_t cap)
{
    memset(api, 0, sizeof *api);
    api->library = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!api->library) {
        snprintf(reason, cap, "no Level Zero loader (libze_loader.so.1: %s)", dlerror());
        return 0;
    }
    *(void **)&api->init_drivers = dlsym(api->library, "zeInitDrivers");
    LOAD(init, "zeInit");
    LOAD(driver_get, "zeDriverGet");
    LOAD(device_get, "zeDeviceGet");
    LOAD(device_properties, "zeDeviceGetProperties");
    LOAD(context_create, "zeContextCreate");
    LOAD(context_destroy, "zeContextDestroy");
    LOAD(list_create_immediate, "zeCommandListCreateImmediate");
    LOAD(list_destroy, "zeCommandListDestroy");
    LOAD(append_launch, "zeCommandListAppendLaunchKernel");
    LOAD(append_barrier, "zeCommandListAppendBarrier");
    LOAD(append_copy, "zeCommandListAppendMemoryCopy");
    LOAD(module_create, "zeModuleCreate");
    LOAD(module_destroy, "zeModuleDestroy");
    LOAD(build_log_string, "zeModuleBuildLogGetString");
    LOAD(build_log_destroy, "zeModuleBuildLogDestroy");
    LOAD(kernel_create, "zeKernelCreate");
    LOAD(kernel_destroy, "zeKernelDestroy");
    LOAD(kernel_group_size, "zeKernelSetGroupSize");
    LOAD(kernel_argument, "zeKernelSetArgumentValue");
    LOAD(mem_alloc_device, "zeMemAllocDevice");
    LOAD(mem_free, "zeMemFree");
    LOAD(event_pool_create, "zeEventPoolCreate");
    LOAD(event_pool_destroy, "zeEventPoolDestroy");
    LOAD(event_create, "zeEventCreate");
    LOAD(event_destroy, "zeEventDestroy");
    LOAD(event_synchronize, "zeEventHostSynchronize");
    LOAD(event_reset, "zeEventHostReset");
    return 1;
}

/* Why the loader found no device, as far as the host tells: is Intel's GPU
 * driver installed, does the kernel expose a GPU (/dev/dri)? The loader
 * unloads a driver that found nothing, so the driver is looked up again
 * here (loading it runs no device discovery). */
static void describe_missing_device(char *why, size_t cap)
{
    const char *alternative = getenv("ZE_ENABLE_ALT_DRIVERS");
    if (alternative && *alternative) {
        snprintf(why, cap, "ZE_ENABLE_ALT_DRIVERS=%.80s replaces the loader's driver list",
                 alternative);
        return;
    }
    void *driver = dlopen("libze_intel_gpu.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!driver) {
        snprintf(why, cap,
                 "Intel's GPU driver is not installed (libze_intel_gpu.so.1: Debian "
                 "package intel-opencl-icd)");
        return;
    }
    dlclose(driver);
    if (access("/dev/dri", F_OK) != 0)
        snprintf(why, cap,
                 "Intel's GPU driver (libze_intel_gpu.so.1) is installed but the "
                 "kernel exposes no GPU (no /dev/dri)");
    else
        snprintf(why, cap,
                 "Intel's GPU driver (libze_intel_gpu.so.1) is installed but no "
                 "/dev/dri render node is an Intel GPU it supports");
}

/* Initialises the drivers and lists them; fills `reason` on failure. */
static int init_drivers(ze_api *api, ze_driver_handle_t *drivers, uint32_t *count, char *reason,
                        size_t cap)
{
    ze_result_t rc;
    const char *how;
    *count = MAX_DRIVERS;
    if (api->init_drivers) {
        mi4_ze_init_driver_type_desc desc = { (ze_structure_type_t)0x00020021, NULL, 1u };
        uint32_t available = 0;
        how = "zeInitDrivers";
        rc = api->init_drivers(&available, NULL, &desc);
        if (rc == ZE_RESULT_SUCCESS && available > 0) {
            *count = available < MAX_DRIVERS ? available : MAX_DRIVERS;
            rc = api->init_drivers(count, drivers, &desc);
        }
    } else {
        how = "zeInit";
        rc = api->init(ZE_INIT_FLAG_GPU_ONLY);
        if (rc == ZE_RESULT_SUCCESS)
            rc = api->driver_get(count, drivers);
    }
    if (rc != ZE_RESULT_SUCCESS || *count == 0) {
        char why[200];
        describe_missing_device(why, sizeof why);
        snprintf(reason, cap,
                 "no Level Zero driver: libze_loader found but %s returned 0x%x (%s)%s; %s", how,
                 (unsigned)rc, result_name(rc), rc == ZE_RESULT_SUCCESS ? ", no drivers" : "", why);
        return 0;
    }
    return 1;
}

static ze_result_t device_properties(ze_api *api, ze_device_handle_t device,
                                     ze_device_properties_t *props)
{
    memset(props, 0, sizeof *props);
    props->stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    return api->device_properties(device, props);
}

/* The device_index-th Intel GPU over all drivers. */
static int find_device(ze_api *api, int device_index, ze_driver_handle_t *driver,
                       ze_device_handle_t *device, char *name, size_t name_cap, char *reason,
                       size_t cap)
{
    ze_driver_handle_t drivers[MAX_DRIVERS];
    uint32_t num_drivers = 0;
    if (!init_drivers(api, drivers, &num_drivers, reason, cap))
        return 0;
    int seen = 0;
    for (uint32_t d = 0; d < num_drivers; ++d) {
        ze_device_handle_t devices[MAX_ZE_DEVICES];
        uint32_t num_devices = MAX_ZE_DEVICES;
        if (api->device_get(drivers[d], &num_devices, devices) != ZE_RESULT_SUCCESS)
            continue;
        for (uint32_t i = 0; i < num_devices; ++i) {
            ze_device_properties_t props;
            if (device_properties(api, devices[i], &props) != ZE_RESULT_SUCCESS ||
                props.type != ZE_DEVICE_TYPE_GPU || props.vendorId != INTEL_VENDOR_ID)
                continue;
            if (seen++ == device_index) {
                *driver = drivers[d];
                *device = devices[i];
                snprintf(name, name_cap, "%.100s", props.name);
                return 1;
            }
        }
    }
    snprintf(reason, cap, "Level Zero: %d Intel GPU(s), device %d requested", seen, device_index);
    return 0;
}

int mi4_xpu_ze_probe(int device_index, char *reason, size_t cap)
{
    ze_api api;
    ze_driver_handle_t driver;
    ze_device_handle_t device;
    char name[64];
    if (!load_api(&api, reason, cap))
        return 0;
    return find_device(&api, device_index, &driver, &device, name, sizeof name, reason, cap);
}

static ze_runtime *as_ze(mi4_xpu_runtime *rt) { return (ze_runtime *)rt; }

static ze_command_list_handle_t list_or_default(ze_runtime *rt, void *queue)
{
    return queue ? (ze_command_list_handle_t)queue : rt->list;
}

static moeint4_status ze_alloc(mi4_xpu_runtime *base, size_t bytes, void **ptr, char *err,
                               size_t cap)
{
    ze_runtime *rt = as_ze(base);
    ze_device_mem_alloc_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
    ze_result_t rc =
        rt->api.mem_alloc_device(rt->context, &desc, bytes ? bytes : 1, 64, rt->device, ptr);
    if (rc != ZE_RESULT_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY,
                            "Level Zero: zeMemAllocDevice of %zu bytes returned 0x%x (%s)", bytes,
                            (unsigned)rc, result_name(rc));
    return MOEINT4_SUCCESS;
}

static void ze_free(mi4_xpu_runtime *base, void *ptr)
{
    if (ptr)
        as_ze(base)->api.mem_free(as_ze(base)->context, ptr);
}

static moeint4_status ze_wait(mi4_xpu_runtime *base, void *queue, char *err, size_t cap)
{
    ze_runtime *rt = as_ze(base);
    ze_result_t rc = rt->api.append_barrier(list_or_default(rt, queue), rt->done, 0, NULL);
    if (rc == ZE_RESULT_SUCCESS)
        rc = rt->api.event_synchronize(rt->done, UINT64_MAX);
    if (rc == ZE_RESULT_SUCCESS)
        rc = rt->api.event_reset(rt->done);
    if (rc != ZE_RESULT_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "Level Zero: waiting for the command list returned 0x%x (%s)",
                            (unsigned)rc, result_name(rc));
    return MOEINT4_SUCCESS;
}

static moeint4_status ze_copy(mi4_xpu_runtime *base, void *queue, void *dst, const void *src,
                              size_t bytes, char *err, size_t cap)
{
    ze_runtime *rt = as_ze(base);
    if (bytes == 0)
        return MOEINT4_SUCCESS;
    ze_command_list_handle_t list = list_or_default(rt, queue);
    /* order after earlier kernels, which the list does not do by itself */
    ze_result_t rc = rt->api.append_barrier(list, NULL, 0, NULL);
    if (rc == ZE_RESULT_SUCCESS)
        rc = rt->api.append_copy(list, dst, src, bytes, NULL, 0, NULL);
    if (rc != ZE_RESULT_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "Level Zero: copying %zu bytes returned 0x%x (%s)", bytes, (unsigned)rc,
                            result_name(rc));
    return ze_wait(base, queue, err, cap);
}

static moeint4_status ze_launch(mi4_xpu_runtime *base, void *queue, mi4_xpu_kernel which,
                                const size_t global[2], const size_t local[2], int num_args,
                                const mi4_xpu_arg *args, char *err, size_t cap)
{
    ze_runtime *rt = as_ze(base);
    ze_kernel_handle_t kernel = rt->kernels[which];
    ze_result_t rc = rt->api.kernel_group_size(kernel, (uint32_t)local[0], (uint32_t)local[1], 1);
    for (int i = 0; i < num_args && rc == ZE_RESULT_SUCCESS; ++i)
        rc = rt->api.kernel_argument(kernel, (uint32_t)i, args[i].size,
                                     args[i].is_pointer ? (const void *)&args[i].value
                                                        : args[i].value);
    ze_group_count_t groups = { (uint32_t)(global[0] / local[0]), (uint32_t)(global[1] / local[1]),
                                1 };
    ze_command_list_handle_t list = list_or_default(rt, queue);
    if (rc == ZE_RESULT_SUCCESS)
        rc = rt->api.append_launch(list, kernel, &groups, NULL, 0, NULL);
    /* the next launch reads what this one wrote */
    if (rc == ZE_RESULT_SUCCESS)
        rc = rt->api.append_barrier(list, NULL, 0, NULL);
    if (rc != ZE_RESULT_SUCCESS)
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "Level Zero: launching %s returned 0x%x (%s)",
                            mi4_xpu_kernel_names[which], (unsigned)rc, result_name(rc));
    return MOEINT4_SUCCESS;
}

static moeint4_status ze_check_queue(mi4_xpu_runtime *base, void *queue, char *err, size_t cap)
{
    (void)base, (void)queue, (void)err, (void)cap;
    return MOEINT4_SUCCESS; /* Level Zero cannot tell a list's context; the caller's word */
}

static void ze_destroy(mi4_xpu_runtime *base)
{
    ze_runtime *rt = as_ze(base);
    if (!rt)
        return;
    ze_api *api = &rt->api;
    for (int i = 0; i < MI4_XPU_KERNEL_COUNT; ++i)
        if (rt->kernels[i])
            api->kernel_destroy(rt->kernels[i]);
    if (rt->module)
        api->module_destroy(rt->module);
    if (rt->done)
        api->event_destroy(rt->done);
    if (rt->event_pool)
        api->event_pool_destroy(rt->event_pool);
    if (rt->list && rt->owns_list)
        api->list_destroy(rt->list);
    if (rt->context && rt->owns_context)
        api->context_destroy(rt->context);
    free(rt); /* the loader stays loaded: see load_api */
}

static const mi4_xpu_runtime_ops ze_ops = {
    ze_alloc, ze_free, ze_copy, ze_launch, ze_wait, ze_check_queue, ze_destroy,
};

/* The embedded ocloc binary the driver accepts for this device (native
 * format, as Intel's own libraries load theirs); the driver refuses one of
 * another target and the next is tried. 0: none fits, build the SPIR-V. */
static int load_aot_module(ze_runtime *rt)
{
    for (int i = 0; i < mi4_xpu_aot_count; ++i) {
        ze_module_desc_t desc;
        memset(&desc, 0, sizeof desc);
        desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
        desc.format = ZE_MODULE_FORMAT_NATIVE;
        desc.inputSize = mi4_xpu_aot_sizes[i];
        desc.pInputModule = mi4_xpu_aot_binaries[i];
        if (rt->api.module_create(rt->context, rt->device, &desc, &rt->module, NULL) ==
            ZE_RESULT_SUCCESS) {
            snprintf(rt->base.kernels_from, sizeof rt->base.kernels_from, "ocloc binary for %s",
                     mi4_xpu_aot_targets[i]);
            return 1;
        }
        rt->module = NULL;
    }
    return 0;
}

static ze_result_t create_objects(ze_runtime *rt, char *log, size_t log_cap)
{
    ze_api *api = &rt->api;
    ze_result_t rc = ZE_RESULT_SUCCESS;
    if (!rt->context) {
        ze_context_desc_t desc = { ZE_STRUCTURE_TYPE_CONTEXT_DESC, NULL, 0 };
        rc = api->context_create(rt->driver, &desc, &rt->context);
        rt->owns_context = rc == ZE_RESULT_SUCCESS;
    }
    if (rc == ZE_RESULT_SUCCESS && !rt->list) {
        ze_command_queue_desc_t desc;
        memset(&desc, 0, sizeof desc);
        desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
        desc.mode = ZE_COMMAND_QUEUE_MODE_ASYNCHRONOUS;
        rc = api->list_create_immediate(rt->context, rt->device, &desc, &rt->list);
        rt->owns_list = rc == ZE_RESULT_SUCCESS;
    }
    if (rc == ZE_RESULT_SUCCESS) {
        ze_event_pool_desc_t pool = { ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, NULL,
                                      ZE_EVENT_POOL_FLAG_HOST_VISIBLE, 1 };
        rc = api->event_pool_create(rt->context, &pool, 1, &rt->device, &rt->event_pool);
    }
    if (rc == ZE_RESULT_SUCCESS) {
        ze_event_desc_t event = { ZE_STRUCTURE_TYPE_EVENT_DESC, NULL, 0, ZE_EVENT_SCOPE_FLAG_HOST,
                                  ZE_EVENT_SCOPE_FLAG_HOST };
        rc = api->event_create(rt->event_pool, &event, &rt->done);
    }
    if (rc == ZE_RESULT_SUCCESS && !load_aot_module(rt)) {
        ze_module_desc_t desc;
        memset(&desc, 0, sizeof desc);
        desc.stype = ZE_STRUCTURE_TYPE_MODULE_DESC;
        desc.format = ZE_MODULE_FORMAT_IL_SPIRV;
        /* EUs 16 lanes wide (Xe-HPC, Xe2): the SIMD16 module; IGC's own
         * choice there, SIMD32, spills (ocloc for pvc, in the build log) */
        const int simd16 = rt->eu_simd_width >= 16;
        desc.inputSize = simd16 ? mi4_xpu_kernel_spirv_simd16_size : mi4_xpu_kernel_spirv_size;
        desc.pInputModule = simd16 ? mi4_xpu_kernel_spirv_simd16 : mi4_xpu_kernel_spirv;
        ze_module_build_log_handle_t build_log = NULL;
        snprintf(rt->base.kernels_from, sizeof rt->base.kernels_from, "%s",
                 simd16 ? "SPIR-V (SIMD16)" : "SPIR-V");
        rc = api->module_create(rt->context, rt->device, &desc, &rt->module, &build_log);
        if (rc != ZE_RESULT_SUCCESS && build_log) {
            size_t size = log_cap;
            api->build_log_string(build_log, &size, log);
        }
        if (build_log)
            api->build_log_destroy(build_log);
    }
    for (int i = 0; i < MI4_XPU_KERNEL_COUNT && rc == ZE_RESULT_SUCCESS; ++i) {
        ze_kernel_desc_t desc = { ZE_STRUCTURE_TYPE_KERNEL_DESC, NULL, 0, mi4_xpu_kernel_names[i] };
        rc = api->kernel_create(rt->module, &desc, &rt->kernels[i]);
    }
    return rc;
}

moeint4_status mi4_xpu_ze_create(const moeint4_context_options *options, mi4_xpu_runtime **out,
                                 char *err, size_t cap)
{
    char reason[400];
    ze_runtime *rt = calloc(1, sizeof *rt);
    if (!rt)
        return mi4_xpu_fail(err, cap, MOEINT4_OUT_OF_MEMORY, "Level Zero runtime: out of memory");
    rt->base.ops = &ze_ops;
    rt->base.kind = MI4_XPU_LEVEL_ZERO;
    if (!load_api(&rt->api, reason, sizeof reason)) {
        free(rt);
        return mi4_xpu_fail(err, cap, MOEINT4_BACKEND_UNAVAILABLE, "%s", reason);
    }
    if (options->native_device) {
        /* the framework's handles: its memory is used in place */
        ze_driver_handle_t drivers[MAX_DRIVERS];
        uint32_t count = 0;
        if (!init_drivers(&rt->api, drivers, &count, reason, sizeof reason)) {
            ze_destroy(&rt->base);
            return mi4_xpu_fail(err, cap, MOEINT4_BACKEND_UNAVAILABLE, "%s", reason);
        }
        rt->driver = drivers[0];
        rt->device = (ze_device_handle_t)options->native_device;
        rt->context = (ze_context_handle_t)options->native_context;
        rt->list = (ze_command_list_handle_t)options->native_queue;
        snprintf(rt->base.device_name, sizeof rt->base.device_name, "caller's Level Zero device");
    } else if (!find_device(&rt->api, options->device_index, &rt->driver, &rt->device,
                            rt->base.device_name, sizeof rt->base.device_name, reason,
                            sizeof reason)) {
        ze_destroy(&rt->base);
        return mi4_xpu_fail(err, cap, MOEINT4_BACKEND_UNAVAILABLE, "%s", reason);
    }
    ze_device_properties_t props;
    if (device_properties(&rt->api, rt->device, &props) == ZE_RESULT_SUCCESS) {
        rt->base.compute_units = (int)(props.numSlices * props.numSubslicesPerSlice);
        rt->eu_simd_width = (int)props.physicalEUSimdWidth;
    }
    char log[160] = "";
    ze_result_t rc = create_objects(rt, log, sizeof log);
    if (rc != ZE_RESULT_SUCCESS) {
        ze_destroy(&rt->base);
        return mi4_xpu_fail(err, cap, MOEINT4_DEVICE_ERROR,
                            "Level Zero: setting up the device returned 0x%x (%s) %s", (unsigned)rc,
                            result_name(rc), log);
    }
    *out = &rt->base;
    return MOEINT4_SUCCESS;
}
