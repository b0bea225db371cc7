/* tk_cmocka_run's exit statuses, which every skip-capable test relies on: a
 * run with a skip is 77 (never 0), a filter can leave the skipping test out
 * (0), a filter that selects nothing is a failure (1). */
#include <stdio.h>

#include "tk_cmocka.h"

static void passes(void **state)
{
    (void)state;
    assert_true(1);
}

static void skips_always(void **state)
{
    (void)state;
    tk_skip("this check is never there to run");
}

static int expect(const char *what, int got, int want)
{
    if (got == want)
        return 0;
    fprintf(stderr, "tk_cmocka self-test: %s: exit status %d, expected %d\n", what, got, want);
    return 1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(passes),
        cmocka_unit_test(skips_always),
    };
    size_t count = sizeof tests / sizeof tests[0];
    char program[] = "self", none[] = "", only_passes[] = "passes", only_skip[] = "skips_*",
         nothing[] = "no_such_test", skip_out[] = "skips_*";
    char *all_args[] = { program };
    char *passes_args[] = { program, only_passes };
    char *skip_args[] = { program, only_skip };
    char *nothing_args[] = { program, nothing };
    char *leave_out_args[] = { program, none, skip_out };
    int failures = 0;
    failures +=
        expect("one test skipped", tk_cmocka_run("all", tests, count, NULL, NULL, 1, all_args),
               TK_SKIP_EXIT_CODE);
    failures += expect("only the passing test",
                       tk_cmocka_run("passes", tests, count, NULL, NULL, 2, passes_args), 0);
    failures +=
        expect("only the skipping test",
               tk_cmocka_run("skip", tests, count, NULL, NULL, 2, skip_args), TK_SKIP_EXIT_CODE);
    failures += expect("the skipping test left out",
                       tk_cmocka_run("leave out", tests, count, NULL, NULL, 3, leave_out_args), 0);
    failures += expect("a filter that selects nothing",
                       tk_cmocka_run("nothing", tests, count, NULL, NULL, 2, nothing_args), 1);
    return failures ? 1 : 0;
}
