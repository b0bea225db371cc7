/* The registry's public face: versions, statuses, backend list/query/names,
 * third-party registration and the memory helpers' host defaults. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "core_test_util.h"
#include "fake_backend.h"

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(moeint4_version(), MOEINT4_VERSION_NUMBER);
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", MOEINT4_VERSION_MAJOR, MOEINT4_VERSION_MINOR,
             MOEINT4_VERSION_PATCH);
    assert_string_equal(moeint4_version_string(), expected);
}

static void test_status_strings(void **state)
{
    (void)state;
    assert_string_equal(moeint4_status_string(MOEINT4_SUCCESS), "MOEINT4_SUCCESS");
    assert_string_equal(moeint4_status_string(MOEINT4_VERSION_MISMATCH),
                        "MOEINT4_VERSION_MISMATCH");
    assert_string_equal(moeint4_status_string((moeint4_status)77), "MOEINT4_UNKNOWN_STATUS");
    /* pinned numeric values */
    assert_int_equal(MOEINT4_INVALID_ARGUMENT, 1);
    assert_int_equal(MOEINT4_BACKEND_UNAVAILABLE, 4);
    assert_int_equal(MOEINT4_INTERNAL_ERROR, 7);
    assert_int_equal(MOEINT4_BACKEND_FIRST_CUSTOM, 16);
}

static int position_of(const moeint4_backend *ids, int count, moeint4_backend id)
{
    for (int i = 0; i < count; i++)
        if (ids[i] == id)
            return i;
    return -1;
}

static void test_builtin_list_and_query(void **state)
{
    (void)state;
    int count = -1;
    assert_ok(moeint4_backend_list(NULL, 0, &count));
    assert_true(count >= 3);
    moeint4_backend ids[64];
    int again = 0;
    assert_ok(moeint4_backend_list(ids, 64, &again));
    assert_int_equal(again, count);
    int cpu = position_of(ids, count, MOEINT4_BACKEND_CPU);
    int xpu = position_of(ids, count, MOEINT4_BACKEND_XPU);
    int hip = position_of(ids, count, MOEINT4_BACKEND_HIP);
    assert_true(cpu >= 0 && xpu >= 0 && hip >= 0);
    assert_true(xpu < hip && hip < cpu); /* XPU 100, HIP 200, CPU 1000 */

    moeint4_backend partial[1] = { MOEINT4_BACKEND_AUTO };
    assert_ok(moeint4_backend_list(partial, 1, &again));
    assert_int_equal(partial[0], ids[0]);
    assert_int_equal(again, count);
    assert_status_says(moeint4_backend_list(NULL, 2, &again), MOEINT4_INVALID_ARGUMENT, "ids");
    assert_status_says(moeint4_backend_list(ids, 2, NULL), MOEINT4_INVALID_ARGUMENT, "count");

    moeint4_backend_info info;
    memset(&info, 0x5a, sizeof info);
    info.struct_size = sizeof info;
    assert_ok(moeint4_backend_query(MOEINT4_BACKEND_CPU, &info));
    assert_string_equal(info.name, "cpu");
    assert_int_equal(info.id, MOEINT4_BACKEND_CPU);
    assert_int_equal(info.compiled, 1);
    assert_int_equal(info.available, 1);
    assert_int_equal(info.device_pointers, 0);
    assert_string_equal(info.reason, "");
    assert_string_equal(moeint4_last_error(), "");

    /* The plugins are not next to this test program and the path is empty. */
    const moeint4_backend plugins[2] = { MOEINT4_BACKEND_XPU, MOEINT4_BACKEND_HIP };
    const char *files[2] = { "libmoeint4-xpu.so not found in ", "libmoeint4-hip.so not found in " };
    for (int i = 0; i < 2; i++) {
        memset(&info, 0x5a, sizeof info);
        info.struct_size = sizeof info;
        assert_ok(moeint4_backend_query(plugins[i], &info));
        assert_int_equal(info.compiled, 0);
        assert_int_equal(info.available, 0);
        assert_non_null(strstr(info.reason, files[i]));
    }
    assert_status_says(moeint4_backend_query((moeint4_backend)99, &info), MOEINT4_INVALID_ARGUMENT,
                       "id = 99");
    info.struct_size = 8;
    assert_status_says(moeint4_backend_query(MOEINT4_BACKEND_CPU, &info), MOEINT4_INVALID_ARGUMENT,
                       "info->struct_size = 8");
    assert_status_says(moeint4_backend_query(MOEINT4_BACKEND_CPU, NULL), MOEINT4_INVALID_ARGUMENT,
                       "info");
}

