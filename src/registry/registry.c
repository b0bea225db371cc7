/* The backend registry (see registry.h): built-in CPU backend, the XPU and HIP
 * plugins, and third-party backends added with moeint4_register_backend. */
#include "registry/registry.h"

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/struct_size.h"
#include "registry/builtin.h"
#include "registry/iface_check.h"
#include "registry/plugin_loader.h"

/* Probe results are remembered for the first few device indices; higher
 * indices are probed every time (no engine has that many GPUs per node). */
#define MI4_PROBE_CACHE_DEVICES 16

enum { MI4_PROBE_UNKNOWN = 0, MI4_PROBE_OK = 1, MI4_PROBE_FAILED = 2 };

typedef struct mi4_probe_result {
    int state;
    char reason[MI4_REASON_CAPACITY];
} mi4_probe_result;

static pthread_once_t registry_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mi4_backend_entry registry_entries[MI4_MAX_BACKENDS];
static int registry_count; /* guarded by registry_lock */
static int registry_next_custom_id = MOEINT4_BACKEND_FIRST_CUSTOM;
static mi4_probe_result probe_cache[MI4_MAX_BACKENDS][MI4_PROBE_CACHE_DEVICES];

static int default_priority(moeint4_backend id)
{
    switch (id) {
    case MOEINT4_BACKEND_CPU: return MOEINT4_PRIORITY_CPU;
    case MOEINT4_BACKEND_XPU: return MOEINT4_PRIORITY_XPU;
    case MOEINT4_BACKEND_HIP: return MOEINT4_PRIORITY_HIP;
    default: return MOEINT4_PRIORITY_CUSTOM;
    }
}

/* Copies a checked table into the entry and points its name at the entry's
 * own storage, so the caller's strings need not outlive registration. */
static void entry_adopt_iface(mi4_backend_entry *entry, const moeint4_backend_iface *iface)
{
    /* Checked (mi4_backend_iface_check): at least the first published size;
     * functions appended since stay NULL for an older table. */
    mi4_struct_read(&entry->iface, sizeof entry->iface, iface, MOEINT4_BACKEND_IFACE_MIN_SIZE,
                    "iface", "moeint4_backend_iface", MOEINT4_VERSION_MISMATCH);
    entry->iface.id = entry->id;
    entry->iface.name = entry->name;
    entry->priority =
        iface->platform_priority > 0 ? iface->platform_priority : default_priority(entry->id);
    entry->compiled = 1;
    entry->load_reason[0] = '\0';
}

moeint4_status mi4_fail_from_backend(const mi4_backend_entry *entry, moeint4_status status,
                                     const char *err)
{
    if (status <= MOEINT4_SUCCESS || status > MOEINT4_INTERNAL_ERROR)
        return mi4_fail(MOEINT4_INTERNAL_ERROR, "%s backend returned status %d: %s", entry->name,
                        (int)status, err && err[0] ? err : "(no message)");
    return mi4_fail(status, "%s backend: %s", entry->name,
                    err && err[0] ? err : "failed without a message");
}

static void registry_add_builtin_cpu(void)
{
    mi4_backend_entry *entry = &registry_entries[registry_count];
    entry->id = MOEINT4_BACKEND_CPU;
    snprintf(entry->name, sizeof entry->name, "cpu");
    const moeint4_backend_iface *iface = mi4_cpu_backend_iface();
    char reason[MI4_REASON_CAPACITY];
    if (iface && mi4_backend_iface_check(iface, reason, sizeof reason) == MOEINT4_SUCCESS) {
        entry_adopt_iface(entry, iface);
    } else {
        entry->priority = MOEINT4_PRIORITY_CPU;
        snprintf(entry->load_reason, sizeof entry->load_reason, "built-in cpu backend: %.200s",
                 iface ? reason : "no table");
    }
    registry_count++;
}

static void registry_add_plugin(moeint4_backend id, const char *name, const char *file_name)
{
    mi4_backend_entry *entry = &registry_entries[registry_count];
    entry->id = id;
    snprintf(entry->name, sizeof entry->name, "%s", name);
    entry->priority = default_priority(id);
    const moeint4_backend_iface *iface =
        mi4_plugin_load(file_name, id, entry->load_reason, sizeof entry->load_reason);
    if (iface)
        entry_adopt_iface(entry, iface);
    registry_count++;
}

static void registry_init(void)
{
    pthread_mutex_lock(&registry_lock);
    registry_add_builtin_cpu();
    registry_add_plugin(MOEINT4_BACKEND_XPU, "xpu", "libmoeint4-xpu" MOEINT4_PLUGIN_SUFFIX);
    registry_add_plugin(MOEINT4_BACKEND_HIP, "hip", "libmoeint4-hip" MOEINT4_PLUGIN_SUFFIX);
    pthread_mutex_unlock(&registry_lock);
}

static int registry_snapshot_count(void)
{
    pthread_once(&registry_once, registry_init);
    pthread_mutex_lock(&registry_lock);
    int count = registry_count;
    pthread_mutex_unlock(&registry_lock);
    return count;
}

const mi4_backend_entry *mi4_registry_find(moeint4_backend id)
{
    int count = registry_snapshot_count();
    for (int i = 0; i < count; i++)
        if (registry_entries[i].id == id)
            return &registry_entries[i];
    return NULL;
}

const mi4_backend_entry *mi4_registry_find_name(const char *name)
{
    int count = registry_snapshot_count();
    for (int i = 0; i < count; i++)
        if (strcasecmp(registry_entries[i].name, name) == 0)
            return &registry_entries[i];
    return NULL;
}

