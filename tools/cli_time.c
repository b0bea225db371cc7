/* Wall-clock timing and the statistics the subcommands print. */
#include <stdlib.h>
#include <time.h>

#include "cli.h"

double cli_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int cli_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *values, int count)
{
    if (count <= 0)
        return 0.0;
    qsort(values, (size_t)count, sizeof *values, cli_compare_doubles);
    if (count % 2 == 1)
        return values[count / 2];
    return 0.5 * (values[count / 2 - 1] + values[count / 2]);
}
