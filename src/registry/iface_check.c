#include "registry/iface_check.h"

#include <stddef.h>

#include "base/error.h"

moeint4_status mi4_backend_iface_check(const moeint4_backend_iface *iface, char *reason,
                                       size_t reason_cap)
{
    if (iface->api_version != MOEINT4_BACKEND_API_VERSION)
        return mi4_fail_into(reason, reason_cap, MOEINT4_VERSION_MISMATCH,
                             "api version %u, core expects %d", (unsigned)iface->api_version,
                             MOEINT4_BACKEND_API_VERSION);
    if (iface->struct_size < MOEINT4_BACKEND_IFACE_MIN_SIZE)
        return mi4_fail_into(reason, reason_cap, MOEINT4_VERSION_MISMATCH,
                             "backend table struct_size = %zu is below the first published size "
                             "of moeint4_backend_iface (%zu)",
                             iface->struct_size, (size_t)MOEINT4_BACKEND_IFACE_MIN_SIZE);
    const char *missing = !iface->probe            ? "probe"
                          : !iface->supports       ? "supports"
                          : !iface->context_create ? "context_create"
                          : !iface->prepare        ? "prepare"
                          : !iface->forward        ? "forward"
                                                   : NULL;
    if (missing)
        return mi4_fail_into(reason, reason_cap, MOEINT4_INVALID_ARGUMENT,
                             "backend table has no %s function (required)", missing);
    return MOEINT4_SUCCESS;
}
