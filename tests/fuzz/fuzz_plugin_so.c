/* The plugin the plugin-loading harness loads: its entry point hands back
 * whatever table the harness set (or NULL), so every answer a plugin can
 * give is reachable without building a .so per case. */
#include <stddef.h>

#include "moeint4_backend.h"

#define FZ_EXPORT __attribute__((visibility("default")))

static int stub_probe(void *user_data, int device_index, char *reason, size_t reason_cap)
{
    (void)user_data, (void)device_index, (void)reason, (void)reason_cap;
    return 0;
}

static int stub_supports(void *user_data, const moeint4_problem *problem, char *reason,
                         size_t reason_cap)
{
    (void)user_data, (void)problem, (void)reason, (void)reason_cap;
    return 0;
}

static moeint4_status stub_context_create(void *user_data, const moeint4_context_options *options,
                                          void **backend_context, char *err, size_t err_cap)
{
    (void)user_data, (void)options, (void)backend_context, (void)err, (void)err_cap;
    return MOEINT4_BACKEND_UNAVAILABLE;
}

static void stub_context_destroy(void *user_data, void *backend_context)
{
    (void)user_data, (void)backend_context;
}

static moeint4_status stub_prepare(void *backend_context, const moeint4_weights_desc *desc,
                                   void **backend_weights, char *err, size_t err_cap)
{
    (void)backend_context, (void)desc, (void)backend_weights, (void)err, (void)err_cap;
    return MOEINT4_UNSUPPORTED;
}

static void stub_release(void *backend_context, void *backend_weights)
{
    (void)backend_context, (void)backend_weights;
}

static moeint4_status stub_forward(void *backend_context, const void *backend_weights,
                                   const moeint4_forward_args *args, char *err, size_t err_cap)
{
    (void)backend_context, (void)backend_weights, (void)args, (void)err, (void)err_cap;
    return MOEINT4_UNSUPPORTED;
}

static const moeint4_backend_iface *answer;

/* A complete, valid table for `id` the harness starts from. */
FZ_EXPORT moeint4_backend_iface fz_plugin_base_table(moeint4_backend id);
FZ_EXPORT moeint4_backend_iface fz_plugin_base_table(moeint4_backend id)
{
    moeint4_backend_iface t = { 0 };
    t.struct_size = sizeof t;
    t.api_version = MOEINT4_BACKEND_API_VERSION;
    t.id = id;
    t.name = "fuzzplugin";
    t.probe = stub_probe;
    t.supports = stub_supports;
    t.context_create = stub_context_create;
    t.context_destroy = stub_context_destroy;
    t.prepare = stub_prepare;
    t.release = stub_release;
    t.forward = stub_forward;
    return t;
}

/* What the next call of the entry point returns (NULL allowed). */
FZ_EXPORT void fz_plugin_set_answer(const moeint4_backend_iface *table);
FZ_EXPORT void fz_plugin_set_answer(const moeint4_backend_iface *table) { answer = table; }

FZ_EXPORT const moeint4_backend_iface *moeint4_plugin_backend(uint32_t core_api_version);
FZ_EXPORT const moeint4_backend_iface *moeint4_plugin_backend(uint32_t core_api_version)
{
    (void)core_api_version;
    return answer;
}
