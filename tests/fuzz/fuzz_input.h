/* Reading a fuzzer's bytes as structured choices. Running out of input is
 * not an error: every read then answers 0, so a short input is the first
 * (valid) choice everywhere and the fuzzer only has to grow it to reach the
 * odd corners. Bulk data past the input is filled from a generator seeded
 * by the input, so arrays are random, never zeros. */
#ifndef MOEINT4_TESTS_FUZZ_INPUT_H
#define MOEINT4_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct fz_input {
    const uint8_t *data;
    size_t size, pos;
    uint64_t fill_state; /* splitmix64 for bulk data past the end */
} fz_input;

static inline void fz_init(fz_input *in, const uint8_t *data, size_t size)
{
    in->data = data;
    in->size = size;
    in->pos = 0;
    in->fill_state = 0x9e3779b97f4a7c15ull ^ size;
    for (size_t i = 0; i < size && i < 64; i++)
        in->fill_state = in->fill_state * 31 + data[i];
}

static inline uint8_t fz_u8(fz_input *in) { return in->pos < in->size ? in->data[in->pos++] : 0; }

static inline uint32_t fz_u32(fz_input *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)fz_u8(in) << (8 * i);
    return v;
}

/* One of `count` choices (0 when the input is exhausted). */
static inline int fz_pick(fz_input *in, int count) { return (int)(fz_u8(in) % (unsigned)count); }

/* A value in [lo, hi]. */
static inline int fz_range(fz_input *in, int lo, int hi)
{
    return lo + (int)(fz_u8(in) % (unsigned)(hi - lo + 1));
}

static inline uint64_t fz_generated(fz_input *in)
{
    uint64_t z = (in->fill_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Fills `bytes`: the next input bytes first (at most a quarter of what is
 * left, so later choices still get some), the generator for the rest. */
static inline void fz_fill(fz_input *in, void *dst, size_t bytes)
{
    uint8_t *out = dst;
    size_t left = in->size - in->pos, take = left / 4 < bytes ? left / 4 : bytes;
    memcpy(out, in->data + in->pos, take);
    in->pos += take;
    for (size_t i = take; i < bytes; i++)
        out[i] = (uint8_t)fz_generated(in);
}

/* calloc that the harnesses treat as infallible (inputs are small). */
static inline void *fz_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        abort();
    return p;
}

#endif
