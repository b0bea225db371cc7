/* Opening a checkpoint: which files, the shard index, one sorted tensor
 * table, config.json and the quantization description. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/checkpoint.h"
#include "base/alloc.h"
#include "base/error.h"

#define MAX_TEXT_BYTES ((size_t)64 << 20)
#define INDEX_NAME "model.safetensors.index.json"

/* Whole small file into a NUL-terminated buffer. 1 read, 0 absent, <0 error (set). */
static int read_text(const char *path, char **text, size_t *length, moeint4_status *status)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        *status = mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    size_t used = 0, cap = 0;
    for (;;) {
        if (used + 4096 + 1 > cap) {
            if (cap >= MAX_TEXT_BYTES) {
                fclose(f);
                mi4_free(buf);
                *status = mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: larger than %zu bytes", path,
                                   MAX_TEXT_BYTES);
                return -1;
            }
            size_t next = cap ? cap * 2 : 65536;
            char *grown = mi4_malloc(next);
            if (!grown) {
                fclose(f);
                mi4_free(buf);
                *status = mi4_fail(MOEINT4_OUT_OF_MEMORY, "%s: no memory to read it", path);
                return -1;
            }
            if (buf)
                memcpy(grown, buf, used);
            mi4_free(buf);
            buf = grown;
            cap = next;
        }
        size_t got = fread(buf + used, 1, cap - used - 1, f);
        used += got;
        if (got == 0)
            break;
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        mi4_free(buf);
        *status = mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: read error", path);
        return -1;
    }
    buf[used] = '\0';
    *text = buf;
    *length = used;
    return 1;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = mi4_malloc(a + b + 2);
    if (p)
        snprintf(p, a + b + 2, "%s/%s", dir, name);
    return p;
}

static moeint4_status add_file(moeint4_checkpoint *ck, const char *path)
{
    mi4_st_file *grown = mi4_malloc(sizeof *grown * (size_t)(ck->num_files + 1));
    if (!grown)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory to open %s", path);
    if (ck->files)
        memcpy(grown, ck->files, sizeof *grown * (size_t)ck->num_files);
    mi4_free(ck->files);
    ck->files = grown;
    moeint4_status status = mi4_st_open(path, &ck->files[ck->num_files]);
    if (status == MOEINT4_SUCCESS) {
        ck->file_bytes += ck->files[ck->num_files].map_bytes;
        ck->num_files++;
    }
    return status;
}

/* The shards an index names; then every weight_map entry must be found. */
static moeint4_status open_index(moeint4_checkpoint *ck, const char *dir, const char *text,
                                 size_t length)
{
    cJSON *root = cJSON_ParseWithLength(text, length);
    const cJSON *map = root ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: not JSON with a \"weight_map\" object",
                        INDEX_NAME);
    }
    moeint4_status status = MOEINT4_SUCCESS;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, map)
    {
        if (!cJSON_IsString(entry) || strchr(entry->valuestring, '/') ||
            entry->valuestring[0] == '\0' || entry->valuestring[0] == '.') {
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "%s: weight_map[\"%s\"] is not a file name in the checkpoint's "
                              "directory",
                              INDEX_NAME, entry->string);
            break;
        }
        int known = 0;
        for (int i = 0; i < ck->num_files && !known; i++)
            known = strcmp(ck->files[i].label, entry->valuestring) == 0;
        if (known)
            continue;
        char *path = join_path(dir, entry->valuestring);
        if (!path) {
            status = mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
            break;
        }
        struct stat st;
        if (stat(path, &st) != 0)
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "%s names shard %s (for tensor \"%s\"), but %s is missing",
                              INDEX_NAME, entry->valuestring, entry->string, path);
        else
            status = add_file(ck, path);
        mi4_free(path);
        if (status != MOEINT4_SUCCESS)
            break;
    }
    if (status == MOEINT4_SUCCESS)
        cJSON_ArrayForEach(entry, map)
        {
            const mi4_st_file *shard = NULL;
            for (int i = 0; i < ck->num_files; i++)
                if (strcmp(ck->files[i].label, entry->valuestring) == 0)
                    shard = &ck->files[i];
            if (!mi4_st_find(shard, entry->string)) {
                status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                  "%s says tensor \"%s\" is in %s, but %s has no such tensor",
                                  INDEX_NAME, entry->string, shard->label, shard->label);
                break;
            }
        }
    cJSON_Delete(root);
    return status;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* No index: every *.safetensors file in the directory, in name order. */
static moeint4_status open_all(moeint4_checkpoint *ck, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: cannot list: %s", dir, strerror(errno));
    char *names[256];
    int count = 0;
    moeint4_status status = MOEINT4_SUCCESS;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && status == MOEINT4_SUCCESS) {
        if (!ends_with(e->d_name, ".safetensors") || e->d_name[0] == '.')
            continue;
        if (count == 256)
            status = mi4_fail(MOEINT4_UNSUPPORTED, "%s: more than 256 .safetensors files and no %s",
                              dir, INDEX_NAME);
        else if (!(names[count] = join_path(dir, e->d_name)))
            status = mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
        else
            count++;
    }
    closedir(d);
    qsort(names, (size_t)count, sizeof names[0], by_string);
    for (int i = 0; i < count; i++) {
        if (status == MOEINT4_SUCCESS)
            status = add_file(ck, names[i]);
        mi4_free(names[i]);
    }
    if (status == MOEINT4_SUCCESS && count == 0)
        status = mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: no .safetensors file", dir);
    return status;
}

