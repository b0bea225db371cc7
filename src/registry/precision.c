/* What each built-in backend computes in, per activation dtype: the one
 * place the library states it (moeint4_backend_precision, `moeint4 info`,
 * the conformance tolerances derive from it; docs/ARCHITECTURE.md explains
 * each row). A backend whose code changes what it rounds to updates its row
 * here in the same change. */
#include <string.h>

#include "base/error.h"
#include "base/struct_size.h"
#include "registry/registry.h"

#define F32 MOEINT4_DTYPE_F32
#define F16 MOEINT4_DTYPE_F16
#define BF16 MOEINT4_DTYPE_BF16

typedef struct precision_row {
    moeint4_backend backend;
    moeint4_dtype dtype;
    moeint4_dtype inputs, weights, intermediate, accumulation;
} precision_row;

static const precision_row precision_rows[] = {
    /* CPU: inputs used as given, int4 * scale exact in f32, f32
     * accumulation; the intermediate f32, except for BF16 activations on
     * the AVX512-BF16 and AMX kernels (vdpbf16ps, tdpbf16ps), which round
     * it to bf16, and for F16 activations on the AMX table's F16 sibling
     * (amx-f16: experts of 2+ rows), which holds it in two bf16 planes, 16
     * significant bits: stated as f16 (11), the coarsest bound that holds
     * on every CPU. */
    { MOEINT4_BACKEND_CPU, F32, F32, F32, F32, F32 },
    { MOEINT4_BACKEND_CPU, F16, F16, F32, F16, F32 },
    { MOEINT4_BACKEND_CPU, BF16, BF16, F32, BF16, F32 },
    /* XPU: the int4 kernels keep everything in f32; the oneDNN path on an
     * Intel GPU (experts with many tokens) runs its matmuls on operands in
     * the activations' dtype: weights and intermediate rounded to it. */
    { MOEINT4_BACKEND_XPU, F32, F32, F32, F32, F32 },
    { MOEINT4_BACKEND_XPU, F16, F16, F16, F16, F32 },
    { MOEINT4_BACKEND_XPU, BF16, BF16, BF16, BF16, F32 },
    /* HIP: weights BF16 (the BF16 mode dequantizes at load; the int4 mode's
     * GEMVs use them exactly, but its large-batch path expands them to BF16:
     * the coarsest is stated); activations and the intermediate are BF16
     * operands whatever the caller's dtype; f32 accumulation. */
    { MOEINT4_BACKEND_HIP, F32, BF16, BF16, BF16, F32 },
    { MOEINT4_BACKEND_HIP, F16, BF16, BF16, BF16, F32 },
    { MOEINT4_BACKEND_HIP, BF16, BF16, BF16, BF16, F32 },
};

MOEINT4_API moeint4_status moeint4_backend_precision(moeint4_backend id, moeint4_dtype dtype,
                                                     moeint4_precision *precision)
{
    mi4_clear_error();
    if (!precision)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "precision is NULL");
    moeint4_status status = mi4_struct_check_output(precision, MOEINT4_PRECISION_MIN_SIZE,
                                                    "precision", "moeint4_precision");
    if (status != MOEINT4_SUCCESS)
        return status;
    if (!mi4_registry_find(id))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "id = %d is not a known backend id", (int)id);
    if (dtype != F32 && dtype != F16 && dtype != BF16)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "dtype = %d is not F32, F16 or BF16", (int)dtype);
    moeint4_precision filled;
    memset(&filled, 0, sizeof filled);
    filled.struct_size = sizeof filled;
    for (size_t i = 0; i < sizeof precision_rows / sizeof precision_rows[0]; i++) {
        const precision_row *row = &precision_rows[i];
        if (row->backend == id && row->dtype == dtype) {
            filled.stated = 1;
            filled.inputs = row->inputs;
            filled.weights = row->weights;
            filled.intermediate = row->intermediate;
            filled.accumulation = row->accumulation;
        }
    }
    mi4_struct_write(precision, &filled, sizeof filled);
    return MOEINT4_SUCCESS;
}
