/* Synthetic layers and the reference, shared by the moeint4 command (`run`,
 * `bench`), the tests (tests/kit/testkit.h adds the test-only parts) and
 * bench/: random checkpoints packed the way GPTQ and AWQ checkpoints are
 * packed, written here independently of src/layout/, and a double-precision
 * scalar reference MoE that shares no code with any backend. Depends only on
 * the public header and libc/libm (link moeint4_synth; no global state, every
 * function is reentrant given its own tk_rng). The tk_ prefix ("toolkit") is
 * the one the tests know these functions by.
 *
 * Cost of full-size layers on one core: tk_layer_random for Qwen3-30B-A3B
 * (E=128, K=2048, N=768) takes ~1.5 s and 0.9 GB (natural codes 1 byte per
 * weight + packed 0.5 byte); Mixtral-8x7B (E=8, K=4096, N=14336) ~5-7 s and
 * 2.1 GB (tk_matrix_drop_codes frees the 1.4 GB of natural codes when the
 * reference is not needed). tk_reference_moe costs ~3*N*K multiply-adds
 * per (token, slot) in double: ~0.2 s per Mixtral slot.
 * Sources: tools/synth/tk_*.c. */
#ifndef MOEINT4_TOOLS_SYNTH_SYNTH_H
#define MOEINT4_TOOLS_SYNTH_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "moeint4.h"

/* ---- random numbers (splitmix64; deterministic per seed) ---- */
typedef struct tk_rng {
    uint64_t state;
} tk_rng;
void tk_rng_seed(tk_rng *rng, uint64_t seed);
uint64_t tk_rng_next(tk_rng *rng);
double tk_rng_uniform(tk_rng *rng); /* [0, 1) */
double tk_rng_range(tk_rng *rng, double lo, double hi);
double tk_rng_normal(tk_rng *rng);        /* N(0, 1) */
int tk_rng_below(tk_rng *rng, int bound); /* uniform in [0, bound) */

/* ---- 16-bit float conversions of its own ---- */
float tk_f16_to_f32(uint16_t h);
uint16_t tk_f32_to_f16(float f); /* nearest even */
float tk_bf16_to_f32(uint16_t h);
uint16_t tk_f32_to_bf16(float f); /* nearest even */

/* ---- one quantized projection stack, natural order + packed checkpoint ---- */
typedef struct tk_matrix {
    moeint4_format format;
    int zero_offset;
    int num_experts, in_features, out_features, group_size, num_groups;
    moeint4_dtype scales_dtype; /* F16 or BF16 */
    /* natural order (what the values mean) */
    uint8_t *codes;   /* [E][OUT][IN] 0..15 */
    uint8_t *zeros;   /* [E][G][OUT] value subtracted: 8 for GPTQ_SYM,
                                    stored + zero_offset for GPTQ_ASYM, stored for AWQ */
    uint16_t *scales; /* [E][G][OUT] in scales_dtype (checkpoint array) */
    /* packed checkpoint arrays, exactly as the format stores them */
    int32_t *qweight; /* GPTQ [E][IN/8][OUT] | AWQ [E][IN][OUT/8] */
    int32_t *qzeros;  /* [E][G][OUT/8] or NULL (GPTQ_SYM) */
    int32_t *g_idx;   /* [E][IN] trivial g_idx, or NULL (see tk_matrix_random) */
} tk_matrix;

/* Random codes, zeros and scales (scales uniform in [0.5, 1.5] * scale_base,
 * rounded to scales_dtype) packed per format. with_g_idx: also fill a trivial
 * g_idx. Returns 0, or -1 when out of memory / invalid shape. */
int tk_matrix_random(tk_matrix *m, moeint4_format format, int zero_offset, int num_experts,
                     int in_features, int out_features, int group_size, moeint4_dtype scales_dtype,
                     double scale_base, int with_g_idx, tk_rng *rng);
void tk_matrix_free(tk_matrix *m);
/* A public-ABI view of the packed arrays. */
moeint4_quant_matrix tk_matrix_view(const tk_matrix *m);
/* Exact dequantized value (code - zero) * scale of expert e, row o, column i;
 * column i's group is g_idx[e][i] when the matrix has a g_idx (act-order
 * when it is not k / group_size), else i / group_size. */
double tk_matrix_value(const tk_matrix *m, int e, int o, int i);
/* The parts of that value: natural code 0..15 (read from the packed qweight
 * when the codes were dropped), zero (value subtracted) and scale. */
int tk_matrix_code(const tk_matrix *m, int e, int o, int i);
/* The zero (value subtracted) of group g, row o, read from the packed qzeros
 * (8 for GPTQ_SYM; + zero_offset for GPTQ_ASYM): for matrices that hold only
 * packed arrays, such as a checkpoint's (zeros may be NULL then). */
