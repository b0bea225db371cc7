/* The [E, ...] arrays a weights description needs. Per-expert tensors are
 * copied into stacks (gate and up side by side along OUT: w13 = gate rows
 * then up rows); fused 3-D tensors are used in place when aligned. Symmetric
 * GPTQ zeros are checked against the checkpoint's label here. */
#include <stdint.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/struct_size.h"

void mi4_ckpt_stack_release(mi4_ckpt_stack *stack)
{
    for (int i = 0; i < stack->num_owned; i++)
        mi4_free(stack->owned[i]);
    memset(stack, 0, sizeof *stack);
}

static void *stack_alloc(mi4_ckpt_stack *stack, size_t bytes)
{
    int32_t *p = mi4_aligned_alloc(64, bytes);
    if (p)
        stack->owned[stack->num_owned++] = p;
    return p;
}

enum { PART_QWEIGHT, PART_SCALES, PART_QZEROS, PART_G_IDX };

static const mi4_ckpt_ref *part(const mi4_ckpt_proj *p, int which)
{
    switch (which) {
    case PART_QWEIGHT: return p->qweight;
    case PART_SCALES: return p->scales;
    case PART_QZEROS: return p->qzeros;
    default: return p->g_idx;
    }
}

/* Rows of `a` and `b` side by side (b NULL: a alone); returns bytes written. */
static size_t concat_rows(uint8_t *dst, const mi4_st_tensor *a, const mi4_st_tensor *b)
{
    if (!b) {
        memcpy(dst, a->data, a->bytes);
        return a->bytes;
    }
    size_t rows = (size_t)a->shape[0];
    size_t ra = a->bytes / rows, rb = b->bytes / rows;
    for (size_t r = 0; r < rows; r++) {
        memcpy(dst + r * (ra + rb), a->data + r * ra, ra);
        memcpy(dst + r * (ra + rb) + ra, b->data + r * rb, rb);
    }
    return a->bytes + b->bytes;
}

/* One stacked array over every expert: w13 (gate | up) or w2 (down). A
 * fused tensor is used in place when its data is 4-byte aligned. */
static const void *stack_part(mi4_ckpt_stack *stack, const mi4_ckpt_experts *x, int w13, int which,
                              int *failed)
{
    if (x->fused) {
        const mi4_ckpt_ref *r = part(&x->proj[w13 ? 0 : 1], which);
        if (!r)
            return NULL;
        if (((uintptr_t)r->tensor->data & 3u) == 0)
            return r->tensor->data;
        uint8_t *copy = stack_alloc(stack, r->tensor->bytes);
        if (!copy) {
            *failed = 1;
            return NULL;
        }
        memcpy(copy, r->tensor->data, r->tensor->bytes);
        return copy;
    }
    const mi4_ckpt_ref *first = part(&x->proj[w13 ? 0 : 2], which);
    if (!first)
        return NULL;
    int g_idx = which == PART_G_IDX;
    size_t per_expert = first->tensor->bytes * (w13 && !g_idx ? 2 : 1);
    uint8_t *dst = stack_alloc(stack, per_expert * (size_t)x->num_experts);
    if (!dst) {
        *failed = 1;
        return NULL;
    }
    uint8_t *at = dst;
    for (int e = 0; e < x->num_experts; e++) {
        const mi4_ckpt_proj *p = &x->proj[e * 3];
        if (w13)
            at += concat_rows(at, part(&p[0], which)->tensor,
                              g_idx ? NULL : part(&p[1], which)->tensor);
        else
            at += concat_rows(at, part(&p[2], which)->tensor, NULL);
    }
    return dst;
}

/* Symmetric GPTQ stores zero 8 as 7 (v1) or 8 (v2) everywhere. */
static moeint4_status check_sym_zeros(moeint4_checkpoint *ck, const mi4_ckpt_experts *x)
{
    int projections = x->fused ? 2 : 3;
    int count = (x->fused ? 1 : x->num_experts) * projections;
    int seen = -1;
    const mi4_ckpt_ref *seen_in = NULL;
    for (int i = 0; i < count; i++) {
        const mi4_ckpt_ref *z = x->proj[i].qzeros;
        if (!z)
            continue;
        for (size_t w = 0; w < z->tensor->bytes / 4; w++) {
            uint32_t word;
            memcpy(&word, z->tensor->data + 4 * w, 4);
            for (int nib = 0; nib < 8; nib++) {
                int value = (int)((word >> (4 * nib)) & 15u);
                if (seen < 0 && (value == 7 || value == 8)) {
                    seen = value;
                    seen_in = z;
                }
                if (value != seen)
                    return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                    "%s: tensor \"%s\": stored zero %d at word %zu nibble %d, "
                                    "but symmetric GPTQ (sym = true) stores 7 (gptq v1) or 8 "
                                    "(gptq_v2) everywhere%s%s",
                                    z->file->label, z->tensor->name, value, w, nib,
                                    seen >= 0 ? "; earlier zeros were " : "",
                                    seen == 7   ? "7"
                                    : seen == 8 ? "8"
                                                : "");
            }
        }
    }
    int expected = ck->quant.gptq_v2 ? 8 : 7;
    if (seen >= 0 && seen != expected)
        mi4_ckpt_warn(ck,
                      "%s: tensor \"%s\": the stored zeros are %d, the %s convention, but %s "
                      "says checkpoint_format %s: mislabeled; served as symmetric (q - 8), "
                      "which both conventions mean",
                      seen_in->file->label, seen_in->tensor->name, seen,
                      seen == 8 ? "gptq_v2" : "gptq (v1)", ck->quant.source,
                      ck->quant.gptq_v2 ? "gptq_v2" : "gptq (v1)");
    return MOEINT4_SUCCESS;
}