static int entry_goes_before(const mi4_backend_entry *a, const mi4_backend_entry *b)
{
    return a->priority < b->priority || (a->priority == b->priority && a->id < b->id);
}

int mi4_registry_list(const mi4_backend_entry **entries, int cap)
{
    const mi4_backend_entry *sorted[MI4_MAX_BACKENDS];
    int count = registry_snapshot_count();
    for (int i = 0; i < count; i++) {
        const mi4_backend_entry *entry = &registry_entries[i];
        int j = i;
        while (j > 0 && entry_goes_before(entry, sorted[j - 1])) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = entry;
    }
    for (int i = 0; i < count && i < cap; i++)
        entries[i] = sorted[i];
    return count;
}

int mi4_registry_available(const mi4_backend_entry *entry, int device_index, char *reason,
                           size_t reason_cap)
{
    if (!entry->compiled) {
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE, "%s", entry->load_reason);
        return 0;
    }
    ptrdiff_t slot = entry - registry_entries;
    int cacheable = device_index >= 0 && device_index < MI4_PROBE_CACHE_DEVICES;
    mi4_probe_result *cached = cacheable ? &probe_cache[slot][device_index] : NULL;
    if (cached) {
        pthread_mutex_lock(&registry_lock);
        mi4_probe_result copy = *cached;
        pthread_mutex_unlock(&registry_lock);
        if (copy.state != MI4_PROBE_UNKNOWN) {
            mi4_fail_into(reason, reason_cap, MOEINT4_SUCCESS, "%s", copy.reason);
            return copy.state == MI4_PROBE_OK;
        }
    }
    /* Probe outside the lock: a probe may be slow or call back into us. Two
     * threads may both probe the first time; both get the same answer. */
    char words[MI4_REASON_CAPACITY] = "";
    int ok = entry->iface.probe(entry->iface.user_data, device_index, words, sizeof words) == 1;
    words[sizeof words - 1] = '\0';
    if (ok)
        words[0] = '\0';
    else if (!words[0])
        snprintf(words, sizeof words, "%s probe failed without a reason", entry->name);
    if (cached) {
        pthread_mutex_lock(&registry_lock);
        cached->state = ok ? MI4_PROBE_OK : MI4_PROBE_FAILED;
        memcpy(cached->reason, words, sizeof words);
        pthread_mutex_unlock(&registry_lock);
    }
    mi4_fail_into(reason, reason_cap, MOEINT4_SUCCESS, "%s", words);
    return ok;
}

static int name_is_acceptable(const char *name)
{
    size_t length = strlen(name);
    if (length == 0 || length >= MI4_NAME_CAPACITY)
        return 0;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.';
        if (!ok)
            return 0;
    }
    return 1;
}

/* Checks and adds a third-party table under a new custom id. `origin` names
 * the table in messages ("iface", or the plugin's path). */
static moeint4_status register_table(const moeint4_backend_iface *iface, const char *origin,
                                     moeint4_backend *id)
{
    char reason[MI4_REASON_CAPACITY];
    moeint4_status status = mi4_backend_iface_check(iface, reason, sizeof reason);
    if (status != MOEINT4_SUCCESS)
        return mi4_fail(status, "%s: %s", origin, reason);
    if (!iface->name || !name_is_acceptable(iface->name))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s->name must be 1 to %d letters, digits, '_', '-' or '.'", origin,
                        MI4_NAME_CAPACITY - 1);
    if (strcasecmp(iface->name, "auto") == 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s->name \"auto\" is reserved", origin);

    pthread_once(&registry_once, registry_init);
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < registry_count; i++) {
        if (strcasecmp(registry_entries[i].name, iface->name) == 0) {
            pthread_mutex_unlock(&registry_lock);
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "%s->name \"%s\" is already taken by backend id %d", origin,
                            iface->name, (int)registry_entries[i].id);
        }
    }
    if (registry_count == MI4_MAX_BACKENDS) {
        pthread_mutex_unlock(&registry_lock);
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "the registry holds %d backends already (its limit)",
                        MI4_MAX_BACKENDS);
    }
    mi4_backend_entry *entry = &registry_entries[registry_count];
    entry->id = (moeint4_backend)registry_next_custom_id++;
    snprintf(entry->name, sizeof entry->name, "%s", iface->name);
    entry_adopt_iface(entry, iface);
    registry_count++; /* publishes the entry: readers see it complete */
    *id = entry->id;
    pthread_mutex_unlock(&registry_lock);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_register_backend(const moeint4_backend_iface *iface,
                                                    moeint4_backend *id)
{
    mi4_clear_error();
    if (!iface)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "iface is NULL");
    if (!id)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "id is NULL");
    return register_table(iface, "iface", id);
}

MOEINT4_API moeint4_status moeint4_backend_load(const char *path, moeint4_backend *id)
{
    mi4_clear_error();
    if (!path)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "path is NULL");
    if (!id)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "id is NULL");
    if (!path[0])
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "path is empty");
    char reason[MI4_REASON_CAPACITY + PATH_MAX];
    void *handle = NULL;
    const moeint4_backend_iface *iface = mi4_plugin_open(path, &handle, reason, sizeof reason);
    if (!iface)
        return mi4_fail(MOEINT4_BACKEND_UNAVAILABLE, "%s", reason);
    char origin[PATH_MAX + 16];
    snprintf(origin, sizeof origin, "%s: table", path);
    moeint4_status status = register_table(iface, origin, id);
    if (status != MOEINT4_SUCCESS)
        mi4_plugin_close(handle); /* else kept open for the life of the process */
    return status;
}