/* config.json (or the caller's text), then the quantization description. */
static moeint4_status read_configs(moeint4_checkpoint *ck, const char *dir,
                                   const moeint4_checkpoint_options *options)
{
    moeint4_status status = MOEINT4_SUCCESS;
    char *text = NULL;
    size_t length = 0;
    if (options && options->config_json) {
        status = mi4_config_parse_model("options.config_json", options->config_json,
                                        strlen(options->config_json), &ck->model, &ck->quant);
    } else {
        char *path = join_path(dir, "config.json");
        if (!path)
            return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
        int found = read_text(path, &text, &length, &status);
        if (found == 0)
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "%s is missing (a checkpoint needs its model config; for a single "
                              "file, pass options.config_json)",
                              path);
        else if (found > 0)
            status = mi4_config_parse_model("config.json", text, length, &ck->model, &ck->quant);
        mi4_free(text);
        mi4_free(path);
    }
    static const char *const side_files[] = { "quantize_config.json", "quant_config.json" };
    for (int i = 0; i < 2 && status == MOEINT4_SUCCESS && !ck->quant.present; i++) {
        char *path = join_path(dir, side_files[i]);
        if (!path)
            return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
        text = NULL;
        if (read_text(path, &text, &length, &status) > 0)
            status = mi4_config_parse_quant(side_files[i], text, length, &ck->quant);
        mi4_free(text);
        mi4_free(path);
    }
    if (status == MOEINT4_SUCCESS && !ck->quant.present && options && options->quantization_json)
        status = mi4_config_parse_quant("options.quantization_json", options->quantization_json,
                                        strlen(options->quantization_json), &ck->quant);
    return status;
}

static moeint4_status open_files(moeint4_checkpoint *ck, const char *path, char **dir_out)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode)) {
        const char *slash = strrchr(path, '/');
        size_t dir_len = slash ? (size_t)(slash - path) : 1;
        char *dir = mi4_malloc(dir_len + 1);
        if (!dir)
            return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
        memcpy(dir, slash ? path : ".", dir_len);
        dir[dir_len] = '\0';
        *dir_out = dir;
        return add_file(ck, path);
    }
    *dir_out = mi4_malloc(strlen(path) + 1);
    if (!*dir_out)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
    strcpy(*dir_out, path);
    char *index_path = join_path(path, INDEX_NAME);
    if (!index_path)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
    char *text = NULL;
    size_t length = 0;
    moeint4_status status = MOEINT4_SUCCESS;
    int found = read_text(index_path, &text, &length, &status);
    if (found > 0)
        status = open_index(ck, path, text, length);
    else if (found == 0)
        status = open_all(ck, path);
    mi4_free(text);
    mi4_free(index_path);
    return status;
}

moeint4_status mi4_ckpt_open(const char *path, const moeint4_checkpoint_options *options,
                             moeint4_checkpoint **out)
{
    moeint4_checkpoint *ck = mi4_calloc(1, sizeof *ck);
    if (!ck)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory for a checkpoint handle");
    pthread_mutex_init(&ck->lock, NULL);
    pthread_mutex_init(&ck->warnings_lock, NULL);
    char *dir = NULL;
    moeint4_status status = open_files(ck, path, &dir);
    if (status == MOEINT4_SUCCESS)
        status = mi4_ckpt_build_refs(ck);
    if (status == MOEINT4_SUCCESS)
        status = read_configs(ck, dir, options);
    mi4_free(dir);
    if (status == MOEINT4_SUCCESS)
        status = mi4_ckpt_discover_layers(ck);
    if (status != MOEINT4_SUCCESS) {
        mi4_ckpt_close(ck);
        return status;
    }
    *out = ck;
    return MOEINT4_SUCCESS;
}

void mi4_ckpt_close(moeint4_checkpoint *ck)
{
    if (!ck)
        return;
    for (int i = 0; i < ck->num_layers; i++) {
        mi4_ckpt_layer *l = &ck->layers[i];
        mi4_ckpt_stack_release(&l->routed.stack);
        mi4_ckpt_stack_release(&l->shared.stack);
        mi4_free(l->routed.proj);
        mi4_free(l->shared.proj);
    }
    mi4_free(ck->layers);
    for (int i = 0; i < ck->num_files; i++)
        mi4_st_close(&ck->files[i]);
    mi4_free(ck->files);
    mi4_free(ck->refs);
    mi4_free(ck->warnings);
    pthread_mutex_destroy(&ck->lock);
    pthread_mutex_destroy(&ck->warnings_lock);
    mi4_free(ck);
}
