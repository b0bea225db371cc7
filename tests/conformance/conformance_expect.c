/* Expected-supported sets and tolerances (conformance_expect.h). */
#include "conformance_expect.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- what each backend must serve ---- */

#define ALL_GROUPS (GROUP_32 | GROUP_64 | GROUP_128 | GROUP_CHANNEL)
enum { GROUP_32 = 1, GROUP_64 = 2, GROUP_128 = 4, GROUP_CHANNEL = 8 };
enum { FMT_GPTQ_SYM = 1, FMT_GPTQ_ASYM = 2, FMT_GPTQ_ASYM_V1 = 4, FMT_AWQ = 8 };
#define ALL_FORMATS (FMT_GPTQ_SYM | FMT_GPTQ_ASYM | FMT_GPTQ_ASYM_V1 | FMT_AWQ)
#define BIT(value) (1u << (unsigned)(value))
#define ALL_ACTIVATIONS                                                                            \
    (BIT(MOEINT4_ACTIVATION_SILU) | BIT(MOEINT4_ACTIVATION_GELU) |                                 \
     BIT(MOEINT4_ACTIVATION_SWIGLU_CLAMP))
#define ALL_DTYPES (BIT(MOEINT4_DTYPE_F32) | BIT(MOEINT4_DTYPE_F16) | BIT(MOEINT4_DTYPE_BF16))

/* Every axis of the matrix: a case is expected when each of its values is
 * in the backend's set. */
typedef struct expected_set {
    const char *backend;
    unsigned formats;     /* FMT_* */
    unsigned group_sizes; /* GROUP_* */
    unsigned activations; /* BIT(moeint4_activation) */
    unsigned dtypes;      /* BIT(moeint4_dtype) of the activations */
    unsigned scales;      /* BIT(moeint4_dtype) of the scales */
    int expert_map;       /* 1: must serve expert-parallel (expert_map) layers */
    int g_idx;            /* 1: must accept trivial g_idx arrays */
    int router_on_input;  /* 1: must serve apply_router_weight_on_input */
    int act_order;        /* 1: must serve act-order g_idx (GPTQ desc_act) */
} expected_set;

static const expected_set expected_sets[] = {
    /* The CPU serves every format, group size, activation, dtype and act-order. */
    { "cpu", ALL_FORMATS, ALL_GROUPS, ALL_ACTIVATIONS, ALL_DTYPES, ALL_DTYPES, 1, 1, 1, 1 },
    /* HIP serves every format and act-order, as int4 or bf16 device weights
     * (gpu_weights). */
    { "hip", ALL_FORMATS, ALL_GROUPS, ALL_ACTIVATIONS, ALL_DTYPES, ALL_DTYPES, 1, 1, 1, 1 },
    /* XPU: every format (zero points through its _zp kernels) and act-order. */
    { "xpu", ALL_FORMATS, ALL_GROUPS, ALL_ACTIVATIONS, ALL_DTYPES, ALL_DTYPES, 1, 1, 1, 1 },
    /* test_conformance's own check that a refusal inside a set fails: a
     * registered backend that refuses everything, held to GPTQ_SYM g128. */
    { "conformance-self-check", FMT_GPTQ_SYM, GROUP_128, ALL_ACTIVATIONS, ALL_DTYPES, ALL_DTYPES, 1,
      1, 1, 0 },
};

static unsigned format_bit(moeint4_format format, int zero_offset)
{
    switch (format) {
    case MOEINT4_FORMAT_GPTQ_SYM: return FMT_GPTQ_SYM;
    case MOEINT4_FORMAT_GPTQ_ASYM: return zero_offset ? FMT_GPTQ_ASYM_V1 : FMT_GPTQ_ASYM;
    case MOEINT4_FORMAT_AWQ: return FMT_AWQ;
    }
    return 0;
}

static unsigned group_bit(int group_size)
{
    return group_size == 32    ? GROUP_32
           : group_size == 64  ? GROUP_64
           : group_size == 128 ? GROUP_128
                               : GROUP_CHANNEL;
}

static const expected_set *set_of(const char *backend_name)
{
    for (size_t i = 0; i < sizeof expected_sets / sizeof expected_sets[0]; i++)
        if (strcmp(expected_sets[i].backend, backend_name) == 0)
            return &expected_sets[i];
    return NULL;
}

static int in_set(const expected_set *set, moeint4_format format, int zero_offset, int group_size,
                  moeint4_activation activation, moeint4_dtype dtype, moeint4_dtype scales_dtype,
                  int expert_map, int g_idx, int act_order, int router_on_input)
{
    return set && (set->formats & format_bit(format, zero_offset)) &&
           (set->group_sizes & group_bit(group_size)) && (set->activations & BIT(activation)) &&
           (set->dtypes & BIT(dtype)) && (set->scales & BIT(scales_dtype)) &&
           (!expert_map || set->expert_map) && (!g_idx || set->g_idx) &&
           (!act_order || set->act_order) && (!router_on_input || set->router_on_input);
}

