/* The struct_size rule of the ABI (include/moeint4.h) in one place: a
 * caller's struct of any size from its first published size upwards becomes
 * this library's full-size version, zeros (every field's default) past the
 * caller's size. Every entry point reads its structs only through these. */
#ifndef MOEINT4_BASE_STRUCT_SIZE_H
#define MOEINT4_BASE_STRUCT_SIZE_H

#include <stddef.h>

#include "moeint4.h"

/* Copies min(caller->struct_size, local_size) bytes of `caller` (a struct
 * that starts with size_t struct_size) into `local`, zero-fills the rest and
 * sets local's struct_size to local_size. A struct_size below `min_size`
 * fails with `too_small` ("<name>->struct_size = 8 is below the first
 * published size of <type> (112)"); `local` is then left zeroed. A field
 * appended later whose default is not 0 gets it from the entry point right
 * after this call. */
moeint4_status mi4_struct_read(void *local, size_t local_size, const void *caller, size_t min_size,
                               const char *name, const char *type, moeint4_status too_small);

/* For structs the library fills: checks the caller's struct_size like
 * mi4_struct_read (INVALID_ARGUMENT), nothing written. */
moeint4_status mi4_struct_check_output(const void *caller, size_t min_size, const char *name,
                                       const char *type);

/* Writes min(caller->struct_size, local_size) bytes of `local` over `caller`,
 * keeping the caller's struct_size (its tail beyond this library's struct is
 * left as the caller set it). */
void mi4_struct_write(void *caller, const void *local, size_t local_size);

/* The usual call: `local` a struct variable, `caller` a pointer to the same
 * type, MIN its MOEINT4_*_MIN_SIZE. */
#define MI4_STRUCT_READ(local, caller, min_size, name, type)                                       \
    mi4_struct_read(&(local), sizeof(local), (caller), (min_size), (name), (type),                 \
                    MOEINT4_INVALID_ARGUMENT)

#endif