static void test_names(void **state)
{
    (void)state;
    moeint4_backend id = (moeint4_backend)-1;
    assert_ok(moeint4_backend_from_name("CPU", &id));
    assert_int_equal(id, MOEINT4_BACKEND_CPU);
    assert_ok(moeint4_backend_from_name("Hip", &id));
    assert_int_equal(id, MOEINT4_BACKEND_HIP);
    assert_ok(moeint4_backend_from_name("xpu", &id));
    assert_int_equal(id, MOEINT4_BACKEND_XPU);
    assert_ok(moeint4_backend_from_name("auto", &id));
    assert_int_equal(id, MOEINT4_BACKEND_AUTO);
    id = MOEINT4_BACKEND_HIP;
    assert_status_says(moeint4_backend_from_name("cuda", &id), MOEINT4_INVALID_ARGUMENT,
                       "\"cuda\"");
    assert_int_equal(id, MOEINT4_BACKEND_HIP); /* untouched */
    assert_status_says(moeint4_backend_from_name(NULL, &id), MOEINT4_INVALID_ARGUMENT, "name");
    assert_status_says(moeint4_backend_from_name("cpu", NULL), MOEINT4_INVALID_ARGUMENT, "id");
}

static fake_control first_custom = { .name = "custom-one", .probe_ok = 1, .supports_ok = 1 };
static fake_control second_custom = { .name = "custom-two", .probe_ok = 0, .priority = 1500 };

static void test_register(void **state)
{
    (void)state;
    moeint4_backend_iface iface = fake_backend_iface(&first_custom);
    moeint4_backend id = MOEINT4_BACKEND_AUTO;
    assert_ok(moeint4_register_backend(&iface, &id));
    assert_int_equal(id, MOEINT4_BACKEND_FIRST_CUSTOM);
    moeint4_backend_iface second = fake_backend_iface(&second_custom);
    assert_ok(moeint4_register_backend(&second, &id));
    assert_int_equal(id, MOEINT4_BACKEND_FIRST_CUSTOM + 1);

    moeint4_backend found;
    assert_ok(moeint4_backend_from_name("CUSTOM-ONE", &found));
    assert_int_equal(found, MOEINT4_BACKEND_FIRST_CUSTOM);

    /* default priority 500: between HIP and CPU; explicit 1500: after CPU */
    moeint4_backend ids[64];
    int count;
    assert_ok(moeint4_backend_list(ids, 64, &count));
    int one = position_of(ids, count, MOEINT4_BACKEND_FIRST_CUSTOM);
    int two = position_of(ids, count, MOEINT4_BACKEND_FIRST_CUSTOM + 1);
    assert_true(position_of(ids, count, MOEINT4_BACKEND_HIP) < one);
    assert_true(one < position_of(ids, count, MOEINT4_BACKEND_CPU));
    assert_true(position_of(ids, count, MOEINT4_BACKEND_CPU) < two);

    moeint4_backend_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    assert_ok(moeint4_backend_query(MOEINT4_BACKEND_FIRST_CUSTOM + 1, &info));
    assert_string_equal(info.name, "custom-two");
    assert_int_equal(info.compiled, 1);
    assert_int_equal(info.available, 0);
    assert_string_equal(info.reason, "fake device 0 is not plugged in");
}

static void test_register_refusals(void **state)
{
    (void)state;
    fake_control control = { .name = "refused", .probe_ok = 1, .supports_ok = 1 };
    moeint4_backend id = (moeint4_backend)123;
    moeint4_backend_iface iface = fake_backend_iface(&control);
    iface.api_version = 7;
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_VERSION_MISMATCH,
                       "api version 7, core expects 1");
    iface = fake_backend_iface(&control);
    iface.struct_size = offsetof(moeint4_backend_iface, memory_usage);
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_VERSION_MISMATCH,
                       "struct_size");
    iface = fake_backend_iface(&control);
    iface.forward = NULL;
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_INVALID_ARGUMENT,
                       "no forward function");
    iface = fake_backend_iface(&control);
    iface.probe = NULL;
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_INVALID_ARGUMENT,
                       "no probe function");
    iface = fake_backend_iface(&control);
    iface.name = "CPU";
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_INVALID_ARGUMENT,
                       "already taken");
    iface.name = "auto";
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_INVALID_ARGUMENT, "reserved");
    iface.name = "two words";
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_INVALID_ARGUMENT,
                       "iface->name");
    iface.name = NULL;
    assert_status_says(moeint4_register_backend(&iface, &id), MOEINT4_INVALID_ARGUMENT,
                       "iface->name");
    assert_status_says(moeint4_register_backend(NULL, &id), MOEINT4_INVALID_ARGUMENT, "iface");
    iface.name = "fine";
    assert_status_says(moeint4_register_backend(&iface, NULL), MOEINT4_INVALID_ARGUMENT, "id");
    assert_int_equal(id, 123); /* untouched by every refusal */
}

