/* cmocka runs whose skips ctest can see. A skipped check is missing
 * coverage, never a pass: tk_skip() records why, and tk_cmocka_run turns a
 * run with any skip into exit status 77 (ctest SKIP_RETURN_CODE: Skipped),
 * after printing which tests ran and which were skipped. Where part of a
 * binary can run and part may be skipped, ctest runs it once per part with
 * a test filter (argv[1]), so each part is reported on its own. */
#ifndef MOEINT4_TESTS_TK_CMOCKA_H
#define MOEINT4_TESTS_TK_CMOCKA_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define TK_SKIP_EXIT_CODE 77

void tk_cmocka_note_skip(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Skips the running test, saying why (printf format). */
#define tk_skip(...)                                                                               \
    do {                                                                                           \
        tk_cmocka_note_skip(__FILE__, __LINE__, __VA_ARGS__);                                      \
        skip();                                                                                    \
    } while (0)

/* Runs `tests` as group `name`. argv[1], when given and not empty, is a
 * cmocka test filter (glob: only matching tests run); argv[2] one of tests
 * to leave out. Returns the exit status: 1 when a test failed, else 77 when
 * a test was skipped, else 0; 1 too when the filters select no test. */
int tk_cmocka_run(const char *name, const struct CMUnitTest *tests, size_t count,
                  CMFixtureFunction setup, CMFixtureFunction teardown, int argc, char **argv);

/* The skips recorded so far (for binaries with their own main logic). */
int tk_cmocka_skips(void);

#endif
