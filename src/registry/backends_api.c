/* Public queries about the backends the registry knows. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"
#include "base/struct_size.h"
#include "registry/registry.h"

MOEINT4_API moeint4_status moeint4_backend_list(moeint4_backend *ids, int capacity, int *count)
{
    mi4_clear_error();
    if (!count)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "count is NULL");
    if (capacity < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "capacity = %d is negative", capacity);
    if (!ids && capacity > 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "ids is NULL but capacity = %d", capacity);
    const mi4_backend_entry *entries[MI4_MAX_BACKENDS];
    int total = mi4_registry_list(entries, MI4_MAX_BACKENDS);
    for (int i = 0; i < total && i < capacity; i++)
        ids[i] = entries[i]->id;
    *count = total;
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_backend_query(moeint4_backend id, moeint4_backend_info *info)
{
    mi4_clear_error();
    if (!info)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "info is NULL");
    moeint4_status status = mi4_struct_check_output(info, MOEINT4_BACKEND_INFO_MIN_SIZE, "info",
                                                    "moeint4_backend_info");
    if (status != MOEINT4_SUCCESS)
        return status;
    const mi4_backend_entry *entry = mi4_registry_find(id);
    if (!entry)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "id = %d is not a known backend id", (int)id);
    moeint4_backend_info filled;
    memset(&filled, 0, sizeof filled);
    filled.struct_size = sizeof filled;
    filled.id = entry->id;
    snprintf(filled.name, sizeof filled.name, "%s", entry->name);
    filled.compiled = entry->compiled;
    filled.available = mi4_registry_available(entry, 0, filled.reason, sizeof filled.reason);
    filled.device_pointers = entry->compiled ? entry->iface.device_pointers : 0;
    mi4_struct_write(info, &filled, sizeof filled);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_backend_from_name(const char *name, moeint4_backend *id)
{
    mi4_clear_error();
    if (!name)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "name is NULL");
    if (!id)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "id is NULL");
    if (strcasecmp(name, "auto") == 0) {
        *id = MOEINT4_BACKEND_AUTO;
        return MOEINT4_SUCCESS;
    }
    const mi4_backend_entry *entry = mi4_registry_find_name(name);
    if (!entry)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "name = \"%.64s\" is not a backend (auto, cpu, xpu, hip or a registered "
                        "name)",
                        name);
    *id = entry->id;
    return MOEINT4_SUCCESS;
}

MOEINT4_API void *moeint4_backend_get_proc_address(moeint4_backend id, const char *name)
{
    mi4_clear_error();
    if (!name)
        return NULL;
    const mi4_backend_entry *entry = mi4_registry_find(id);
    if (!entry || !entry->compiled || !entry->iface.get_proc_address)
        return NULL;
    return entry->iface.get_proc_address(entry->iface.user_data, name);
}
