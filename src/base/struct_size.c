/* The struct_size rule (struct_size.h). */
#include "base/struct_size.h"

#include <string.h>

#include "base/error.h"

static size_t caller_size(const void *caller)
{
    size_t size;
    memcpy(&size, caller, sizeof size); /* every public struct starts with it */
    return size;
}

static moeint4_status check_size(size_t size, size_t min_size, const char *name, const char *type,
                                 moeint4_status too_small)
{
    if (size >= min_size)
        return MOEINT4_SUCCESS;
    return mi4_fail(too_small,
                    "%s->struct_size = %zu is below the first published size of %s (%zu); set "
                    "it to sizeof(%s)",
                    name, size, type, min_size, type);
}

moeint4_status mi4_struct_read(void *local, size_t local_size, const void *caller, size_t min_size,
                               const char *name, const char *type, moeint4_status too_small)
{
    memset(local, 0, local_size);
    size_t size = caller_size(caller);
    moeint4_status status = check_size(size, min_size, name, type, too_small);
    if (status != MOEINT4_SUCCESS)
        return status;
    memcpy(local, caller, size < local_size ? size : local_size);
    memcpy(local, &local_size, sizeof local_size);
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_struct_check_output(const void *caller, size_t min_size, const char *name,
                                       const char *type)
{
    return check_size(caller_size(caller), min_size, name, type, MOEINT4_INVALID_ARGUMENT);
}

void mi4_struct_write(void *caller, const void *local, size_t local_size)
{
    size_t size = caller_size(caller);
    size_t bytes = size < local_size ? size : local_size;
    if (bytes > sizeof size)
        memcpy((char *)caller + sizeof size, (const char *)local + sizeof size,
               bytes - sizeof size);
}
