#include "base/alloc.h"

#include <stdint.h>
#include <stdlib.h>

#if defined(MOEINT4_FAULT_INJECTION) && MOEINT4_FAULT_INJECTION
#include <stdatomic.h>

/* Test builds only: the one place besides the registry with process-wide
 * mutable state, so that a test can reach allocations on any thread. */
static _Atomic long fail_countdown = -1; /* allocations left before the failure; <0 off */
static _Atomic long attempted;
static _Atomic long live_blocks;

void mi4_alloc_fail_after(long n)
{
    atomic_store(&attempted, 0);
    atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

long mi4_alloc_count(void)
{
    return atomic_load(&attempted);
}

long mi4_alloc_live(void)
{
    return atomic_load(&live_blocks);
}

/* 1 when this allocation is the one to fail. */
static int injected_failure(void)
{
    atomic_fetch_add(&attempted, 1);
    long left = atomic_load(&fail_countdown);
    while (left >= 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &left, left - 1))
            return left == 0;
    }
    return 0;
}

static void *counted(void *pointer)
{
    if (pointer)
        atomic_fetch_add(&live_blocks, 1);
    return pointer;
}
#else
static int injected_failure(void)
{
    return 0;
}

static void *counted(void *pointer)
{
    return pointer;
}
#endif

void *mi4_malloc(size_t bytes)
{
    return injected_failure() ? NULL : counted(malloc(bytes));
}

void *mi4_calloc(size_t count, size_t size)
{
    return injected_failure() ? NULL : counted(calloc(count, size));
}

void *mi4_aligned_alloc(size_t alignment, size_t bytes)
{
    if (bytes == 0)
        bytes = alignment;
    if (bytes > SIZE_MAX - (alignment - 1))
        return NULL;
    size_t rounded = (bytes + alignment - 1) & ~(alignment - 1);
    return injected_failure() ? NULL : counted(aligned_alloc(alignment, rounded));
}

void mi4_free(void *pointer)
{
#if defined(MOEINT4_FAULT_INJECTION) && MOEINT4_FAULT_INJECTION
    if (pointer)
        atomic_fetch_sub(&live_blocks, 1);
#endif
    free(pointer);
}
