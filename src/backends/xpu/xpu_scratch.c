/* The context's reserved device buffers (see mi4_xpu_scratch). */
#include "xpu_backend.h"

#define ALIGN 256

static size_t aligned(size_t bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

size_t mi4_xpu_chunk_scratch_bytes(const mi4_xpu_weights *w, int64_t tokens, int topk)
{
    size_t slots = (size_t)tokens * (size_t)topk;
    size_t route = (4 * (size_t)w->num_local + 2) * sizeof(int32_t);
    return aligned(route) + 2 * aligned(slots * sizeof(int32_t)) +
           aligned(slots * (size_t)w->intermediate * sizeof(float)) +
           aligned(slots * (size_t)w->hidden * sizeof(float));
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
    for (int i = 0; i < 6; ++i)
        ctx->rt->ops->free(ctx->rt, s->dnnl[i]);
}
