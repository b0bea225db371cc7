/* The public moeint4_checkpoint_* calls: argument checks, struct_size
 * rules, then src/checkpoint/. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/struct_size.h"
#include "checkpoint/checkpoint.h"

MOEINT4_API moeint4_status moeint4_checkpoint_open(const char *path,
                                                   const moeint4_checkpoint_options *options,
                                                   moeint4_checkpoint **checkpoint)
{
    mi4_clear_error();
    if (!path)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "path is NULL");
    if (!checkpoint)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "checkpoint is NULL");
    moeint4_checkpoint_options normalized = { 0 };
    if (options) {
        moeint4_status s = MI4_STRUCT_READ(normalized, options, MOEINT4_CHECKPOINT_OPTIONS_MIN_SIZE,
                                           "options", "moeint4_checkpoint_options");
        if (s != MOEINT4_SUCCESS)
            return s;
    }
    normalized.struct_size = sizeof normalized;
    return mi4_ckpt_open(path, &normalized, checkpoint);
}

MOEINT4_API void moeint4_checkpoint_close(moeint4_checkpoint *checkpoint)
{
    mi4_clear_error();
    mi4_ckpt_close(checkpoint);
}

MOEINT4_API moeint4_status moeint4_checkpoint_query(const moeint4_checkpoint *checkpoint,
                                                    moeint4_checkpoint_info *info)
{
    mi4_clear_error();
    if (!checkpoint || !info)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL", checkpoint ? "info" : "checkpoint");
    moeint4_status s = mi4_struct_check_output(info, MOEINT4_CHECKPOINT_INFO_MIN_SIZE, "info",
                                               "moeint4_checkpoint_info");
    if (s != MOEINT4_SUCCESS)
        return s;
    const moeint4_checkpoint *ck = checkpoint;
    moeint4_checkpoint_info out;
    memset(&out, 0, sizeof out);
    snprintf(out.model_type, sizeof out.model_type, "%s", ck->model.model_type);
    snprintf(out.architecture, sizeof out.architecture, "%s", ck->model.architecture);
    snprintf(out.quant_method, sizeof out.quant_method, "%s", ck->quant.method);
    snprintf(out.quant_source, sizeof out.quant_source, "%s", ck->quant.source);
    out.num_hidden_layers = ck->model.num_hidden_layers;
    out.num_moe_layers = ck->num_layers;
    out.num_files = ck->num_files;
    out.num_tensors = ck->num_refs;
    out.file_bytes = ck->file_bytes;
    pthread_mutex_lock((pthread_mutex_t *)&ck->warnings_lock);
    out.num_warnings = ck->num_warnings;
    pthread_mutex_unlock((pthread_mutex_t *)&ck->warnings_lock);
    mi4_struct_write(info, &out, sizeof out);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_checkpoint_layers(const moeint4_checkpoint *checkpoint,
                                                     int *layers, int capacity, int *count)
{
    mi4_clear_error();
    if (!checkpoint || !count)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL",
                        checkpoint ? "count" : "checkpoint");
    if (capacity < 0 || (capacity > 0 && !layers))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "layers is NULL or capacity = %d is negative",
                        capacity);
    for (int i = 0; i < checkpoint->num_layers && i < capacity; i++)
        layers[i] = checkpoint->layers[i].layer;
    *count = checkpoint->num_layers;
    return MOEINT4_SUCCESS;
}

static moeint4_status find_layer(const moeint4_checkpoint *ck, int layer,
                                 const mi4_ckpt_layer **out)
{
    *out = mi4_ckpt_layer_find(ck, layer);
    if (*out)
        return MOEINT4_SUCCESS;
    char list[256] = "";
    size_t used = 0;
    for (int i = 0; i < ck->num_layers && used + 16 < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, i ? ", %d" : "%d",
                                 ck->layers[i].layer);
    return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                    "layer %d is not a MoE layer of this checkpoint "
                    "(MoE layers: %s)",
                    layer, list);
}

MOEINT4_API moeint4_status moeint4_checkpoint_layer_query(const moeint4_checkpoint *checkpoint,
                                                          int layer,
                                                          moeint4_checkpoint_layer_info *info)
{
    mi4_clear_error();
    if (!checkpoint || !info)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL", checkpoint ? "info" : "checkpoint");
    moeint4_status s = mi4_struct_check_output(info, MOEINT4_CHECKPOINT_LAYER_INFO_MIN_SIZE, "info",
                                               "moeint4_checkpoint_layer_info");
    const mi4_ckpt_layer *l = NULL;
    if (s == MOEINT4_SUCCESS)
        s = find_layer(checkpoint, layer, &l);
    if (s != MOEINT4_SUCCESS)
        return s;
    const moeint4_checkpoint *ck = checkpoint;
    moeint4_checkpoint_layer_info out;
    memset(&out, 0, sizeof out);
    out.layer = l->layer;
    out.num_experts = l->routed.num_experts;
    out.hidden_size = l->routed.hidden_size;
    out.intermediate_size = l->routed.intermediate_size;
    out.top_k = ck->model.top_k;
    out.format = ck->format;
    out.zeros = ck->zeros;
    out.zero_offset = ck->zero_offset;
    out.group_size = l->routed.group_size;
    out.act_order = l->routed.act_order;
    out.fused_experts = l->routed.fused;
    out.scales_dtype =
        l->routed.scales_dtype == MI4_ST_BF16 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16;
    if (l->has_shared) {
        out.shared_experts = ck->model.shared_count > 0 ? ck->model.shared_count : 1;
        out.shared_intermediate_size = l->shared.intermediate_size;
        out.shared_quantized = l->shared_quantized;
        snprintf(out.shared_prefix, sizeof out.shared_prefix, "%s", l->shared_prefix);
    }
    if (l->shared_gate)
        snprintf(out.shared_gate_name, sizeof out.shared_gate_name, "%s",
                 l->shared_gate->tensor->name);
    snprintf(out.router_name, sizeof out.router_name, "%s", l->router->tensor->name);
    snprintf(out.router_dtype, sizeof out.router_dtype, "%s",
             mi4_st_dtype_name(l->router->tensor->dtype));
    out.expert_bytes = l->routed.stored_bytes;
    mi4_struct_write(info, &out, sizeof out);
    return MOEINT4_SUCCESS;
}

static moeint4_status desc_common(moeint4_checkpoint *checkpoint, moeint4_weights_desc *desc,
                                  int layer, mi4_ckpt_layer **out)
{
    *out = NULL;
    if (!checkpoint || !desc)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL", checkpoint ? "desc" : "checkpoint");
    moeint4_status s = mi4_struct_check_output(desc, MOEINT4_WEIGHTS_DESC_MIN_SIZE, "desc",
                                               "moeint4_weights_desc");
    const mi4_ckpt_layer *l = NULL;
    if (s == MOEINT4_SUCCESS)
        s = find_layer(checkpoint, layer, &l);
    *out = (mi4_ckpt_layer *)l;
    return s;
}

MOEINT4_API moeint4_status moeint4_checkpoint_layer_desc(moeint4_checkpoint *checkpoint, int layer,
                                                         moeint4_weights_desc *desc)
{
    mi4_clear_error();
    mi4_ckpt_layer *l = NULL;
    moeint4_status s = desc_common(checkpoint, desc, layer, &l);
    if (s == MOEINT4_SUCCESS)
        s = mi4_ckpt_experts_desc(checkpoint, &l->routed, &l->desc_given, desc);
    return s;
}

MOEINT4_API moeint4_status moeint4_checkpoint_shared_desc(moeint4_checkpoint *checkpoint, int layer,
                                                          moeint4_weights_desc *desc)
{
    mi4_clear_error();
    mi4_ckpt_layer *l = NULL;
    moeint4_status s = desc_common(checkpoint, desc, layer, &l);
    if (s != MOEINT4_SUCCESS)
        return s;
    if (!l->has_shared)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "layer %d has no shared expert", layer);
    if (!l->shared_quantized)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "layer %d's shared expert (%s) is stored dense: read its .weight tensors "
                        "with moeint4_checkpoint_tensor",
                        layer, l->shared_prefix);
    return mi4_ckpt_experts_desc(checkpoint, &l->shared, NULL, desc);
}

MOEINT4_API moeint4_status moeint4_checkpoint_release_layer(moeint4_checkpoint *checkpoint,
                                                            int layer)
{
    mi4_clear_error();
    if (!checkpoint)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "checkpoint is NULL");
    const mi4_ckpt_layer *found;
    moeint4_status s = find_layer(checkpoint, layer, &found);
    if (s != MOEINT4_SUCCESS)
        return s;
    mi4_ckpt_layer *l = (mi4_ckpt_layer *)found;
    pthread_mutex_lock(&checkpoint->lock);
    if (!l->preparing) /* else the last prepare in flight frees it */
        mi4_ckpt_stack_release(&l->routed.stack);
    mi4_ckpt_stack_release(&l->shared.stack);
    l->desc_given = 0;
    pthread_mutex_unlock(&checkpoint->lock);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_checkpoint_prepare(moeint4_context *ctx,
                                                      moeint4_checkpoint *checkpoint, int layer,
                                                      moeint4_weights **weights)
{
    mi4_clear_error();
    if (!ctx || !weights)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL", ctx ? "weights" : "ctx");
    moeint4_weights_desc desc = { .struct_size = sizeof desc };
    mi4_ckpt_layer *l = NULL;
    moeint4_status s = desc_common(checkpoint, &desc, layer, &l);
    if (s != MOEINT4_SUCCESS)
        return s;
    s = mi4_ckpt_experts_desc(checkpoint, &l->routed, &l->preparing, &desc);
    if (s != MOEINT4_SUCCESS)
        return s;
    s = moeint4_weights_prepare(ctx, &desc, weights);
    /* the arrays go again with the last prepare, unless a desc holds them */
    pthread_mutex_lock(&checkpoint->lock);
    if (--l->preparing == 0 && !l->desc_given)
        mi4_ckpt_stack_release(&l->routed.stack);
    pthread_mutex_unlock(&checkpoint->lock);
    return s;
}