static void test_memory_helpers_default_to_host(void **state)
{
    (void)state;
    moeint4_context *ctx = util_context(MOEINT4_BACKEND_CPU);
    moeint4_backend backend;
    assert_ok(moeint4_context_backend(ctx, &backend));
    assert_int_equal(backend, MOEINT4_BACKEND_CPU);
    void *device = NULL;
    assert_ok(moeint4_memory_alloc(ctx, 100, &device));
    assert_non_null(device);
    assert_int_equal((uintptr_t)device % 64, 0);
    unsigned char source[100], back[100];
    for (int i = 0; i < 100; i++)
        source[i] = (unsigned char)(i * 7 + 3);
    memset(back, 0, sizeof back);
    assert_ok(moeint4_memory_copy(ctx, device, source, 100, MOEINT4_COPY_HOST_TO_DEVICE));
    assert_ok(moeint4_memory_copy(ctx, back, device, 100, MOEINT4_COPY_DEVICE_TO_HOST));
    assert_memory_equal(source, back, 100);
    assert_status_says(moeint4_memory_copy(ctx, back, device, 100, (moeint4_copy_kind)9),
                       MOEINT4_INVALID_ARGUMENT, "kind = 9");
    assert_status_says(moeint4_memory_copy(ctx, NULL, device, 100, MOEINT4_COPY_DEVICE_TO_HOST),
                       MOEINT4_INVALID_ARGUMENT, "dst");
    moeint4_memory_free(ctx, device);
    void *untouched = source;
    assert_status_says(moeint4_memory_alloc(ctx, 0, &untouched), MOEINT4_INVALID_ARGUMENT,
                       "bytes = 0");
    assert_ptr_equal(untouched, source);
    assert_status_says(moeint4_memory_alloc(NULL, 8, &untouched), MOEINT4_INVALID_ARGUMENT, "ctx");
    moeint4_memory_free(ctx, NULL);
    moeint4_memory_free(NULL, NULL);
    moeint4_context_destroy(ctx);
}

static void test_context_defaults(void **state)
{
    (void)state;
    moeint4_context *ctx = NULL;
    assert_ok(moeint4_context_create(NULL, &ctx));
    assert_non_null(ctx);
    assert_string_equal(moeint4_last_error(), "");
    moeint4_context_destroy(ctx);
    moeint4_context_destroy(NULL);
    assert_status_says(moeint4_context_create(NULL, NULL), MOEINT4_INVALID_ARGUMENT, "ctx");

    /* A caller built before gpu_weights: the bytes past its struct_size are
     * not read (an invalid value there is ignored: AUTO). */
    moeint4_context_options old;
    memset(&old, 0, sizeof old);
    old.struct_size = MOEINT4_CONTEXT_OPTIONS_MIN_SIZE;
    old.backend = MOEINT4_BACKEND_CPU;
    old.gpu_weights = 99;
    ctx = NULL;
    assert_ok(moeint4_context_create(&old, &ctx));
    moeint4_context_destroy(ctx);
    old.struct_size = sizeof old;
    old.gpu_weights = MOEINT4_GPU_WEIGHTS_INT4; /* accepted; the CPU keeps its layout */
    assert_ok(moeint4_context_create(&old, &ctx));
    moeint4_context_destroy(ctx);
}

int main(void)
{
    setenv("MOEINT4_BACKEND_PATH", "", 1); /* only the program's own directory */
    unsetenv("MOEINT4_BACKEND");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_builtin_list_and_query),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_register),
        cmocka_unit_test(test_register_refusals),
        cmocka_unit_test(test_memory_helpers_default_to_host),
        cmocka_unit_test(test_context_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
