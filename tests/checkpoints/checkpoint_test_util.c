#include "checkpoint_test_util.h"

#include <stdio.h>
#include <stdlib.h>

const char *ck_generated_dir = ".";

const char *ck_path(const char *a, const char *b)
{
    static char buf[1024];
    if (b)
        snprintf(buf, sizeof buf, "%s/%s/%s", ck_generated_dir, a, b);
    else
        snprintf(buf, sizeof buf, "%s/%s", ck_generated_dir, a);
    return buf;
}

cJSON *ck_read_json(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return cJSON_Parse(text);
}

float *ck_read_f32(const char *path, size_t count)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    float *data = malloc((count + 1) * sizeof *data); /* one more: a longer file is caught */
    size_t got = data ? fread(data, sizeof *data, count + 1, f) : 0;
    fclose(f);
    if (got != count) {
        free(data);
        return NULL;
    }
    return data;
}
