/* The version in the header macros, the library and CMake agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moeint4.h"

static void test_macros_match_library(void **state)
{
    (void)state;
    assert_int_equal(MOEINT4_VERSION_NUMBER, MOEINT4_VERSION_MAJOR * 10000 +
                                                 MOEINT4_VERSION_MINOR * 100 +
                                                 MOEINT4_VERSION_PATCH);
    assert_int_equal(moeint4_version(), MOEINT4_VERSION_NUMBER);
    char expected[32];
    snprintf(expected, sizeof expected, "%d.%d.%d", MOEINT4_VERSION_MAJOR, MOEINT4_VERSION_MINOR,
             MOEINT4_VERSION_PATCH);
    assert_non_null(moeint4_version_string());
    assert_string_equal(moeint4_version_string(), expected);
}

static void test_macros_match_cmake(void **state)
{
    (void)state;
    assert_int_equal(MOEINT4_VERSION_MAJOR, MOEINT4_CMAKE_VERSION_MAJOR);
    assert_int_equal(MOEINT4_VERSION_MINOR, MOEINT4_CMAKE_VERSION_MINOR);
    assert_int_equal(MOEINT4_VERSION_PATCH, MOEINT4_CMAKE_VERSION_PATCH);
    assert_string_equal(moeint4_version_string(), MOEINT4_CMAKE_VERSION);
    /* SONAME libmoeint4.so.MAJOR (checked in the binary by test_abi_symbols). */
    assert_int_equal(MOEINT4_CMAKE_SOVERSION, MOEINT4_VERSION_MAJOR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_macros_match_library),
        cmocka_unit_test(test_macros_match_cmake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