static void fill_view(const mi4_ckpt_ref *r, moeint4_tensor_view *view)
{
    moeint4_tensor_view out;
    memset(&out, 0, sizeof out);
    out.name = r->tensor->name;
    out.file = r->file->label;
    snprintf(out.dtype, sizeof out.dtype, "%s", mi4_st_dtype_name(r->tensor->dtype));
    out.ndim = r->tensor->ndim;
    memcpy(out.shape, r->tensor->shape, sizeof out.shape);
    out.data = r->tensor->data;
    out.bytes = r->tensor->bytes;
    mi4_struct_write(view, &out, sizeof out);
}

MOEINT4_API moeint4_status moeint4_checkpoint_tensor(const moeint4_checkpoint *checkpoint,
                                                     const char *name, moeint4_tensor_view *view)
{
    mi4_clear_error();
    if (!checkpoint || !name || !view)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL",
                        !checkpoint ? "checkpoint"
                        : !name     ? "name"
                                    : "view");
    moeint4_status s =
        mi4_struct_check_output(view, MOEINT4_TENSOR_VIEW_MIN_SIZE, "view", "moeint4_tensor_view");
    if (s != MOEINT4_SUCCESS)
        return s;
    const mi4_ckpt_ref *r = mi4_ckpt_find(checkpoint, name);
    if (!r)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "tensor \"%s\" is not in the checkpoint", name);
    fill_view(r, view);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_checkpoint_tensor_at(const moeint4_checkpoint *checkpoint,
                                                        size_t index, moeint4_tensor_view *view)
{
    mi4_clear_error();
    if (!checkpoint || !view)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s is NULL", checkpoint ? "view" : "checkpoint");
    moeint4_status s =
        mi4_struct_check_output(view, MOEINT4_TENSOR_VIEW_MIN_SIZE, "view", "moeint4_tensor_view");
    if (s != MOEINT4_SUCCESS)
        return s;
    if (index >= checkpoint->num_refs)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "index %zu is outside [0, %zu)", index,
                        checkpoint->num_refs);
    fill_view(&checkpoint->refs[index], view);
    return MOEINT4_SUCCESS;
}

MOEINT4_API moeint4_status moeint4_checkpoint_warnings(const moeint4_checkpoint *checkpoint,
                                                       char *buffer, size_t capacity,
                                                       size_t *length)
{
    mi4_clear_error();
    if (!checkpoint)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "checkpoint is NULL");
    if (capacity > 0 && !buffer)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "buffer is NULL with capacity %zu", capacity);
    pthread_mutex_t *lock = (pthread_mutex_t *)&checkpoint->warnings_lock;
    pthread_mutex_lock(lock);
    size_t n = checkpoint->warnings_length;
    if (capacity > 0) {
        size_t copy = n < capacity - 1 ? n : capacity - 1;
        if (copy)
            memcpy(buffer, checkpoint->warnings, copy);
        buffer[copy] = '\0';
    }
    pthread_mutex_unlock(lock);
    if (length)
        *length = n;
    return MOEINT4_SUCCESS;
}
