#include "base/alloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "base/error.h"
#include "moeint4.h"

/* Blocks allocated through these wrappers and not yet freed, process-wide:
 * what moeint4_debug_live_allocations reports, so a leak check does not
 * depend on the allocator (RSS under ASan's allocator is noise). A statistic
 * that changes nothing the library does; one relaxed atomic add per
 * allocation, and allocations are outside the forward's inner loops. */
static _Atomic long live_blocks;

static void *counted(void *pointer)
{
    if (pointer)
        atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
    return pointer;
}

MOEINT4_API moeint4_status moeint4_debug_live_allocations(int64_t *count)
{
    mi4_clear_error();
    if (!count)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "count is NULL");
    *count = atomic_load_explicit(&live_blocks, memory_order_relaxed);
    return MOEINT4_SUCCESS;
}

#if defined(MOEINT4_FAULT_INJECTION) && MOEINT4_FAULT_INJECTION
/* Test builds only: the allocation-failure hook, process-wide so that a test
 * can reach allocations on any thread. */
static _Atomic long fail_countdown = -1; /* allocations left before the failure; <0 off */
static _Atomic long attempted;

void mi4_alloc_fail_after(long n)
{
    atomic_store(&attempted, 0);
    atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

long mi4_alloc_count(void) { return atomic_load(&attempted); }

long mi4_alloc_live(void) { return atomic_load(&live_blocks); }

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
#else
static int injected_failure(void) { return 0; }
#endif

void *mi4_malloc(size_t bytes) { return injected_failure() ? NULL : counted(malloc(bytes)); }

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

void *mi4_large_alloc(size_t bytes)
{
    const size_t huge_page = (size_t)2 << 20;
    if (bytes < huge_page)
        return mi4_aligned_alloc(64, bytes);
    void *block = mi4_aligned_alloc(huge_page, bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (block) /* advice only: a kernel without THP keeps 4 KB pages */
        madvise(block, (bytes + huge_page - 1) & ~(huge_page - 1), MADV_HUGEPAGE);
#endif
    return block;
}

void mi4_free(void *pointer)
{
    if (pointer)
        atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_relaxed);
    free(pointer);
}
