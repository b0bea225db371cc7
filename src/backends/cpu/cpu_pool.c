#include "backends/cpu/cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "base/alloc.h"

/* How long a thread spins while waiting for work inside a job before it
 * yields. Short: on a loaded machine a spinning thread takes the core from
 * the very thread it waits for (measured: 20000 pause-spins turned a 10 us
 * job into 0.5-1.5 ms on a busy 2-core VM). */
#define MI4_WAIT_SPIN_NS 50000
/* How long an idle worker spins for the next job before it sleeps
 * (MOEINT4_CPU_IDLE_MS overrides; 0 keeps only a 50 us spin). Waking a
 * sleeper costs the caller a futex wake (20-60 us of system call on the
 * development VM, a nested KVM guest whose idle vCPUs halt at once) and the
 * sleeper another 50-150 us before it runs, against a decode forward of
 * ~0.5 ms (Qwen3 M = 1); the MoE layers of a decode step follow each other
 * within a millisecond or two (attention in between), so a worker that
 * spins that long is already running when the next layer starts. Past it,
 * it sleeps: no core burns between decode steps. */
#define MI4_POOL_IDLE_NS_DEFAULT 2000000
#define MI4_POOL_IDLE_NS_MIN 50000

/* state = generation << 32 | closed bit | workers joined */
#define STATE_CLOSED 0x80000000ull
#define STATE_JOINED_MASK 0x7fffffffull

typedef struct worker_arg {
    mi4_cpu_pool *pool;
    int index;
} worker_arg;

struct mi4_cpu_pool {
    int num_threads;
    pthread_t *threads;
    worker_arg *worker_args;
    int started;              /* workers actually running */
    pthread_mutex_t run_lock; /* one job at a time */
    pthread_mutex_t lock;     /* guards sleeping and `done` */
    pthread_cond_t wake;
    pthread_cond_t done;
    mi4_cpu_job_fn job;
    void *job_arg;
    _Atomic uint64_t state;
    atomic_int finished; /* joined workers done with the job */
    atomic_int stop;
    atomic_int sleeping;    /* workers asleep on `wake` */
    atomic_uint wake_calls; /* mi4_cpu_pool_wake calls: sleepers start spinning */
    int64_t idle_ns;        /* spin this long for the next job before sleeping */
    atomic_int caller_cpu;  /* the CPU the last job's caller finished on, or -1 */
};

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Counts spins; true while the spin budget (checked every 64 spins) lasts. */
typedef struct spinner {
    int64_t deadline;
    unsigned spins;
} spinner;

static spinner spinner_start(int64_t budget_ns)
{
    spinner s = { monotonic_ns() + budget_ns, 0 };
    return s;
}

static int spinner_keep_spinning(spinner *s)
{
    if ((++s->spins & 63) == 0 && monotonic_ns() > s->deadline)
        return 0;
    cpu_relax();
    return 1;
}

