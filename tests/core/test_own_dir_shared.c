/* Against the real libmoeint4.so: with MOEINT4_BACKEND_PATH empty, the GPU
 * plugins are looked for in the directory of libmoeint4.so itself (argv[1]).
 * Either a plugin built there was loaded, or the reason names that folder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moeint4.h"

static const char *library_dir;

static void test_plugins_searched_next_to_the_library(void **state)
{
    (void)state;
    const moeint4_backend ids[2] = { MOEINT4_BACKEND_XPU, MOEINT4_BACKEND_HIP };
    const char *files[2] = { "libmoeint4-xpu.so", "libmoeint4-hip.so" };
    for (int i = 0; i < 2; i++) {
        moeint4_backend_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        assert_int_equal(moeint4_backend_query(ids[i], &info), MOEINT4_SUCCESS);
        if (info.compiled)
            continue; /* built next to the library and loaded from there */
        char expected[4200];
        snprintf(expected, sizeof expected, "%s not found in %s", files[i], library_dir);
        if (!strstr(info.reason, expected))
            fail_msg("reason \"%s\" lacks \"%s\"", info.reason, expected);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    library_dir = argv[1];
    setenv("MOEINT4_BACKEND_PATH", "", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plugins_searched_next_to_the_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
