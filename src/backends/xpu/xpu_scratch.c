/* The context's reserved device buffers (see mi4_xpu_scratch). */
#include "xpu_backend.h"

static size_t aligned(size_t bytes)
{
    return (bytes + MI4_XPU_ALIGN - 1) / MI4_XPU_ALIGN * MI4_XPU_ALIGN;
}

/* The next buffer of `bytes` at offset *at of base (NULL without base);
 * moves *at past it, aligned. */
static void *take(uint8_t *base, size_t *at, size_t bytes)
{
    void *part = base ? base + *at : NULL;
    *at += aligned(bytes);
    return part;
}

size_t mi4_xpu_chunk_scratch(const mi4_xpu_weights *w, int64_t tokens, int topk, void *base,
                             mi4_xpu_chunk_buffers *buf)
{
    mi4_xpu_chunk_buffers unused;
    size_t slots = (size_t)tokens * (size_t)topk, at = 0;
    if (!buf)
        buf = &unused;
    buf->route = take(base, &at, (4 * (size_t)w->num_local + 2) * sizeof(int32_t));
    buf->slot_expert = take(base, &at, slots * sizeof(int32_t));
    buf->sorted = take(base, &at, slots * sizeof(int32_t));
    buf->act = take(base, &at, slots * (size_t)w->intermediate * sizeof(float));
    buf->slot_out = take(base, &at, slots * (size_t)w->hidden * sizeof(float));
    buf->gathered =
        w->input_perm ? take(base, &at, slots * (size_t)w->hidden * sizeof(float)) : NULL;
    return at;
}

moeint4_status mi4_xpu_reserve(mi4_xpu_context *ctx, void **buffer, size_t *have, size_t bytes,
                               void *queue, char *err, size_t cap)
{
    if (*have >= bytes)
        return MOEINT4_SUCCESS;
    mi4_xpu_runtime *rt = ctx->rt;
    if (*buffer) { /* earlier forwards may still run on it */
        moeint4_status st = rt->ops->wait(rt, queue, err, cap);
        if (st != MOEINT4_SUCCESS)
            return st;
        rt->ops->free(rt, *buffer);
        *buffer = NULL;
        *have = 0;
    }
    moeint4_status st = rt->ops->alloc(rt, aligned(bytes), buffer, err, cap);
    if (st == MOEINT4_SUCCESS)
        *have = aligned(bytes);
    return st;
}

void mi4_xpu_scratch_free(mi4_xpu_context *ctx)
{
    mi4_xpu_scratch *s = &ctx->scratch;
    ctx->rt->ops->free(ctx->rt, s->chunk);
    ctx->rt->ops->free(ctx->rt, s->staging);
    for (int i = 0; i < MI4_XPU_DNNL_BUFFERS; ++i)
        ctx->rt->ops->free(ctx->rt, s->dnnl[i]);
}
