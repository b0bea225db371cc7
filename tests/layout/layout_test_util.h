/* Small helpers shared by the layout tests (header-only: every test_*.c is
 * its own executable). */
#ifndef MOEINT4_TESTS_LAYOUT_TEST_UTIL_H
#define MOEINT4_TESTS_LAYOUT_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* 0xff bytes: NaN in f32 and bf16, 0xff in packed int4 bytes (codes 15, 15),
 * so any element a conversion forgets to write is caught. */
#define LT_POISON 0xff

static inline void *lt_poisoned(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p)
        memset(p, LT_POISON, bytes ? bytes : 1);
    return p;
}

static inline void *lt_copy(const void *src, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p && bytes)
        memcpy(p, src, bytes);
    return p;
}

/* 1 when every byte is still the poison value. */
static inline int lt_still_poisoned(const void *data, size_t bytes)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != LT_POISON)
            return 0;
    return 1;
}

/* bf16 bit patterns on a line where adjacent representable values are
 * adjacent integers (negative values mirrored), so |a - b| counts ulps. */
static inline int32_t lt_bf16_ordinal(uint16_t bits)
{
    return (bits & 0x8000u) ? -(int32_t)(bits & 0x7fffu) : (int32_t)bits;
}

#endif