/* Every expert holds part `which` of each projection exactly when expert 0
 * does, with expert 0's byte count, and up matches gate: the stacked arrays
 * are sized from expert 0's gate. */
static moeint4_status check_same_parts(const mi4_ckpt_experts *x, int which, const char *what)
{
    static const char *const names[3] = { "gate", "up", "down" };
    if (x->fused)
        return MOEINT4_SUCCESS;
    for (int j = 0; j < 3; j++) {
        if (j == 1 && which == PART_G_IDX)
            continue; /* w13 takes gate's g_idx */
        const mi4_ckpt_ref *first = part(&x->proj[j == 1 ? 0 : j], which);
        for (int e = 0; e < x->num_experts; e++) {
            const mi4_ckpt_ref *r = part(&x->proj[e * 3 + j], which);
            if (!r != !first)
                return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                "%s: expert %d's %s %s is %s, but expert 0's %s has %s", x->prefix,
                                e, names[j], what, r ? "present" : "missing",
                                j == 1 ? "gate" : names[j], first ? "one" : "none");
            if (r && r->tensor->bytes != first->tensor->bytes)
                return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                                "%s: tensor \"%s\" (%s) holds %zu bytes, expert 0's %s %zu",
                                r->file->label, r->tensor->name, what, r->tensor->bytes,
                                j == 1 ? "gate" : names[j], first->tensor->bytes);
        }
    }
    return MOEINT4_SUCCESS;
}

static moeint4_status build_stack(moeint4_checkpoint *ck, mi4_ckpt_experts *x)
{
    if (ck->format == MOEINT4_FORMAT_GPTQ_SYM) {
        moeint4_status s = check_sym_zeros(ck, x);
        if (s != MOEINT4_SUCCESS)
            return s;
    }
    int parts[4] = { PART_QWEIGHT, PART_SCALES, PART_QZEROS, PART_G_IDX };
    const char *part_names[4] = { "qweight", "scales", "qzeros", "g_idx" };
    for (int i = 0; i < 4; i++) {
        if ((parts[i] == PART_QZEROS && ck->format == MOEINT4_FORMAT_GPTQ_SYM) ||
            (parts[i] == PART_G_IDX && !x->act_order))
            continue;
        moeint4_status s = check_same_parts(x, parts[i], part_names[i]);
        if (s != MOEINT4_SUCCESS)
            return s;
    }
    mi4_ckpt_stack *st = &x->stack;
    int failed = 0, sym = ck->format == MOEINT4_FORMAT_GPTQ_SYM;
    st->w13_qweight = stack_part(st, x, 1, PART_QWEIGHT, &failed);
    st->w13_scales = stack_part(st, x, 1, PART_SCALES, &failed);
    st->w13_qzeros = sym ? NULL : stack_part(st, x, 1, PART_QZEROS, &failed);
    st->w13_g_idx = x->act_order ? stack_part(st, x, 1, PART_G_IDX, &failed) : NULL;
    st->w2_qweight = stack_part(st, x, 0, PART_QWEIGHT, &failed);
    st->w2_scales = stack_part(st, x, 0, PART_SCALES, &failed);
    st->w2_qzeros = sym ? NULL : stack_part(st, x, 0, PART_QZEROS, &failed);
    st->w2_g_idx = x->act_order ? stack_part(st, x, 0, PART_G_IDX, &failed) : NULL;
    if (failed) {
        size_t bytes = x->stored_bytes;
        mi4_ckpt_stack_release(st);
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "%s: no memory to stack %zu bytes of experts",
                        x->prefix, bytes);
    }
    st->ready = 1;
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_ckpt_experts_desc(moeint4_checkpoint *ck, mi4_ckpt_experts *x, int *holder,
                                     moeint4_weights_desc *desc)
{
    pthread_mutex_lock(&ck->lock);
    moeint4_status s = x->stack.ready ? MOEINT4_SUCCESS : build_stack(ck, x);
    if (s == MOEINT4_SUCCESS && holder)
        (*holder)++;
    pthread_mutex_unlock(&ck->lock);
    if (s != MOEINT4_SUCCESS)
        return s;
    moeint4_weights_desc d;
    memset(&d, 0, sizeof d);
    d.num_experts = x->num_experts;
    d.num_local_experts = x->num_experts;
    d.hidden_size = x->hidden_size;
    d.intermediate_size = x->intermediate_size;
    d.group_size = x->group_size;
    d.format = ck->format;
    d.zero_offset = ck->zero_offset;
    d.scales_dtype = x->scales_dtype == MI4_ST_BF16 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16;
    const mi4_ckpt_stack *st = &x->stack;
    d.w13_qweight = st->w13_qweight;
    d.w13_scales = st->w13_scales;
    d.w13_qzeros = st->w13_qzeros;
    d.w13_g_idx = st->w13_g_idx;
    d.w2_qweight = st->w2_qweight;
    d.w2_scales = st->w2_scales;
    d.w2_qzeros = st->w2_qzeros;
    d.w2_g_idx = st->w2_g_idx;
    mi4_struct_write(desc, &d, sizeof d);
    return MOEINT4_SUCCESS;
}