int tk_matrix_packed_zero(const tk_matrix *m, int e, int g, int o);
int tk_matrix_zero(const tk_matrix *m, int e, int o, int i);
double tk_matrix_scale(const tk_matrix *m, int e, int o, int i);
/* Allocates every array of a matrix (uninitialised codes/zeros/scales;
 * trivial g_idx filled when with_g_idx). Fill codes, zeros (natural: the
 * value subtracted) and scales, then call tk_matrix_pack. 0 or -1. */
int tk_matrix_alloc(tk_matrix *m, moeint4_format format, int zero_offset, int num_experts,
                    int in_features, int out_features, int group_size, moeint4_dtype scales_dtype,
                    int with_g_idx);
/* Packs qweight (and qzeros: stored = natural zero - zero_offset) from the
 * natural codes and zeros. */
void tk_matrix_pack(tk_matrix *m);
/* Frees the natural codes (1 byte per weight: 1.4 GB for Mixtral-8x7B) when
 * only the packed checkpoint is needed. tk_matrix_value keeps working (it
 * decodes the packed words); tk_reference_moe needs the codes and writes NaN
 * without them. */
void tk_matrix_drop_codes(tk_matrix *m);
/* Gives the matrix a trivial g_idx [E][IN] (g_idx[k] = k / group). 0 or -1. */
int tk_matrix_add_g_idx(tk_matrix *m);

/* ---- a whole MoE layer ---- */
typedef struct tk_layer {
    int num_experts, num_local_experts, hidden_size, intermediate_size, group_size;
    moeint4_format format;
    int zero_offset;
    int32_t *expert_map; /* [num_experts] or NULL (identity) */
    tk_matrix w13;       /* IN = K, OUT = 2N (gate rows first) */
    tk_matrix w2;        /* IN = N, OUT = K */
} tk_layer;

/* Scales chosen so activations keep unit-ish magnitude through the layer.
 * expert_map_mode: 0 identity (no map), 1 a random map where about a third of
 * the global experts are -1 and local ids are shuffled. */
int tk_layer_random(tk_layer *layer, moeint4_format format, int zero_offset, int num_experts,
                    int hidden_size, int intermediate_size, int group_size,
                    moeint4_dtype scales_dtype, int expert_map_mode, tk_rng *rng);
void tk_layer_free(tk_layer *layer);
/* The scale_base tk_layer_random uses for a projection with in_features
 * inputs: unit gain for unit-variance inputs (derivation in tk_layer.c). */
double tk_unit_gain_scale(moeint4_format format, int zero_offset, int in_features);
/* Gives both matrices a trivial g_idx (g_idx[k] = k / group). 0 or -1. */
int tk_layer_add_g_idx(tk_layer *layer);
/* Fills a descriptor pointing at the layer's arrays. */
moeint4_weights_desc tk_layer_desc(const tk_layer *layer);

/* ---- routing and activations ---- */
/* Softmax top-k routing of random router logits: distinct ids per token,
 * weights renormalised over the k picked. ids [M][topk], weights [M][topk]. */
void tk_route_random(tk_rng *rng, int64_t num_tokens, int num_experts, int topk, int32_t *ids,
                     float *weights);
/* Random activations N(0,1) * amplitude stored in dtype ([M][K] elements). */
void tk_fill_activations(tk_rng *rng, moeint4_dtype dtype, size_t count, double amplitude,
                         void *data);
size_t tk_dtype_size(moeint4_dtype dtype);
/* Outputs are filled with TK_POISON before a call, so an element the call
 * forgets to write fails the check: 0xff bytes are NaN in f32, f16 and bf16
 * alike, codes 15 in packed int4 bytes. */
#define TK_POISON 0xff
void tk_poison(void *data, size_t bytes);
double tk_load(moeint4_dtype dtype, const void *data, size_t index);
/* Stores value rounded (nearest even) to dtype at data[index]. */
void tk_store(moeint4_dtype dtype, void *data, size_t index, double value);

/* ---- the reference: double precision, natural-order weights ---- */
typedef struct tk_activation {
    moeint4_activation kind;
    double limit, alpha, beta;
    int apply_router_weight_on_input;
} tk_activation;

/* out[M][K] in double. Reads activations as their dtype's exact values.
 * Rows in row_list (NULL = all rows, else `num_rows` row indices) only;
 * out is indexed by the row's position in that list. */
void tk_reference_moe(const tk_layer *layer, moeint4_dtype dtype, const void *hidden,
                      int64_t num_tokens, int topk, const int32_t *ids, const float *weights,
                      const tk_activation *act, const int64_t *row_list, int64_t num_rows,
                      double *out);

/* Forward arguments with struct_size set; act NULL = SiLU with the router
 * weight on the output. */
moeint4_forward_args tk_forward_args(moeint4_dtype dtype, int64_t num_tokens, int topk,
                                     const void *hidden, const int32_t *ids, const float *weights,
                                     void *output, const tk_activation *act);

/* Relative L2 error ||got - want|| / ||want|| of `count` values, got stored in dtype. */
double tk_relative_l2(moeint4_dtype dtype, const void *got, const double *want, size_t count);

#endif