/* The CPU this thread runs on, or -1 where that is not known. */
static int current_cpu(void)
{
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

/* An idle worker's spin: while its budget lasts and it does not share the
 * CPU the caller last ran on. On a loaded machine the scheduler may put both
 * on one CPU, and a spinning worker there takes the caller's time. */
static int idle_keep_spinning(mi4_cpu_pool *pool, spinner *s)
{
    if (!spinner_keep_spinning(s))
        return 0;
    if ((s->spins & 63) == 0) {
        int cpu = current_cpu();
        if (cpu >= 0 && cpu == atomic_load_explicit(&pool->caller_cpu, memory_order_relaxed))
            return 0;
    }
    return 1;
}

static uint32_t state_generation(uint64_t state) { return (uint32_t)(state >> 32); }

/* Joins the job of `generation` if it is still open. */
static int try_join(mi4_cpu_pool *pool, uint32_t generation)
{
    uint64_t s = atomic_load_explicit(&pool->state, memory_order_acquire);
    for (;;) {
        if (state_generation(s) != generation || (s & STATE_CLOSED))
            return 0;
        if (atomic_compare_exchange_weak_explicit(&pool->state, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return 1;
    }
}

static void *worker_main(void *opaque)
{
    worker_arg *self = opaque;
    mi4_cpu_pool *pool = self->pool;
    uint32_t seen = 0; /* the generation at pool creation, whenever this thread starts */
    for (;;) {
        spinner spin = spinner_start(pool->idle_ns);
        while (state_generation(atomic_load_explicit(&pool->state, memory_order_acquire)) == seen &&
               !atomic_load(&pool->stop)) {
            if (idle_keep_spinning(pool, &spin))
                continue;
            pthread_mutex_lock(&pool->lock);
            atomic_fetch_add(&pool->sleeping, 1);
            unsigned wake_calls = atomic_load(&pool->wake_calls);
            while (state_generation(atomic_load(&pool->state)) == seen &&
                   !atomic_load(&pool->stop) && atomic_load(&pool->wake_calls) == wake_calls)
                pthread_cond_wait(&pool->wake, &pool->lock);
            atomic_fetch_sub(&pool->sleeping, 1);
            pthread_mutex_unlock(&pool->lock);
            /* a job is coming (or has come): spin for it again */
            spin = spinner_start(MI4_POOL_IDLE_NS_MIN);
        }
        if (atomic_load(&pool->stop))
            return NULL;
        seen = state_generation(atomic_load_explicit(&pool->state, memory_order_acquire));
        if (!try_join(pool, seen))
            continue; /* closed: the caller finished without us */
        pool->job(pool->job_arg, self->index, pool->num_threads);
        atomic_fetch_add_explicit(&pool->finished, 1, memory_order_release);
        pthread_mutex_lock(&pool->lock);
        pthread_cond_signal(&pool->done);
        pthread_mutex_unlock(&pool->lock);
    }
}

mi4_cpu_pool *mi4_cpu_pool_create(int num_threads)
{
    if (num_threads < 1)
        num_threads = 1;
    mi4_cpu_pool *pool = mi4_calloc(1, sizeof *pool);
    if (!pool)
        return NULL;
    pool->num_threads = num_threads;
    pool->idle_ns = MI4_POOL_IDLE_NS_DEFAULT;
    const char *idle_ms = getenv("MOEINT4_CPU_IDLE_MS");
    if (idle_ms && *idle_ms) {
        char *end = NULL;
        long ms = strtol(idle_ms, &end, 10);
        if (end && *end == '\0' && ms >= 0 && ms <= 10000)
            pool->idle_ns = ms > 0 ? (int64_t)ms * 1000000 : MI4_POOL_IDLE_NS_MIN;
    }
    pool->threads = mi4_calloc((size_t)num_threads, sizeof *pool->threads);
    pool->worker_args = mi4_calloc((size_t)num_threads, sizeof *pool->worker_args);
    if (!pool->threads || !pool->worker_args) {
        mi4_free(pool->threads);
        mi4_free(pool->worker_args);
        mi4_free(pool);
        return NULL;
    }
    pthread_mutex_init(&pool->run_lock, NULL);
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    atomic_init(&pool->state, STATE_CLOSED);
    atomic_init(&pool->caller_cpu, -1);
    for (int i = 1; i < num_threads; i++) {
        pool->worker_args[i].pool = pool;
        pool->worker_args[i].index = i;
        if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->worker_args[i]) != 0) {
            mi4_cpu_pool_destroy(pool);
            return NULL;
        }
        pool->started = i;
    }
    return pool;
}

void mi4_cpu_pool_destroy(mi4_cpu_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 1; i <= pool->started; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    pthread_mutex_destroy(&pool->lock);
    pthread_mutex_destroy(&pool->run_lock);
    mi4_free(pool->threads);
    mi4_free(pool->worker_args);
    mi4_free(pool);
}

int mi4_cpu_pool_threads(const mi4_cpu_pool *pool) { return pool->num_threads; }

void mi4_cpu_pool_wake(mi4_cpu_pool *pool)
{
    if (atomic_load(&pool->sleeping) == 0)
        return;
    pthread_mutex_lock(&pool->lock);
    atomic_fetch_add(&pool->wake_calls, 1);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
}

int mi4_cpu_pool_try_run(mi4_cpu_pool *pool, mi4_cpu_job_fn job, void *arg)
{
    if (pthread_mutex_trylock(&pool->run_lock) != 0)
        return -1;
    pool->job = job;
    pool->job_arg = arg;
    atomic_store(&pool->finished, 0);
    uint32_t generation = state_generation(atomic_load(&pool->state)) + 1;
    pthread_mutex_lock(&pool->lock);
    atomic_store_explicit(&pool->state, (uint64_t)generation << 32, memory_order_release);
    if (atomic_load(&pool->sleeping) > 0)
        pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);

    job(arg, 0, pool->num_threads);
    atomic_store_explicit(&pool->caller_cpu, current_cpu(), memory_order_relaxed);

    int joined = (int)(atomic_fetch_or_explicit(&pool->state, STATE_CLOSED, memory_order_acq_rel) &
                       STATE_JOINED_MASK);
    spinner spin = spinner_start(MI4_WAIT_SPIN_NS);
    while (atomic_load_explicit(&pool->finished, memory_order_acquire) < joined) {
        if (spinner_keep_spinning(&spin))
            continue;
        pthread_mutex_lock(&pool->lock);
        while (atomic_load(&pool->finished) < joined)
            pthread_cond_wait(&pool->done, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
    }
    pthread_mutex_unlock(&pool->run_lock);
    return 0;
}

void mi4_cpu_wait_count(atomic_int *count, int target)
{
    spinner spin = spinner_start(MI4_WAIT_SPIN_NS);
    while (atomic_load_explicit(count, memory_order_acquire) < target)
        if (!spinner_keep_spinning(&spin))
            sched_yield();
}

int mi4_cpu_pool_sleeping(mi4_cpu_pool *pool) { return atomic_load(&pool->sleeping); }
