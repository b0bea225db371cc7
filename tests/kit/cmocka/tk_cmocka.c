/* tk_cmocka.h: skips that reach ctest. */
#include "tk_cmocka.h"

#include <fnmatch.h>
#include <stdio.h>

static int skips; /* test programs are single-threaded around cmocka */

void tk_cmocka_note_skip(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "SKIPPED (%s:%d): ", file, line);
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    fflush(stdout);
    va_end(ap);
    skips++;
}

int tk_cmocka_skips(void) { return skips; }

int tk_cmocka_run(const char *name, const struct CMUnitTest *tests, size_t count,
                  CMFixtureFunction setup, CMFixtureFunction teardown, int argc, char **argv)
{
    skips = 0; /* this run's */
    const char *only = argc > 1 && argv[1][0] ? argv[1] : NULL;
    const char *leave_out = argc > 2 && argv[2][0] ? argv[2] : NULL;
    size_t selected = 0;
    for (size_t i = 0; i < count; i++)
        selected += (!only || fnmatch(only, tests[i].name, 0) == 0) &&
                    (!leave_out || fnmatch(leave_out, tests[i].name, 0) != 0);
    if (selected == 0) {
        printf("%s: the filters (\"%s\", leaving out \"%s\") select no test\n", name,
               only ? only : "", leave_out ? leave_out : "");
        return 1; /* a run that checks nothing must not pass */
    }
    cmocka_set_test_filter(only); /* NULL: none (and none left from an earlier run) */
    cmocka_set_skip_filter(leave_out);
    int failed = _cmocka_run_group_tests(name, tests, count, setup, teardown);
    if (failed)
        return 1;
    if (skips) {
        printf("%s: %d test(s) skipped (see SKIPPED above): reported to ctest as skipped\n", name,
               skips);
        return TK_SKIP_EXIT_CODE;
    }
    return 0;
}
