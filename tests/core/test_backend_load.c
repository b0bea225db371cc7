/* Third-party plugins loaded by path (moeint4_backend_load) and their
 * extensions (moeint4_backend_get_proc_address), with the fake plugins that
 * tests/core/CMakeLists.txt builds; argv[1] is the folder holding their
 * scenario folders. MOEINT4_BACKEND_PATH is empty, so "hip" and "xpu" stay
 * unloaded and the loaded table keeps its own name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_test_util.h"
#include "fake_backend.h"

#define SENTINEL_ID ((moeint4_backend)12345)

static const char *plugin_root;

static const char *plugin_path(const char *scenario)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s/libmoeint4-hip.so", plugin_root, scenario);
    return path;
}

static void check_refused(const char *scenario, moeint4_status expected, const char *words)
{
    moeint4_backend id = SENTINEL_ID;
    assert_status_says(moeint4_backend_load(plugin_path(scenario), &id), expected, words);
    assert_int_equal(id, SENTINEL_ID);
    if (!strstr(moeint4_last_error(), plugin_path(scenario)))
        fail_msg("\"%s\" does not name the file", moeint4_last_error());
}

static void test_refusals(void **state)
{
    (void)state;
    moeint4_backend id = SENTINEL_ID;
    assert_status_says(moeint4_backend_load(NULL, &id), MOEINT4_INVALID_ARGUMENT, "path is NULL");
    assert_status_says(moeint4_backend_load("x.so", NULL), MOEINT4_INVALID_ARGUMENT, "id is NULL");
    assert_status_says(moeint4_backend_load("", &id), MOEINT4_INVALID_ARGUMENT, "path is empty");
    assert_int_equal(id, SENTINEL_ID);
    check_refused("no-such-dir", MOEINT4_BACKEND_UNAVAILABLE, "cannot be loaded");
    check_refused("corrupt", MOEINT4_BACKEND_UNAVAILABLE, "too short for an ELF header");
    check_refused("truncated", MOEINT4_BACKEND_UNAVAILABLE, "cannot be loaded");
    check_refused("phoff", MOEINT4_BACKEND_UNAVAILABLE, "corrupt: ");
    check_refused("phnum", MOEINT4_BACKEND_UNAVAILABLE, "corrupt: no dynamic segment");
    check_refused("shstrndx", MOEINT4_BACKEND_UNAVAILABLE, "corrupt ELF header:");
    check_refused("nosym", MOEINT4_BACKEND_UNAVAILABLE, "moeint4_plugin_backend missing");
    check_refused("badversion", MOEINT4_VERSION_MISMATCH, "api version 7");
    /* Nothing was registered by the refusals. */
    assert_status_says(moeint4_backend_from_name("fake-plugin", &id), MOEINT4_INVALID_ARGUMENT,
                       "is not a backend");
}

static void test_load_and_use(void **state)
{
    (void)state;
    moeint4_backend id = SENTINEL_ID;
    assert_ok(moeint4_backend_load(plugin_path("good"), &id));
    assert_true(id >= MOEINT4_BACKEND_FIRST_CUSTOM);
    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_ok(moeint4_backend_query(id, &info));
    assert_string_equal(info.name, "fake-plugin");
    assert_int_equal(info.compiled, 1);
    assert_int_equal(info.available, 1);
    moeint4_backend by_name = SENTINEL_ID;
    assert_ok(moeint4_backend_from_name("fake-plugin", &by_name));
    assert_int_equal(by_name, id);
    /* The plugin's table has its own id (HIP); the loaded copy got a new one. */
    moeint4_backend_info hip;
    memset(&hip, 0, sizeof hip);
    hip.struct_size = sizeof hip;
    assert_ok(moeint4_backend_query(MOEINT4_BACKEND_HIP, &hip));
    assert_int_equal(hip.compiled, 0);

    /* It serves weights and forwards through the public API. */
    moeint4_context *ctx = util_context(id);
    tk_layer layer;
    util_make_layer(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 11);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    moeint4_weights *weights = NULL;
    assert_ok(moeint4_weights_prepare(ctx, &desc, &weights));
    moeint4_backend serving = SENTINEL_ID;
    assert_ok(moeint4_weights_backend(weights, &serving));
    assert_int_equal(serving, id);
    enum { M = 3, TOPK = 2 };
    float hidden[M * UTIL_HIDDEN], output[M * UTIL_HIDDEN];
    int32_t ids[M * TOPK];
    float router[M * TOPK];
    util_random_batch(5, MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, router);
    memset(output, 0xff, sizeof output);
    moeint4_forward_args args = util_args(MOEINT4_DTYPE_F32, M, TOPK, hidden, ids, router, output);
    assert_ok(moeint4_forward(ctx, weights, &args));
    for (int i = 0; i < M * UTIL_HIDDEN; i++)
        assert_true(output[i] == FAKE_OUTPUT_VALUE);
    moeint4_weights_release(weights);
    moeint4_context_destroy(ctx);
    tk_layer_free(&layer);

    /* Its extension, and NULL for everything else. */
    void *address = moeint4_backend_get_proc_address(id, "fake_extension_answer");
    assert_non_null(address);
    int (*answer)(void);
    memcpy(&answer, &address, sizeof answer);
    assert_int_equal(answer(), 42);
    assert_null(moeint4_backend_get_proc_address(id, "no_such_extension"));
    assert_null(moeint4_backend_get_proc_address(id, NULL));
    assert_null(moeint4_backend_get_proc_address(MOEINT4_BACKEND_CPU, "fake_extension_answer"));
    assert_null(moeint4_backend_get_proc_address(MOEINT4_BACKEND_HIP, "fake_extension_answer"));
    assert_null(moeint4_backend_get_proc_address((moeint4_backend)999, "fake_extension_answer"));

    /* The same plugin again: its name is taken; the first copy keeps working. */
    moeint4_backend again = SENTINEL_ID;
    assert_status_says(moeint4_backend_load(plugin_path("good"), &again), MOEINT4_INVALID_ARGUMENT,
                       "already taken");
    assert_int_equal(again, SENTINEL_ID);
    assert_non_null(moeint4_backend_get_proc_address(id, "fake_extension_answer"));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN_ROOT\n", argv[0]);
        return 2;
    }
    plugin_root = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_load_and_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
