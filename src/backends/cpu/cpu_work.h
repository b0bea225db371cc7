/* Work items [0, count) shared by the threads of one pool job, each thread
 * owning a contiguous share: it takes its own items front to back, then,
 * when they are gone, other shares' items back to front. Consecutive items
 * are consecutive weight tiles, so a thread's tile streams run on in address
 * order from one item to its next and its prefetches ahead land in its own
 * next item; threads meet only at the end of a share (a plain shared counter
 * interleaves the threads' items, and each prefetched the start of the item
 * the other was about to take). A share left by a worker that never joined
 * is taken whole by the others (jobs stay work-conserving, cpu_pool.h). */
#ifndef MOEINT4_BACKENDS_CPU_CPU_WORK_H
#define MOEINT4_BACKENDS_CPU_CPU_WORK_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* One share: next item << 32 | end, on its own cache line. */
typedef struct mi4_cpu_work_share {
    _Atomic uint64_t range;
    char pad[64 - sizeof(uint64_t)];
} mi4_cpu_work_share;

/* Splits [0, count) into `parts` shares of (nearly) equal size. */
static inline void mi4_cpu_work_split(mi4_cpu_work_share *shares, int parts, int count)
{
    for (int p = 0; p < parts; p++) {
        uint64_t begin = (uint64_t)((int64_t)count * p / parts);
        uint64_t end = (uint64_t)((int64_t)count * (p + 1) / parts);
        atomic_store_explicit(&shares[p].range, begin << 32 | end, memory_order_relaxed);
    }
}

/* The next item for `thread` (its own share first, front to back; then the
 * others', back to front), or -1 when every item is taken. */
static inline int mi4_cpu_work_take(mi4_cpu_work_share *shares, int parts, int thread)
{
    for (int i = 0; i < parts; i++) {
        mi4_cpu_work_share *share = &shares[(thread + i) % parts];
        uint64_t s = atomic_load_explicit(&share->range, memory_order_relaxed);
        for (;;) {
            uint32_t next = (uint32_t)(s >> 32), end = (uint32_t)s;
            if (next >= end)
                break;
            uint64_t taken = i == 0 ? s + ((uint64_t)1 << 32) : s - 1;
            if (atomic_compare_exchange_weak_explicit(&share->range, &s, taken,
                                                      memory_order_relaxed, memory_order_relaxed))
                return (int)(i == 0 ? next : end - 1);
        }
    }
    return -1;
}

#endif
