/* Test kit: poisoned buffers, so an element a call forgets to write is seen. */
#include <stdlib.h>
#include <string.h>

#include "testkit.h"

void *tk_poisoned_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p)
        memset(p, TK_POISON, bytes ? bytes : 1);
    return p;
}

void *tk_copy_alloc(const void *src, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (p && bytes)
        memcpy(p, src, bytes);
    return p;
}

int tk_still_poisoned(const void *data, size_t bytes)
{
    const uint8_t *b = data;
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != TK_POISON)
            return 0;
    return 1;
}

int32_t tk_bf16_ordinal(uint16_t bits)
{
    return (bits & 0x8000u) ? -(int32_t)(bits & 0x7fffu) : (int32_t)bits;
}
