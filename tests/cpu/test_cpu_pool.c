/* The CPU backend's thread pool: every unit of a job's work is done exactly
 * once however many workers join, across many back-to-back and spaced jobs
 * (workers spinning, sleeping, woken early by mi4_cpu_pool_wake, or waking
 * after the job closed); a job's caller-side wait sees all the work; a
 * nested run is refused. Idle workers go to sleep after MOEINT4_CPU_IDLE_MS
 * (set to 1 ms here, so the spaced jobs find them asleep) and a job wakes
 * them; with the default (2 ms of spinning) they sleep well within a 50 ms
 * pause instead of burning a core. The forward's work shares: every item
 * taken once, a thread's own items in address order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backends/cpu/cpu_pool.h"
#include "backends/cpu/cpu_work.h"

#define UNITS 257

typedef struct counting_job {
    mi4_cpu_pool *pool;
    atomic_int next;
    atomic_int done;
    atomic_int hits[UNITS];
    atomic_int nested_refused;
    int seen_threads[8];
} counting_job;

static void pause_ms(long ms)
{
    struct timespec pause = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&pause, NULL);
}

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
            pause_ms(5); /* workers spin 1 ms (set below), then sleep */
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

/* Waits up to 5 s for `count` workers asleep; returns how many are. */
static int wait_sleeping(mi4_cpu_pool *pool, int count)
{
    for (int waited = 0; waited < 5000 && mi4_cpu_pool_sleeping(pool) < count; waited++)
        pause_ms(1);
    return mi4_cpu_pool_sleeping(pool);
}

typedef struct joined_job {
    atomic_int workers_joined;
    atomic_int units_done;
} joined_job;

/* The caller stays inside the job until a worker has joined (or 5 s pass),
 * so the job is still open when the sleepers wake. */
static void wait_for_a_worker(void *arg, int thread, int threads)
{
    (void)threads;
    joined_job *job = arg;
    atomic_fetch_add(&job->units_done, 1);
    if (thread != 0) {
        atomic_fetch_add(&job->workers_joined, 1);
        return;
    }
    for (int waited = 0; waited < 5000 && atomic_load(&job->workers_joined) == 0; waited++)
        pause_ms(1);
}

/* Idle workers really sleep (after 1 ms of spinning here), and a job wakes
 * them: a sleeping worker joins the next job. */
static void test_workers_sleep_and_wake(void **state)
{
    (void)state;
    mi4_cpu_pool *pool = mi4_cpu_pool_create(3);
    assert_non_null(pool);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(wait_sleeping(pool, 2), 2);
        joined_job job;
        atomic_init(&job.workers_joined, 0);
        atomic_init(&job.units_done, 0);
        assert_int_equal(mi4_cpu_pool_try_run(pool, wait_for_a_worker, &job), 0);
        assert_true(atomic_load(&job.workers_joined) >= 1);
        assert_int_equal(atomic_load(&job.units_done), 1 + atomic_load(&job.workers_joined));
    }
    /* and they fall asleep again afterwards */
    assert_int_equal(wait_sleeping(pool, 2), 2);
    mi4_cpu_pool_destroy(pool);
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

/* After a job, idle workers spin for 2 ms and then sleep (the default,
 * MOEINT4_CPU_IDLE_MS unset): over a 50 ms pause the process uses a small
 * part of a core (two workers: ~4 ms), not a whole one. */
static void test_idle_workers_sleep(void **state)
{
    (void)state;
    char *saved = getenv("MOEINT4_CPU_IDLE_MS");
    char restore[32] = "";
    if (saved)
        snprintf(restore, sizeof restore, "%s", saved);
    unsetenv("MOEINT4_CPU_IDLE_MS"); /* read at pool creation */
    mi4_cpu_pool *pool = mi4_cpu_pool_create(3);
    if (restore[0])
        setenv("MOEINT4_CPU_IDLE_MS", restore, 1);
    assert_non_null(pool);
    counting_job job;
    memset(&job, 0, sizeof job);
    assert_int_equal(mi4_cpu_pool_try_run(pool, counting, &job), 0);
    double before = process_cpu_seconds();
    struct timespec pause = { 0, 50000000 };
    nanosleep(&pause, NULL);
    double burned = process_cpu_seconds() - before;
    mi4_cpu_pool_destroy(pool);
    if (!(burned < 0.01))
        fail_msg("idle workers used %.1f ms of CPU over a 50 ms pause", burned * 1e3);
}