int conf_expected_supported(const char *backend_name, const conf_case *c)
{
    const conf_layer_spec *l = &c->layer;
    return in_set(set_of(backend_name), l->format, l->zero_offset, l->group_size, c->activation,
                  c->dtype, l->scales_dtype, l->expert_map, l->with_g_idx, l->act_order,
                  c->apply_router_weight_on_input);
}

int conf_expected_supported_parts(const char *backend_name, moeint4_format format, int zero_offset,
                                  int group_size, moeint4_activation activation,
                                  moeint4_dtype dtype, moeint4_dtype scales_dtype)
{
    return in_set(set_of(backend_name), format, zero_offset, group_size, activation, dtype,
                  scales_dtype, 0, 0, 0, 0);
}

/* ---- tolerances from the stated precision ----
 * The reference is exact (double arithmetic on the exact int4 weights), so
 * a backend's error is what it rounds on the way. Rounding to a dtype with
 * a p-bit fraction leaves a relative error of rms 2^-p / sqrt(12): bf16
 * 2.3e-3, f16 2.8e-4, f32 3.4e-8; independent roundings of the terms of a
 * dot product give the dot product about the same relative error, so the
 * output's relative L2 error is about the root sum of squares over the
 * roundings on the way:
 *   inputs       (when held coarser than the caller's dtype)   once
 *   weights      (each projection's)                           twice
 *   intermediate                                               once
 *   output       (the caller's dtype)                          once
 * Measured on the CPU (output rounding only) over the whole matrix: f16
 * 2.5e-4, bf16 2.06e-3 at most, i.e. 0.9x that estimate; the HIP backend
 * (bf16 inputs, weights, intermediate) measured ~4e-3 for 4.6e-3 estimated.
 * The bound is SAFETY times the estimate, plus the f32 accumulation bound
 * (sums of up to ~16K terms, expf/erff to a few ulps: measured <= 1.7e-6).
 * A scale rounded to bf16 by mistake (~1.5e-3) fails f32 on an all-f32
 * backend; a wrong nibble, zero or group fails every dtype. */
#define SAFETY 3.0
#define F32_ACCUMULATION_BOUND 1e-5

static double rounding_rms(moeint4_dtype dtype)
{
    double fraction_bits = dtype == MOEINT4_DTYPE_BF16 ? 7 : dtype == MOEINT4_DTYPE_F16 ? 10 : 23;
    return pow(2.0, -fraction_bits) / sqrt(12.0);
}

/* The precision `id` states, or all-bf16 when it states none. */
static moeint4_precision stated_precision(moeint4_backend id, moeint4_dtype dtype)
{
    moeint4_precision p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    if (moeint4_backend_precision(id, dtype, &p) != MOEINT4_SUCCESS || !p.stated) {
        p.inputs = p.weights = p.intermediate = MOEINT4_DTYPE_BF16;
        p.accumulation = MOEINT4_DTYPE_F32;
    }
    return p;
}

double conf_tolerance(moeint4_backend id, moeint4_dtype dtype)
{
    moeint4_precision p = stated_precision(id, dtype);
    double input = p.inputs == dtype ? 0.0 : rounding_rms(p.inputs);
    double weights = rounding_rms(p.weights), intermediate = rounding_rms(p.intermediate);
    double output = rounding_rms(dtype);
    double estimate = sqrt(input * input + 2.0 * weights * weights + intermediate * intermediate +
                           output * output);
    double accumulation = p.accumulation == MOEINT4_DTYPE_F32
                              ? F32_ACCUMULATION_BOUND
                              : SAFETY * rounding_rms(p.accumulation);
    return SAFETY * estimate + accumulation;
}

static const char *word(moeint4_dtype dtype)
{
    return dtype == MOEINT4_DTYPE_F32 ? "f32" : dtype == MOEINT4_DTYPE_F16 ? "f16" : "bf16";
}

void conf_describe_tolerance(moeint4_backend id, moeint4_dtype dtype, char *text, size_t cap)
{
    moeint4_precision p = stated_precision(id, dtype);
    snprintf(text, cap, "%s: inputs/weights/intermediate/accumulation %s/%s/%s/%s -> bound %.3g",
             word(dtype), word(p.inputs), word(p.weights), word(p.intermediate),
             word(p.accumulation), conf_tolerance(id, dtype));
}
