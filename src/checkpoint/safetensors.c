/* Reading and validating safetensors files. Everything the header says is
 * checked against the file before a tensor is handed out: a checkpoint on
 * disk is untrusted input. */
#include "checkpoint/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"

static const struct {
    const char *name;
    size_t size;
} dtype_table[MI4_ST_DTYPE_COUNT] = {
    [MI4_ST_BOOL] = { "BOOL", 1 },       [MI4_ST_U8] = { "U8", 1 },
    [MI4_ST_I8] = { "I8", 1 },           [MI4_ST_I16] = { "I16", 2 },
    [MI4_ST_U16] = { "U16", 2 },         [MI4_ST_F16] = { "F16", 2 },
    [MI4_ST_BF16] = { "BF16", 2 },       [MI4_ST_I32] = { "I32", 4 },
    [MI4_ST_U32] = { "U32", 4 },         [MI4_ST_F32] = { "F32", 4 },
    [MI4_ST_I64] = { "I64", 8 },         [MI4_ST_U64] = { "U64", 8 },
    [MI4_ST_F64] = { "F64", 8 },         [MI4_ST_F8_E4M3] = { "F8_E4M3", 1 },
    [MI4_ST_F8_E5M2] = { "F8_E5M2", 1 },
};

const char *mi4_st_dtype_name(mi4_st_dtype dtype)
{
    return (unsigned)dtype < MI4_ST_DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

size_t mi4_st_dtype_size(mi4_st_dtype dtype)
{
    return (unsigned)dtype < MI4_ST_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

static int dtype_from_name(const char *name, mi4_st_dtype *dtype)
{
    for (int d = 0; d < MI4_ST_DTYPE_COUNT; d++)
        if (strcmp(name, dtype_table[d].name) == 0) {
            *dtype = (mi4_st_dtype)d;
            return 1;
        }
    return 0;
}

/* A JSON number that is a non-negative integer below 2^53 (exact in a double). */
static int json_size(const cJSON *item, uint64_t *value)
{
    if (!cJSON_IsNumber(item))
        return 0;
    double v = item->valuedouble;
    if (!(v >= 0.0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v)
        return 0;
    *value = (uint64_t)v;
    return 1;
}

static moeint4_status parse_tensor(const char *label, const cJSON *entry, size_t data_bytes,
                                   mi4_st_tensor *t)
{
    const char *name = entry->string;
    if (!cJSON_IsObject(entry))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": header entry is not an object", label, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *offsets = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsString(dtype) || !dtype_from_name(dtype->valuestring, &t->dtype))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": dtype %s%s%s is not a safetensors dtype", label, name,
                        cJSON_IsString(dtype) ? "\"" : "",
                        cJSON_IsString(dtype) ? dtype->valuestring : "(missing)",
                        cJSON_IsString(dtype) ? "\"" : "");
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > MI4_ST_MAX_DIMS)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": shape is not an array of at most %d sizes", label, name,
                        MI4_ST_MAX_DIMS);
    uint64_t bytes = mi4_st_dtype_size(t->dtype);
    int overflow = 0;
    t->ndim = 0;
    const cJSON *dim;
    cJSON_ArrayForEach(dim, shape)
    {
        uint64_t n;
        if (!json_size(dim, &n) || n > INT64_MAX)
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "%s: tensor \"%s\": shape[%d] is not a non-negative integer", label,
                            name, t->ndim);
        t->shape[t->ndim++] = (int64_t)n;
        if (n != 0 && bytes > UINT64_MAX / n)
            overflow = 1;
        else
            bytes *= n;
    }
    uint64_t begin, end;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_size(cJSON_GetArrayItem(offsets, 0), &begin) ||
        !json_size(cJSON_GetArrayItem(offsets, 1), &end) || end < begin)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": data_offsets is not [begin, end] with begin <= end",
                        label, name);
    if (end > data_bytes)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the end of the "
                        "data (%zu bytes; the file is truncated or the header is wrong)",
                        label, name, (unsigned long long)begin, (unsigned long long)end,
                        data_bytes);
    if (overflow || bytes != end - begin)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": dtype %s x shape needs %s%llu bytes but data_offsets "
                        "give %llu",
                        label, name, mi4_st_dtype_name(t->dtype), overflow ? "more than " : "",
                        (unsigned long long)(overflow ? UINT64_MAX : bytes),
                        (unsigned long long)(end - begin));
    t->offset = (size_t)begin;
    t->bytes = (size_t)bytes;
    return MOEINT4_SUCCESS;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const mi4_st_tensor *)a)->name, ((const mi4_st_tensor *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
    const mi4_st_tensor *x = *(const mi4_st_tensor *const *)a,
                        *y = *(const mi4_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* No two non-empty tensors share a byte; names are unique. */
static moeint4_status check_layout(const char *label, mi4_st_file *f)
{
    qsort(f->tensors, f->count, sizeof *f->tensors, by_name);
    for (size_t i = 1; i < f->count; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "%s: tensor \"%s\" appears twice in the header", label,
                            f->tensors[i].name);
    if (f->count < 2)
        return MOEINT4_SUCCESS;
    const mi4_st_tensor **order = mi4_malloc(sizeof *order * f->count);
    if (!order)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "%s: no memory to check %zu tensors", label,
                        f->count);
    for (size_t i = 0; i < f->count; i++)
        order[i] = &f->tensors[i];
    qsort(order, f->count, sizeof *order, by_offset);
    moeint4_status status = MOEINT4_SUCCESS;
    const mi4_st_tensor *last = NULL;
    for (size_t i = 0; i < f->count && status == MOEINT4_SUCCESS; i++) {
        if (order[i]->bytes == 0)
            continue;
        if (last && order[i]->offset < last->offset + last->bytes)
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "%s: tensors \"%s\" and \"%s\" overlap (data_offsets [%zu, %zu] "
                              "and [%zu, %zu])",
                              label, last->name, order[i]->name, last->offset,
                              last->offset + last->bytes, order[i]->offset,
                              order[i]->offset + order[i]->bytes);
        last = order[i];
    }
    mi4_free(order);
    return status;
}

static moeint4_status parse_header(const char *label, const cJSON *root, size_t data_bytes,
                                   mi4_st_file *f)
{
    size_t count = 0, name_bytes = 0;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, root)
    {
        if (!entry->string)
            return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: header member without a name", label);
        if (strcmp(entry->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(entry))
                return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                "%s: \"__metadata__\" is not an object of strings", label);
            continue;
        }
        count++;
        name_bytes += strlen(entry->string) + 1;
    }
    f->tensors = mi4_calloc(count ? count : 1, sizeof *f->tensors);
    f->names = mi4_malloc(name_bytes ? name_bytes : 1);
    if (!f->tensors || !f->names)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "%s: no memory for %zu tensor entries", label,
                        count);
    char *next_name = f->names;
    cJSON_ArrayForEach(entry, root)
    {
        if (strcmp(entry->string, "__metadata__") == 0)
            continue;
        mi4_st_tensor *t = &f->tensors[f->count];
        moeint4_status status = parse_tensor(label, entry, data_bytes, t);
        if (status != MOEINT4_SUCCESS)
            return status;
        size_t len = strlen(entry->string) + 1;
        memcpy(next_name, entry->string, len);
        t->name = next_name;
        next_name += len;
        f->count++;
    }
    return check_layout(label, f);
}