/* Work shares (cpu_work.h) taken by a pool job's threads: every item once;
 * each thread's items from its own share in increasing order, then stolen
 * ones in decreasing order per share. */
#define SHARE_ITEMS 301
#define SHARE_THREADS 3

typedef struct share_job {
    mi4_cpu_work_share shares[SHARE_THREADS];
    atomic_int hits[SHARE_ITEMS];
    int taken[SHARE_THREADS][SHARE_ITEMS];
    int count[SHARE_THREADS];
} share_job;

static void take_shares(void *arg, int thread, int threads)
{
    share_job *job = arg;
    assert_true(threads == SHARE_THREADS);
    for (int item; (item = mi4_cpu_work_take(job->shares, SHARE_THREADS, thread)) >= 0;) {
        assert_true(item < SHARE_ITEMS);
        atomic_fetch_add(&job->hits[item], 1);
        job->taken[thread][job->count[thread]++] = item;
    }
}

static int share_of(int item)
{
    for (int p = 0; p < SHARE_THREADS; p++)
        if (item < SHARE_ITEMS * (p + 1) / SHARE_THREADS)
            return p;
    return -1;
}

static void test_work_shares(void **state)
{
    (void)state;
    mi4_cpu_pool *pool = mi4_cpu_pool_create(SHARE_THREADS);
    assert_non_null(pool);
    for (int round = 0; round < 200; round++) {
        share_job *job = calloc(1, sizeof *job);
        assert_non_null(job);
        mi4_cpu_work_split(job->shares, SHARE_THREADS, SHARE_ITEMS);
        assert_int_equal(mi4_cpu_pool_try_run(pool, take_shares, job), 0);
        for (int i = 0; i < SHARE_ITEMS; i++)
            assert_int_equal(atomic_load(&job->hits[i]), 1);
        for (int t = 0; t < SHARE_THREADS; t++) {
            int last_own = -1, last_stolen[SHARE_THREADS];
            for (int p = 0; p < SHARE_THREADS; p++)
                last_stolen[p] = SHARE_ITEMS;
            for (int i = 0; i < job->count[t]; i++) {
                int item = job->taken[t][i], p = share_of(item);
                if (p == t) {
                    assert_true(item > last_own);
                    last_own = item;
                } else {
                    assert_true(item < last_stolen[p]);
                    last_stolen[p] = item;
                }
            }
        }
        free(job);
    }
    mi4_cpu_pool_destroy(pool);
    /* alone (a busy pool's caller): everything, own share first */
    share_job *job = calloc(1, sizeof *job);
    assert_non_null(job);
    mi4_cpu_work_split(job->shares, SHARE_THREADS, SHARE_ITEMS);
    int n = 0;
    for (int item; (item = mi4_cpu_work_take(job->shares, SHARE_THREADS, 0)) >= 0; n++)
        if (n < SHARE_ITEMS / SHARE_THREADS)
            assert_int_equal(item, n);
    assert_int_equal(n, SHARE_ITEMS);
    free(job);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_spaced),
        cmocka_unit_test(test_workers_sleep_and_wake),
        cmocka_unit_test(test_idle_workers_sleep),
        cmocka_unit_test(test_work_shares),
    };
    /* Read at pool creation: short, so that idle workers sleep within the
     * tests' pauses (the default keeps them spinning for 2 ms). */
    setenv("MOEINT4_CPU_IDLE_MS", "1", 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
