/* safetensors files: an 8-byte little-endian header length, a JSON header
 * ({name: {dtype, shape, data_offsets}}, optional "__metadata__"), then the
 * data. Files are memory-mapped read-only; tensors point into the map. */
#ifndef MOEINT4_CHECKPOINT_SAFETENSORS_H
#define MOEINT4_CHECKPOINT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

/* Largest header accepted (the safetensors format's own limit). */
#define MI4_ST_MAX_HEADER_BYTES ((uint64_t)100 * 1000 * 1000)
#define MI4_ST_MAX_DIMS 8

typedef enum mi4_st_dtype {
    MI4_ST_BOOL,
    MI4_ST_U8,
    MI4_ST_I8,
    MI4_ST_I16,
    MI4_ST_U16,
    MI4_ST_F16,
    MI4_ST_BF16,
    MI4_ST_I32,
    MI4_ST_U32,
    MI4_ST_F32,
    MI4_ST_I64,
    MI4_ST_U64,
    MI4_ST_F64,
    MI4_ST_F8_E4M3,
    MI4_ST_F8_E5M2,
    MI4_ST_DTYPE_COUNT
} mi4_st_dtype;

typedef struct mi4_st_tensor {
    const char *name; /* owned by the file's name storage */
    mi4_st_dtype dtype;
    int ndim;
    int64_t shape[MI4_ST_MAX_DIMS];
    size_t offset; /* into the data section */
    size_t bytes;
    const uint8_t *data; /* into the map */
} mi4_st_tensor;

typedef struct mi4_st_file {
    char *path;        /* as opened (messages name it) */
    const char *label; /* its base name */
    void *map;
    size_t map_bytes;
    const uint8_t *data; /* the data section */
    size_t data_bytes;
    mi4_st_tensor *tensors; /* sorted by name */
    size_t count;
    char *names; /* every tensor name, NUL-separated */
} mi4_st_file;

/* "F16", "I32", ... */
const char *mi4_st_dtype_name(mi4_st_dtype dtype);
size_t mi4_st_dtype_size(mi4_st_dtype dtype);

/* Parses and validates a whole file image (header length, JSON header,
 * dtypes, shapes x dtype = bytes, offsets inside the data, no overlaps,
 * unique names). `label` names the file in messages. On success `out`
 * points into `bytes` (which must outlive it); on failure nothing is
 * allocated and the thread's error names the file and the tensor. */
moeint4_status mi4_st_parse(const char *label, const uint8_t *bytes, size_t size, mi4_st_file *out);
/* Maps `path` and parses it. */
moeint4_status mi4_st_open(const char *path, mi4_st_file *out);
/* Unmaps and frees; a zeroed struct is fine. */
void mi4_st_close(mi4_st_file *file);
/* The tensor called `name`, or NULL. */
const mi4_st_tensor *mi4_st_find(const mi4_st_file *file, const char *name);

#endif