moeint4_status mi4_st_parse(const char *label, const uint8_t *bytes, size_t size, mi4_st_file *out)
{
    if (size < 8)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: %zu bytes is shorter than the 8-byte header length (truncated file)",
                        label, size);
    uint64_t header_bytes = 0;
    for (int i = 7; i >= 0; i--)
        header_bytes = header_bytes << 8 | bytes[i];
    if (header_bytes > MI4_ST_MAX_HEADER_BYTES)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: header length %llu is over the safetensors limit of 100 MB", label,
                        (unsigned long long)header_bytes);
    if (header_bytes > size - 8)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: header length %llu runs past the end of the file (%zu bytes)", label,
                        (unsigned long long)header_bytes, size);
    const char *header = (const char *)bytes + 8;
    const char *json_end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(header, (size_t)header_bytes, &json_end, 0);
    if (!root) {
        size_t at = json_end && json_end >= header ? (size_t)(json_end - header) : 0;
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: the header (%llu bytes) is not valid JSON (error near byte %zu)",
                        label, (unsigned long long)header_bytes, at);
    }
    mi4_st_file f = { 0 };
    moeint4_status status = MOEINT4_SUCCESS;
    if (!cJSON_IsObject(root))
        status =
            mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: the header is JSON but not an object", label);
    size_t data_bytes = size - 8 - (size_t)header_bytes;
    if (status == MOEINT4_SUCCESS)
        status = parse_header(label, root, data_bytes, &f);
    cJSON_Delete(root);
    if (status != MOEINT4_SUCCESS) {
        mi4_free(f.tensors);
        mi4_free(f.names);
        return status;
    }
    f.data = bytes + 8 + header_bytes;
    f.data_bytes = data_bytes;
    for (size_t i = 0; i < f.count; i++)
        f.tensors[i].data = f.data + f.tensors[i].offset;
    *out = f;
    return MOEINT4_SUCCESS;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

moeint4_status mi4_st_open(const char *path, mi4_st_file *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int code = errno;
            close(fd);
            return mi4_fail(code == ENOMEM ? MOEINT4_OUT_OF_MEMORY : MOEINT4_INVALID_ARGUMENT,
                            "%s: cannot map %zu bytes: %s", path, size, strerror(code));
        }
    }
    close(fd);
    char *path_copy = mi4_malloc(strlen(path) + 1);
    if (!path_copy) {
        if (map)
            munmap(map, size);
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "%s: no memory", path);
    }
    strcpy(path_copy, path);
    static const uint8_t empty[1] = { 0 };
    mi4_st_file f = { 0 };
    moeint4_status status =
        mi4_st_parse(base_name(path_copy), map ? (const uint8_t *)map : empty, size, &f);
    if (status != MOEINT4_SUCCESS) {
        mi4_free(path_copy);
        if (map)
            munmap(map, size);
        return status;
    }
    f.path = path_copy;
    f.label = base_name(f.path);
    f.map = map;
    f.map_bytes = size;
    *out = f;
    return MOEINT4_SUCCESS;
}

void mi4_st_close(mi4_st_file *file)
{
    if (!file)
        return;
    if (file->map)
        munmap(file->map, file->map_bytes);
    mi4_free(file->tensors);
    mi4_free(file->names);
    mi4_free(file->path);
    memset(file, 0, sizeof *file);
}

const mi4_st_tensor *mi4_st_find(const mi4_st_file *file, const char *name)
{
    mi4_st_tensor key = { .name = name };
    return file->count ? bsearch(&key, file->tensors, file->count, sizeof key, by_name) : NULL;
}
