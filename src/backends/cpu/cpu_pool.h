/* A small thread pool owned by one CPU context: num_threads - 1 workers plus
 * the calling thread run one job at a time. A job may split itself into
 * phases with mi4_cpu_pool_barrier. Workers spin briefly between jobs (decode
 * calls come back to back) and then sleep on a condition variable. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_POOL_H
#define MOEINT4_BACKENDS_CPU_CPU_POOL_H

typedef struct mi4_cpu_pool mi4_cpu_pool;

/* thread_index in [0, num_threads); 0 is the caller. */
typedef void (*mi4_cpu_job_fn)(void *arg, int thread_index, int num_threads);

/* NULL when out of memory or a thread could not start. */
mi4_cpu_pool *mi4_cpu_pool_create(int num_threads);
void mi4_cpu_pool_destroy(mi4_cpu_pool *pool);
int mi4_cpu_pool_threads(const mi4_cpu_pool *pool);

/* Runs job on every thread of the pool and returns when all are done.
 * Returns 0, or -1 when another thread is running a job on this pool right
 * now (the caller then runs the job alone with num_threads = 1). */
int mi4_cpu_pool_try_run(mi4_cpu_pool *pool, mi4_cpu_job_fn job, void *arg);

/* Blocks until all `num_threads` threads of the running job reached it. A
 * job run with num_threads = 1 may call it too (returns at once). */
void mi4_cpu_pool_barrier(mi4_cpu_pool *pool, int num_threads);

#endif
