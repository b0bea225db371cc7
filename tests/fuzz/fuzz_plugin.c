/* Fuzzes backend plugin loading. The registry loads each plugin once per
 * process, so the harness drives the loader's own entry point
 * (mi4_plugin_load, reachable in the static library) and
 * moeint4_register_backend directly:
 *  - table answers: the fuzz plugin (fuzz_plugin_so.c) returns a table
 *    mutated from a valid one (api version, struct_size, id, name, missing
 *    functions) or NULL; a table the loader accepts must be sound;
 *  - file contents: the plugin's own bytes truncated and/or with its ELF
 *    header corrupted, loaded in a child process (the dynamic loader's
 *    state cannot be reset in-process); the child must not die. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "registry/plugin_loader.h"
#include "registry/registry.h"
#include "fuzz_input.h"
#include "moeint4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PLUGIN_FILE "libmoeint4-hip.so"

typedef struct plugin_world {
    moeint4_backend_iface (*base_table)(moeint4_backend id);
    void (*set_answer)(const moeint4_backend_iface *table);
    uint8_t *file; /* the plugin's bytes */
    size_t file_size;
    char scratch_dir[64]; /* where corrupted copies are written */
    char plugin_dir[512]; /* the fuzz plugin's folder */
    char plugin_path[600];
} plugin_world;

static plugin_world the_world;

static void remove_scratch(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", the_world.scratch_dir, PLUGIN_FILE);
    unlink(path);
    rmdir(the_world.scratch_dir);
}

