/* The library's host allocations all go through these wrappers, so a test
 * build (MOEINT4_FAULT_INJECTION) can make any one of them fail and prove
 * that every allocation site answers OUT_OF_MEMORY, leaks nothing and leaves
 * the library working (tests/faults). In other builds they are plain calls. */
#ifndef MOEINT4_BASE_ALLOC_H
#define MOEINT4_BASE_ALLOC_H

#include <stddef.h>

void *mi4_malloc(size_t bytes);
void *mi4_calloc(size_t count, size_t size);
/* `bytes` is rounded up to a multiple of `alignment` (a power of two, at
 * least sizeof(void *)), as C11 aligned_alloc requires; 0 bytes gives one
 * aligned block. NULL when the rounded size overflows. */
void *mi4_aligned_alloc(size_t alignment, size_t bytes);
/* A block of `bytes` (64-byte aligned) for large, long-lived or streamed
 * data: from 2 MB on it is 2 MB aligned and Linux is asked to back it with
 * transparent huge pages (which a THP setting of "madvise" needs, "always"
 * gives anyway, "never" refuses): fewer TLB misses, and hardware
 * prefetchers that are not stopped at every 4 KB page. */
void *mi4_large_alloc(size_t bytes);
/* Frees what any of the four returned; NULL is a no-op. */
void mi4_free(void *pointer);

#if defined(MOEINT4_FAULT_INJECTION) && MOEINT4_FAULT_INJECTION
/* Test builds only. The injection state is process-wide (atomics), so
 * allocations made on worker threads count too; tests that need a
 * deterministic order use one worker thread.
 *  mi4_alloc_fail_after(n): the next n allocations succeed, the one after
 *    fails, then all succeed again; n < 0 disarms.
 *  mi4_alloc_count(): allocations attempted since the last fail_after.
 *  mi4_alloc_live(): blocks allocated and not yet freed (a leak counter). */
void mi4_alloc_fail_after(long n);
long mi4_alloc_count(void);
long mi4_alloc_live(void);
#endif

#endif
