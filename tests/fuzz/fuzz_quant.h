/* Fuzzed checkpoint tensors shared by the prepare and layout harnesses:
 * shapes are either small and sane (arrays sized exactly as the claimed
 * shape needs) or broken by a rule the library must refuse before reading
 * any array (zero, negative, not a multiple of 8 or of the group, byte
 * counts past size_t). Never a huge valid shape, whose arrays a harness
 * could not provide. */
#ifndef MOEINT4_TESTS_FUZZ_QUANT_H
#define MOEINT4_TESTS_FUZZ_QUANT_H

#include "fuzz_input.h"
#include "moeint4.h"

#define FZ_MAX_DIM 256

/* A dimension: mostly a multiple of `unit` in [unit, max]; sometimes a value
 * that breaks a rule (0, negative, not a multiple of 8). */
int fz_dimension(fz_input *in, int unit, int max);
/* 32, 64, 128, -1, or a refused value. */
int fz_group_size(fz_input *in);
/* A format (or an unknown enum value), zero_offset, scales dtype. */
moeint4_format fz_format(fz_input *in);
int fz_zero_offset(fz_input *in);
moeint4_dtype fz_scales_dtype(fz_input *in);
/* A struct_size: sizeof(type) mostly, else too small / larger / 0. */
size_t fz_struct_size(fz_input *in, size_t size);

/* Arrays of one projection stack as the claimed shape needs them (tiny
 * when the shape is not sane). */
typedef struct fz_quant {
    moeint4_quant_matrix view;
    int32_t *qweight, *qzeros, *g_idx;
    uint16_t *scales;
    size_t qweight_bytes, qzeros_bytes, g_idx_bytes, scales_bytes;
} fz_quant;

/* True when every dimension is in [1, FZ_MAX_DIM] (arrays are then sized
 * for the claimed shape, whatever its divisibility). */
int fz_shape_is_small(int experts, int in_features, int out_features);

/* Fills view and arrays: random codes and zeros, scales in [2^-6, 2^2]
 * with sometimes one bad value (NaN, Inf, 0, negative), g_idx absent,
 * trivial or with one wrong entry, and sometimes a required pointer NULL. */
void fz_quant_make(fz_input *in, fz_quant *q, moeint4_format format, int zero_offset, int experts,
                   int in_features, int out_features, int group_size, moeint4_dtype scales_dtype);
void fz_quant_free(fz_quant *q);

/* Copies of every array, to prove the library did not modify its inputs. */
typedef struct fz_snapshot {
    void *copy[4];
    const void *orig[4];
    size_t bytes[4];
} fz_snapshot;
void fz_snapshot_take(fz_snapshot *s, const fz_quant *q);
/* Aborts when an input array changed; frees the copies. */
void fz_snapshot_check(fz_snapshot *s);

#endif
