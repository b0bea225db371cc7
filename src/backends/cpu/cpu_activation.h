/* The gate/up activations of moeint4_activation, in f32. */
#ifndef MOEINT4_BACKENDS_CPU_CPU_ACTIVATION_H
#define MOEINT4_BACKENDS_CPU_CPU_ACTIVATION_H

#include <math.h>

#include "moeint4.h"

typedef struct mi4_cpu_activation {
    moeint4_activation kind;
    float limit, alpha, beta;
} mi4_cpu_activation;

static inline float mi4_cpu_activate(const mi4_cpu_activation *act, float gate, float up)
{
    switch (act->kind) {
    case MOEINT4_ACTIVATION_GELU:
        /* 1 + erf(g / sqrt 2) == erfc(-g / sqrt 2), which keeps its
         * relative accuracy where the left tail would cancel to 0 */
        return 0.5f * gate * erfcf(-gate * 0.70710678118654752f) * up;
    case MOEINT4_ACTIVATION_SWIGLU_CLAMP: {
        float g = fminf(gate, act->limit);
        float u = fminf(fmaxf(up, -act->limit), act->limit);
        return (u + act->beta) * g / (1.0f + expf(-act->alpha * g));
    }
    default: return gate / (1.0f + expf(-gate)) * up;
    }
}

#endif
