/* Finds and loads the GPU backend plugins (libmoeint4-xpu.so,
 * libmoeint4-hip.so) so that libmoeint4.so itself links no GPU runtime. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry/plugin_loader.h"

#include "base/error.h"
#include "registry/iface_check.h"
#include "registry/plugin_elf.h"
#include "registry/registry.h"

/* Any object inside libmoeint4.so serves to ask the loader where we live. */
static const char location_anchor;

/* Directory of the object holding this code (libmoeint4.so, or the program a
 * static build is linked into); "" when the loader cannot say. */
static void library_directory(char *dir, size_t cap)
{
    Dl_info info;
    dir[0] = '\0';
    if (!dladdr(&location_anchor, &info) || !info.dli_fname)
        return;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
        return;
    }
    size_t length = (size_t)(slash - info.dli_fname);
    if (length == 0)
        length = 1; /* the root directory */
    if (length >= cap)
        return;
    memcpy(dir, info.dli_fname, length);
    dir[length] = '\0';
}

const moeint4_backend_iface *mi4_plugin_open(const char *path, void **handle, char *reason,
                                             size_t reason_cap)
{
    char words[MI4_REASON_CAPACITY];
    if (!mi4_plugin_file_is_whole(path, words, sizeof words)) {
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE, "%s: cannot be loaded: %s",
                      path, words);
        return NULL;
    }
    void *opened = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!opened) {
        const char *loader_words = dlerror();
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE, "%s: cannot be loaded: %s",
                      path, loader_words ? loader_words : "unknown dlopen error");
        return NULL;
    }
    void *symbol = dlsym(opened, MOEINT4_PLUGIN_ENTRY_NAME);
    if (!symbol) {
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE,
                      "%s: " MOEINT4_PLUGIN_ENTRY_NAME " missing", path);
        dlclose(opened);
        return NULL;
    }
    moeint4_plugin_backend_fn entry_point;
    memcpy(&entry_point, &symbol, sizeof entry_point); /* object -> function pointer, POSIX way */
    const moeint4_backend_iface *iface = entry_point(MOEINT4_BACKEND_API_VERSION);
    if (!iface) {
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE,
                      "%s: " MOEINT4_PLUGIN_ENTRY_NAME " returned no table for core api version %d",
                      path, MOEINT4_BACKEND_API_VERSION);
        dlclose(opened);
        return NULL;
    }
    *handle = opened;
    return iface;
}

void mi4_plugin_close(void *handle) { dlclose(handle); }

static const moeint4_backend_iface *load_plugin_file(const char *path, moeint4_backend expected_id,
                                                     char *reason, size_t reason_cap)
{
    void *handle = NULL;
    const moeint4_backend_iface *iface = mi4_plugin_open(path, &handle, reason, reason_cap);
    if (!iface)
        return NULL;
    char words[MI4_REASON_CAPACITY];
    if (mi4_backend_iface_check(iface, words, sizeof words) != MOEINT4_SUCCESS) {
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE, "%s: %s", path, words);
        iface = NULL;
    } else if (iface->id != expected_id) {
        mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE,
                      "%s: its table says backend id %d, expected %d", path, (int)iface->id,
                      (int)expected_id);
        iface = NULL;
    }
    if (!iface)
        mi4_plugin_close(handle);
    /* On success the handle is kept open for the life of the process. */
    return iface;
}

/* Appends `dir` to the ':'-separated list of searched directories. */
static void note_searched(char *searched, size_t cap, const char *dir)
{
    size_t used = strlen(searched), length = strlen(dir);
    if (used + 1 + length + 1 > cap)
        return; /* the message lists what fits */
    if (used)
        searched[used++] = ':';
    memcpy(searched + used, dir, length + 1);
}

/* Tries `file_name` in `dir`. Returns 1 when the file exists (loaded or not:
 * the first file found decides, so a broken plugin is reported, never
 * silently replaced by another copy). */
static int try_directory(const char *dir, const char *file_name, moeint4_backend expected_id,
                         const moeint4_backend_iface **iface, char *reason, size_t reason_cap)
{
    char path[PATH_MAX];
    int length = snprintf(path, sizeof path, "%s/%s", dir, file_name);
    if (length < 0 || (size_t)length >= sizeof path || access(path, F_OK) != 0)
        return 0;
    *iface = load_plugin_file(path, expected_id, reason, reason_cap);
    return 1;
}

const moeint4_backend_iface *mi4_plugin_load(const char *file_name, moeint4_backend expected_id,
                                             char *reason, size_t reason_cap)
{
    const moeint4_backend_iface *iface = NULL;
    char searched[1024] = "";
    const char *search_path = getenv("MOEINT4_BACKEND_PATH");
    if (search_path) {
        const char *start = search_path;
        for (;;) {
            const char *end = strchr(start, ':');
            size_t length = end ? (size_t)(end - start) : strlen(start);
            if (length > 0 && length < PATH_MAX) {
                char dir[PATH_MAX];
                memcpy(dir, start, length);
                dir[length] = '\0';
                note_searched(searched, sizeof searched, dir);
                if (try_directory(dir, file_name, expected_id, &iface, reason, reason_cap))
                    return iface;
            }
            if (!end)
                break;
            start = end + 1;
        }
    }
    char own_dir[PATH_MAX];
    library_directory(own_dir, sizeof own_dir);
    if (own_dir[0]) {
        note_searched(searched, sizeof searched, own_dir);
        if (try_directory(own_dir, file_name, expected_id, &iface, reason, reason_cap))
            return iface;
    }
    mi4_fail_into(reason, reason_cap, MOEINT4_BACKEND_UNAVAILABLE, "%s not found in %s", file_name,
                  searched[0] ? searched : "(no directory to search)");
    return NULL;
}