static const plugin_world *world(void)
{
    plugin_world *w = &the_world;
    if (w->file)
        return w;
    /* MOEINT4_FUZZ_PLUGIN_DIR: where the plugin is when the harness runs
     * outside its build tree (a long run on another machine) */
    const char *dir = getenv("MOEINT4_FUZZ_PLUGIN_DIR");
    snprintf(w->plugin_dir, sizeof w->plugin_dir, "%s", dir ? dir : FZ_PLUGIN_DIR);
    snprintf(w->plugin_path, sizeof w->plugin_path, "%.500s/%s", w->plugin_dir, PLUGIN_FILE);
    void *handle = dlopen(w->plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        abort();
    void *base = dlsym(handle, "fz_plugin_base_table"),
         *set = dlsym(handle, "fz_plugin_set_answer");
    if (!base || !set)
        abort();
    memcpy(&w->base_table, &base, sizeof base);
    memcpy(&w->set_answer, &set, sizeof set);
    FILE *f = fopen(w->plugin_path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0)
        abort();
    long length = ftell(f);
    rewind(f);
    w->file = fz_alloc((size_t)length);
    if (length <= 0 || fread(w->file, 1, (size_t)length, f) != (size_t)length)
        abort();
    fclose(f);
    w->file_size = (size_t)length;
    snprintf(w->scratch_dir, sizeof w->scratch_dir, "/tmp/moeint4-fuzz-plugin-XXXXXX");
    if (!mkdtemp(w->scratch_dir))
        abort();
    atexit(remove_scratch);
    return w;
}

static void check_table_answer(fz_input *in, const plugin_world *w)
{
    static const char long_name[] = "a-backend-name-much-longer-than-the-registry-keeps-it";
    static const char *const names[] = { "fuzzplugin", "", NULL, long_name, "cpu", "XPU" };
    static const uint32_t versions[] = { MOEINT4_BACKEND_API_VERSION, 0, 2, UINT32_MAX };
    moeint4_backend_iface table = w->base_table(MOEINT4_BACKEND_HIP);
    if (fz_pick(in, 4) == 0)
        table.api_version = versions[fz_pick(in, 4)];
    switch (fz_pick(in, 8)) {
    case 0: table.struct_size = 0; break;
    case 1: table.struct_size = sizeof table - 8; break; /* a later member missing: fine */
    case 2: table.struct_size = sizeof table + 64; break;
    case 3: table.struct_size = MOEINT4_BACKEND_IFACE_MIN_SIZE - 8; break;
    default: break;
    }
    if (fz_pick(in, 4) == 0)
        table.id = (moeint4_backend)(int)fz_u32(in);
    table.name = names[fz_pick(in, 6)];
    table.platform_priority = fz_pick(in, 2) ? 0 : (int)fz_u32(in);
    table.device_pointers = fz_pick(in, 3);
    unsigned missing = fz_pick(in, 2) ? 0 : fz_u8(in); /* which functions to drop */
    if (missing & 1)
        table.probe = NULL;
    if (missing & 2)
        table.supports = NULL;
    if (missing & 4)
        table.context_create = NULL;
    if (missing & 8)
        table.prepare = NULL;
    if (missing & 16)
        table.forward = NULL;
    if (missing & 32)
        table.release = NULL;
    if (missing & 64)
        table.context_destroy = NULL;
    int answer_null = fz_pick(in, 16) == 0;
    w->set_answer(answer_null ? NULL : &table);

    char reason[MI4_REASON_CAPACITY];
    memset(reason, 0, sizeof reason);
    const moeint4_backend_iface *loaded =
        mi4_plugin_load(PLUGIN_FILE, MOEINT4_BACKEND_HIP, reason, sizeof reason);
    if (loaded) {
        if (answer_null || loaded->api_version != MOEINT4_BACKEND_API_VERSION ||
            loaded->struct_size < MOEINT4_BACKEND_IFACE_MIN_SIZE ||
            loaded->id != MOEINT4_BACKEND_HIP || !loaded->probe || !loaded->supports ||
            !loaded->context_create || !loaded->prepare || !loaded->forward)
            abort(); /* an unsound table was accepted */
    } else if (reason[0] == '\0' || !memchr(reason, '\0', sizeof reason)) {
        abort(); /* refused without words */
    }

    /* The same table offered to moeint4_register_backend (a valid one is
     * added once; the registry then refuses the name or its full table). */
    moeint4_backend id = (moeint4_backend)-7;
    moeint4_status status = moeint4_register_backend(fz_pick(in, 16) ? &table : NULL, &id);
    if (status == MOEINT4_SUCCESS) {
        moeint4_backend_info info = { 0 };
        info.struct_size = sizeof info;
        if (id < MOEINT4_BACKEND_FIRST_CUSTOM || moeint4_backend_query(id, &info) != 0 ||
            !memchr(info.name, '\0', sizeof info.name))
            abort();
    } else if (id != (moeint4_backend)-7 || moeint4_last_error()[0] == '\0') {
        abort();
    }
    w->set_answer(NULL);
}

/* A truncated and/or header-corrupted copy, loaded by a child process. */
static void check_damaged_file(fz_input *in, const plugin_world *w)
{
    size_t length = w->file_size;
    int mode = fz_pick(in, 3); /* 0 truncate, 1 corrupt the ELF header, 2 both */
    if (mode != 1)
        length = fz_u32(in) % w->file_size;
    uint8_t *bytes = fz_alloc(w->file_size);
    memcpy(bytes, w->file, w->file_size);
    if (mode != 0) {
        int edits = fz_range(in, 1, 4);
        for (int i = 0; i < edits; i++)
            bytes[fz_u8(in) % 64] = fz_u8(in);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/%s", w->scratch_dir, PLUGIN_FILE);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, length, f) != length || fclose(f) != 0)
        abort();
    free(bytes);
    pid_t child = fork();
    if (child < 0)
        abort();
    if (child == 0) {
        setenv("MOEINT4_BACKEND_PATH", w->scratch_dir, 1);
        char reason[MI4_REASON_CAPACITY] = "";
        const moeint4_backend_iface *loaded =
            mi4_plugin_load(PLUGIN_FILE, MOEINT4_BACKEND_HIP, reason, sizeof reason);
        /* the damaged copy answers no table (answer is NULL in the child) */
        _exit(loaded || reason[0] == '\0' ? 3 : 0);
    }
    int status = 0;
    pid_t waited;
    do /* libFuzzer's timeout alarm interrupts the wait */
        waited = waitpid(child, &status, 0);
    while (waited < 0 && errno == EINTR);
    if (waited != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "loading a damaged plugin (%zu of %zu bytes, mode %d) %s %d\n", length,
                w->file_size, mode,
                WIFSIGNALED(status) ? "killed the process with signal" : "gave the exit code",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        abort();
    }
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const plugin_world *w = world();
    fz_input in;
    fz_init(&in, data, size);
    setenv("MOEINT4_BACKEND_PATH", w->plugin_dir, 1);
    if (fz_pick(&in, 4) == 3)
        check_damaged_file(&in, w);
    else
        check_table_answer(&in, w);
    return 0;
}
