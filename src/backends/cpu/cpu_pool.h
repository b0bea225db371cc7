/* A small thread pool owned by one CPU context: num_threads - 1 workers plus
 * the calling thread run one job at a time. Workers spin for the next job
 * for a while (2 ms, MOEINT4_CPU_IDLE_MS: the layers of one decode step)
 * and then sleep (no core burns between decode steps); mi4_cpu_pool_wake
 * starts sleepers early, before the job is ready.
 *
 * Jobs must be work-conserving: the caller alone can finish a job, and no
 * thread ever waits for another particular thread, only for work to be done
 * (mi4_cpu_wait_count on completion counters). A worker that wakes late (a
 * sleeping vCPU can take hundreds of microseconds) joins only while the
 * caller is still inside the job; once the caller is done the job is closed
 * and the late worker skips it, so nobody waits for its wake-up. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_POOL_H
#define MOEINT4_BACKENDS_CPU_CPU_POOL_H

#include <stdatomic.h>

typedef struct mi4_cpu_pool mi4_cpu_pool;

/* thread_index in [0, num_threads); 0 is the caller. */
typedef void (*mi4_cpu_job_fn)(void *arg, int thread_index, int num_threads);

/* NULL when out of memory or a thread could not start. */
mi4_cpu_pool *mi4_cpu_pool_create(int num_threads);
void mi4_cpu_pool_destroy(mi4_cpu_pool *pool);
int mi4_cpu_pool_threads(const mi4_cpu_pool *pool);

/* A job is coming soon: sleeping workers wake and spin for it (cheap when
 * none sleeps). */
void mi4_cpu_pool_wake(mi4_cpu_pool *pool);

/* Runs job on the caller and on every worker that joins in time; returns
 * when the caller's part and every joined worker's part are done. Returns 0,
 * or -1 when another thread is running a job on this pool right now (the
 * caller then runs the job alone with num_threads = 1). */
int mi4_cpu_pool_try_run(mi4_cpu_pool *pool, mi4_cpu_job_fn job, void *arg);

/* Waits (spinning briefly, then yielding) until *count >= target; acquire
 * ordering, so what was written before the matching increments is visible. */
void mi4_cpu_wait_count(atomic_int *count, int target);

/* Workers asleep right now (tests: the sleep/wake path is really taken). */
int mi4_cpu_pool_sleeping(mi4_cpu_pool *pool);

#endif
