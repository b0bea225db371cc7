/* The CPU backend's thread pool: every unit of a job's work is done exactly
 * once however many workers join, across many back-to-back and spaced jobs
 * (workers spinning, sleeping, woken early by mi4_cpu_pool_wake, or waking
 * after the job closed); a job's caller-side wait sees all the work; a
 * nested run is refused; idle workers sleep instead of burning a core. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backends/cpu/cpu_pool.h"

#define UNITS 257

typedef struct counting_job {
    mi4_cpu_pool *pool;
    atomic_int next;
    atomic_int done;
    atomic_int hits[UNITS];
    atomic_int nested_refused;
    int seen_threads[8];
} counting_job;

static void counting(void *arg, int thread, int threads)
{
    counting_job *job = arg;
    assert_true(thread >= 0 && thread < threads && threads <= 8);
    job->seen_threads[thread] = 1;
    if (thread == 0 && job->pool)
        atomic_store(&job->nested_refused, mi4_cpu_pool_try_run(job->pool, counting, job) == -1);
    for (;;) {
        int unit = atomic_fetch_add(&job->next, 1);
        if (unit >= UNITS)
            break;
        atomic_fetch_add(&job->hits[unit], 1);
        atomic_fetch_add_explicit(&job->done, 1, memory_order_release);
    }
    mi4_cpu_wait_count(&job->done, UNITS); /* the end of a phase */
}

static void run_jobs(int threads, int spaced)
{
    mi4_cpu_pool *pool = mi4_cpu_pool_create(threads);
    assert_non_null(pool);
    assert_int_equal(mi4_cpu_pool_threads(pool), threads);
    for (int round = 0; round < (spaced ? 20 : 500); round++) {
        counting_job job;
        memset(&job, 0, sizeof job);
        job.pool = round == 0 ? pool : NULL;
        if (round % 2) /* as a forward does before it plans */
            mi4_cpu_pool_wake(pool);
        assert_int_equal(mi4_cpu_pool_try_run(pool, counting, &job), 0);
        assert_int_equal(atomic_load(&job.done), UNITS);
        for (int u = 0; u < UNITS; u++)
            assert_int_equal(atomic_load(&job.hits[u]), 1);
        assert_int_equal(job.seen_threads[0], 1);
        if (round == 0)
            assert_int_equal(atomic_load(&job.nested_refused), 1);
        if (spaced) {
            struct timespec pause = {0, 2000000}; /* 2 ms: workers go to sleep */
            nanosleep(&pause, NULL);
        }
    }
    mi4_cpu_pool_destroy(pool);
}

static void test_back_to_back(void **state)
{
    (void)state;
    run_jobs(1, 0);
    run_jobs(2, 0);
    run_jobs(4, 0);
}

static void test_spaced(void **state)
{
    (void)state;
    run_jobs(2, 1);
    run_jobs(3, 1);
}

static double process_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* After a job, idle workers sleep (default MOEINT4_CPU_IDLE_MS = 0): over a
 * 50 ms pause the process uses a small part of a core, not a whole one
 * (the test is skipped when the environment asks workers to keep yielding). */
static void test_idle_workers_sleep(void **state)
{
    (void)state;
    const char *idle = getenv("MOEINT4_CPU_IDLE_MS");
    if (idle && *idle && strcmp(idle, "0") != 0)
        skip();
    mi4_cpu_pool *pool = mi4_cpu_pool_create(3);
    assert_non_null(pool);
    counting_job job;
    memset(&job, 0, sizeof job);
    assert_int_equal(mi4_cpu_pool_try_run(pool, counting, &job), 0);
    double before = process_cpu_seconds();
    struct timespec pause = {0, 50000000};
    nanosleep(&pause, NULL);
    double burned = process_cpu_seconds() - before;
    mi4_cpu_pool_destroy(pool);
    if (!(burned < 0.01))
        fail_msg("idle workers used %.1f ms of CPU over a 50 ms pause", burned * 1e3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_spaced),
        cmocka_unit_test(test_idle_workers_sleep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
