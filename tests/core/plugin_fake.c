/* A fake GPU backend plugin, built several ways by tests/core/CMakeLists.txt:
 * good, without the entry symbol, with a wrong api version, with a wrong id.
 * It supports GPTQ_SYM only, so the oracle's first-fit can be observed. */
#include <stdint.h>
#include <string.h>

#include "fake_backend.h"

#ifndef FAKE_PLUGIN_API_VERSION
#define FAKE_PLUGIN_API_VERSION MOEINT4_BACKEND_API_VERSION
#endif
#ifndef FAKE_PLUGIN_PROBE_OK
#define FAKE_PLUGIN_PROBE_OK 1
#endif

static fake_control plugin_control = {
    .name = "fake-plugin",
    .probe_ok = FAKE_PLUGIN_PROBE_OK,
    .supports_ok = 1,
    .only_format = MOEINT4_FORMAT_GPTQ_SYM,
};
static moeint4_backend_iface plugin_table;

#ifndef FAKE_PLUGIN_OMIT_ENTRY
/* Its one extension, reached through moeint4_backend_get_proc_address. */
static int fake_extension_answer(void) { return 42; }

static void *plugin_get_proc_address(void *user_data, const char *name)
{
    (void)user_data;
    if (strcmp(name, "fake_extension_answer") != 0)
        return NULL;
    int (*function)(void) = fake_extension_answer;
    void *address;
    memcpy(&address, &function, sizeof address); /* function -> object pointer, POSIX way */
    return address;
}

MOEINT4_PLUGIN_API const moeint4_backend_iface *moeint4_plugin_backend(uint32_t core_api_version)
{
    (void)core_api_version;
    plugin_table = fake_backend_iface(&plugin_control);
    plugin_table.api_version = FAKE_PLUGIN_API_VERSION;
    plugin_table.id = (moeint4_backend)FAKE_PLUGIN_ID;
    plugin_table.get_proc_address = plugin_get_proc_address;
    return &plugin_table;
}
#else
/* Something exported, so the file is a valid plugin in every other way. */
__attribute__((visibility("default"))) int moeint4_plugin_something_else(void);
__attribute__((visibility("default"))) int moeint4_plugin_something_else(void)
{
    plugin_table = fake_backend_iface(&plugin_control);
    return plugin_table.api_version == 0;
}
#endif
