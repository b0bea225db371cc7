/* The checkpoint's one table of tensors (every file's, sorted by name) and its
 * warnings: what the layer and stacking code look up and report into. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "checkpoint/checkpoint.h"

void mi4_ckpt_warn(moeint4_checkpoint *ck, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    size_t add = strlen(line) + 1;
    pthread_mutex_lock(&ck->warnings_lock);
    char *grown = mi4_malloc(ck->warnings_length + add + 1);
    if (grown) {
        if (ck->warnings)
            memcpy(grown, ck->warnings, ck->warnings_length);
        memcpy(grown + ck->warnings_length, line, add - 1);
        grown[ck->warnings_length + add - 1] = '\n';
        grown[ck->warnings_length + add] = '\0';
        mi4_free(ck->warnings);
        ck->warnings = grown;
        ck->warnings_length += add;
        ck->num_warnings++;
    }
    pthread_mutex_unlock(&ck->warnings_lock);
}

static int by_ref_name(const void *a, const void *b)
{
    return strcmp(((const mi4_ckpt_ref *)a)->tensor->name, ((const mi4_ckpt_ref *)b)->tensor->name);
}

const mi4_ckpt_ref *mi4_ckpt_find(const moeint4_checkpoint *ck, const char *name)
{
    mi4_st_tensor key_tensor = { .name = name };
    mi4_ckpt_ref key = { .tensor = &key_tensor };
    return ck->num_refs ? bsearch(&key, ck->refs, ck->num_refs, sizeof key, by_ref_name) : NULL;
}

const mi4_ckpt_ref *mi4_ckpt_find_prefix(const moeint4_checkpoint *ck, const char *prefix)
{
    size_t lo = 0, hi = ck->num_refs, length = strlen(prefix);
    while (lo < hi) { /* the first name >= prefix */
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(ck->refs[mid].tensor->name, prefix) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ck->num_refs && strncmp(ck->refs[lo].tensor->name, prefix, length) == 0
               ? &ck->refs[lo]
               : NULL;
}

moeint4_status mi4_ckpt_build_refs(moeint4_checkpoint *ck)
{
    size_t total = 0;
    for (int i = 0; i < ck->num_files; i++)
        total += ck->files[i].count;
    ck->refs = mi4_malloc(sizeof *ck->refs * (total ? total : 1));
    if (!ck->refs)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory for a table of %zu tensors", total);
    for (int i = 0; i < ck->num_files; i++)
        for (size_t t = 0; t < ck->files[i].count; t++)
            ck->refs[ck->num_refs++] = (mi4_ckpt_ref){ &ck->files[i].tensors[t], &ck->files[i] };
    qsort(ck->refs, ck->num_refs, sizeof *ck->refs, by_ref_name);
    for (size_t i = 1; i < ck->num_refs; i++)
        if (strcmp(ck->refs[i - 1].tensor->name, ck->refs[i].tensor->name) == 0)
            return mi4_fail(MOEINT4_INVALID_ARGUMENT, "tensor \"%s\" is in both %s and %s",
                            ck->refs[i].tensor->name, ck->refs[i - 1].file->label,
                            ck->refs[i].file->label);
    return MOEINT4_SUCCESS;
}
