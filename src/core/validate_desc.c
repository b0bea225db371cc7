/* Validation of moeint4_weights_desc, before any backend sees it. */
#include <limits.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "moeint4_backend.h"
#include "base/error.h"
#include "base/struct_size.h"
#include "core/validate_desc.h"
#include "layout/act_order.h"
#include "layout/layout.h"

static moeint4_status check_counts_and_sizes(const moeint4_weights_desc *desc)
{
    if (desc->num_experts <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc->num_experts = %d must be > 0",
                        desc->num_experts);
    if (desc->num_local_experts <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc->num_local_experts = %d must be > 0",
                        desc->num_local_experts);
    if (desc->num_local_experts > desc->num_experts)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "desc->num_local_experts = %d exceeds desc->num_experts = %d",
                        desc->num_local_experts, desc->num_experts);
    if (desc->hidden_size <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc->hidden_size = %d must be > 0",
                        desc->hidden_size);
    if (desc->intermediate_size <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc->intermediate_size = %d must be > 0",
                        desc->intermediate_size);
    if (desc->intermediate_size > INT_MAX / 2)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "desc->intermediate_size = %d is too large (2 * N must fit an int)",
                        desc->intermediate_size);
    return MOEINT4_SUCCESS;
}

static moeint4_status check_enums(const moeint4_weights_desc *desc)
{
    moeint4_format format = desc->format;
    if (!mi4_layout_is_format(format))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc->format = %d is not a moeint4_format",
                        (int)format);
    if (!mi4_layout_is_group_size(desc->group_size))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "desc->group_size = %d is not " MI4_LAYOUT_GROUP_SIZES_TEXT
                        " (per-channel)",
                        desc->group_size);
    if (desc->zero_offset != 0 && desc->zero_offset != 1)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "desc->zero_offset = %d must be 0 or 1",
                        desc->zero_offset);
    if (desc->zero_offset == 1 && format != MOEINT4_FORMAT_GPTQ_ASYM)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "desc->zero_offset = 1 applies to GPTQ_ASYM only (format = %d)",
                        (int)format);
    moeint4_dtype scales = desc->scales_dtype;
    if (scales != 0 && scales != MOEINT4_DTYPE_F16 && scales != MOEINT4_DTYPE_BF16)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "desc->scales_dtype = %d is not 0 (F16), F16 or BF16", (int)scales);
    return MOEINT4_SUCCESS;
}

/* expert_map: every entry in [-1, local), no local id twice, and every local
 * id used (a local expert nobody routes to means the map and the arrays
 * disagree, e.g. a map meant for another rank). */
static moeint4_status check_expert_map(const moeint4_weights_desc *desc)
{
    int global = desc->num_experts, local = desc->num_local_experts;
    if (!desc->expert_map) {
        if (local != global)
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "desc->expert_map is NULL but num_local_experts = %d differs from "
                            "num_experts = %d",
                            local, global);
        return MOEINT4_SUCCESS;
    }
    int *owner = mi4_malloc((size_t)local * sizeof *owner);
    if (!owner)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory to check desc->expert_map");
    for (int l = 0; l < local; l++)
        owner[l] = -1;
    moeint4_status status = MOEINT4_SUCCESS;
    for (int e = 0; e < global && status == MOEINT4_SUCCESS; e++) {
        int32_t l = desc->expert_map[e];
        if (l < -1 || l >= local)
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "desc->expert_map[%d] = %d is outside [-1, %d)", e, (int)l, local);
        else if (l >= 0 && owner[l] >= 0)
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "desc->expert_map[%d] = %d repeats desc->expert_map[%d] (local ids "
                              "must not repeat)",
                              e, (int)l, owner[l]);
        else if (l >= 0)
            owner[l] = e;
    }
    for (int l = 0; l < local && status == MOEINT4_SUCCESS; l++)
        if (owner[l] < 0)
            status = mi4_fail(MOEINT4_INVALID_ARGUMENT,
                              "desc->expert_map maps no global expert to local expert %d (every "
                              "local expert must be used)",
                              l);
    mi4_free(owner);
    return status;
}

moeint4_status mi4_validate_weights_desc(const moeint4_weights_desc *caller,
                                         moeint4_weights_desc *normalized)
{
    moeint4_status status = MI4_STRUCT_READ(*normalized, caller, MOEINT4_WEIGHTS_DESC_MIN_SIZE,
                                            "desc", "moeint4_weights_desc");
    if (status != MOEINT4_SUCCESS)
        return status;
    const moeint4_weights_desc *desc = normalized;
    status = check_counts_and_sizes(desc);
    if (status == MOEINT4_SUCCESS)
        status = check_enums(desc);
    if (status == MOEINT4_SUCCESS)
        status = check_expert_map(desc);
    if (status != MOEINT4_SUCCESS)
        return status;
    /* Shapes, sizes and pointers of both projections before any data is read. */
    moeint4_quant_matrix w13 = moeint4_desc_w13(desc), w2 = moeint4_desc_w2(desc);
    if ((status = mi4_layout_validate_shape(&w13, "w13")) != MOEINT4_SUCCESS ||
        (status = mi4_layout_validate_shape(&w2, "w2")) != MOEINT4_SUCCESS ||
        (status = mi4_layout_validate_data(&w13, "w13")) != MOEINT4_SUCCESS)
        return status;
    status = mi4_layout_validate_data(&w2, "w2");
    if (status == MOEINT4_SUCCESS)
        normalized->scales_dtype = moeint4_desc_scales_dtype(desc); /* 0 means F16 */
    return status;
}

moeint4_problem mi4_problem_from_desc(const moeint4_weights_desc *desc)
{
    moeint4_problem problem = { 0 };
    problem.struct_size = sizeof problem;
    problem.format = desc->format;
    problem.group_size = desc->group_size;
    problem.num_experts = desc->num_experts;
    problem.num_local_experts = desc->num_local_experts;
    problem.has_expert_map = desc->expert_map != NULL;
    problem.hidden_size = desc->hidden_size;
    problem.intermediate_size = desc->intermediate_size;
    problem.zero_offset = desc->zero_offset;
    problem.has_g_idx = desc->w13_g_idx != NULL || desc->w2_g_idx != NULL;
    problem.act_order = problem.has_g_idx && mi4_layout_desc_has_act_order(desc);
    return problem;
}
