/* The Level Zero runtime up to its answer on a machine without an Intel GPU:
 * Debian's loader (libze1) loads Intel's real GPU driver (libze_intel_gpu.so.1
 * from intel-opencl-icd), zeInit says there is no device, and the probe says
 * why in words (driver installed, no /dev/dri). With
 * MOEINT4_XPU_EXPECT_INTEL_DRIVER=1 (ctest sets it: the build found ocloc,
 * which ships with that driver) the driver must be the one answering, unless
 * ZE_ENABLE_ALT_DRIVERS replaces it (the ASan run does: the driver dlopens
 * libdxcore with RTLD_DEEPBIND, which the sanitizer runtime refuses). The
 * runtime, the backend's context creation (also with a framework's native
 * handles) and probe() all report it without crashing. On a machine with an
 * Intel GPU these tests skip: there the conformance run covers the runtime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tk_cmocka.h"

#include "moeint4_backend.h"
#include "xpu_runtime.h"

const moeint4_backend_iface *moeint4_plugin_backend(uint32_t core_api_version);

static void skip_if_driver_present(void)
{
    char reason[512] = "";
    if (mi4_xpu_ze_probe(0, reason, sizeof reason))
        tk_skip("a Level Zero driver is present: the no-driver answers are not there to check");
}

static void test_probe_says_no_driver(void **state)
{
    (void)state;
    skip_if_driver_present();
    char reason[512] = "";
    assert_int_equal(mi4_xpu_ze_probe(0, reason, sizeof reason), 0);
    print_message("Level Zero probe: %s\n", reason);
    /* either the loader is missing or it reports no driver; Debian 12 with
     * libze1 installed gives the second */
    int no_driver = strstr(reason, "no Level Zero driver: libze_loader found but ze") == reason &&
                    strstr(reason, "returned 0x") != NULL;
    int no_loader = strstr(reason, "no Level Zero loader (libze_loader.so.1") == reason;
    assert_true(no_driver || no_loader);
    const char *expect = getenv("MOEINT4_XPU_EXPECT_INTEL_DRIVER");
    if (expect && strcmp(expect, "1") == 0) {
        const char *alternative = getenv("ZE_ENABLE_ALT_DRIVERS");
        const char *why = alternative && *alternative
                              ? "ZE_ENABLE_ALT_DRIVERS="
                              : "Intel's GPU driver (libze_intel_gpu.so.1) is installed but";
        if (!no_driver || !strstr(reason, why))
            fail_msg("expected Intel's driver to answer (\"%s\"): %s", why, reason);
    }
}

static void test_runtime_create_reports_the_same(void **state)
{
    (void)state;
    skip_if_driver_present();
    char probe_reason[512] = "", err[512] = "";
    mi4_xpu_ze_probe(0, probe_reason, sizeof probe_reason);
    moeint4_context_options options = { 0 };
    options.struct_size = sizeof options;
    mi4_xpu_runtime *rt = (mi4_xpu_runtime *)&options; /* must stay untouched */
    assert_int_equal(mi4_xpu_ze_create(&options, &rt, err, sizeof err),
                     MOEINT4_BACKEND_UNAVAILABLE);
    assert_ptr_equal(rt, (mi4_xpu_runtime *)&options);
    assert_string_equal(err, probe_reason);
}

static void test_native_handles_need_level_zero(void **state)
{
    (void)state;
    skip_if_driver_present();
    const moeint4_backend_iface *xpu = moeint4_plugin_backend(MOEINT4_BACKEND_API_VERSION);
    assert_non_null(xpu);
    int fake_device = 0, fake_list = 0;
    moeint4_context_options options = { 0 };
    options.struct_size = sizeof options;
    options.native_device = &fake_device; /* never dereferenced: no driver gets that far */
    options.native_queue = &fake_list;
    void *ctx = NULL;
    char err[256] = "";
    setenv("MOEINT4_XPU_TEST_CPU_DEVICE", "1", 1); /* even with PoCL usable */
    assert_int_equal(xpu->context_create(xpu->user_data, &options, &ctx, err, sizeof err),
                     MOEINT4_BACKEND_UNAVAILABLE);
    assert_null(ctx);
    assert_non_null(strstr(err, "Level Zero"));
    options.native_device = NULL; /* a queue without its device */
    assert_int_equal(xpu->context_create(xpu->user_data, &options, &ctx, err, sizeof err),
                     MOEINT4_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "native_device"));
}

static void test_forced_level_zero_probe_says_why(void **state)
{
    (void)state;
    skip_if_driver_present();
    const moeint4_backend_iface *xpu = moeint4_plugin_backend(MOEINT4_BACKEND_API_VERSION);
    char reason[512] = "";
    setenv("MOEINT4_XPU_TEST_CPU_DEVICE", "1", 1);
    setenv("MOEINT4_XPU_RUNTIME", "level_zero", 1);
    assert_int_equal(xpu->probe(xpu->user_data, 0, reason, sizeof reason), 0);
    assert_non_null(strstr(reason, "MOEINT4_XPU_RUNTIME forces it"));
    unsetenv("MOEINT4_XPU_RUNTIME");
    assert_int_equal(xpu->probe(xpu->user_data, 0, reason, sizeof reason), 1); /* PoCL */
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_says_no_driver),
        cmocka_unit_test(test_runtime_create_reports_the_same),
        cmocka_unit_test(test_native_handles_need_level_zero),
        cmocka_unit_test(test_forced_level_zero_probe_says_why),
    };
    return tk_cmocka_run("xpu level zero", tests, sizeof tests / sizeof tests[0], NULL, NULL, argc,
                         argv);
}
