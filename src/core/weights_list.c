/* The prepared weights handles a context still owns: linked on prepare,
 * unlinked on release, all released by moeint4_context_destroy. */
#include "core/weights_list.h"

#include "base/alloc.h"

void mi4_weights_link(moeint4_context *ctx, moeint4_weights *weights)
{
    pthread_mutex_lock(&ctx->lock);
    weights->prev = NULL;
    weights->next = ctx->live_weights;
    if (ctx->live_weights)
        ctx->live_weights->prev = weights;
    ctx->live_weights = weights;
    pthread_mutex_unlock(&ctx->lock);
}

static void unlink_weights(moeint4_context *ctx, moeint4_weights *weights)
{
    pthread_mutex_lock(&ctx->lock);
    if (weights->prev)
        weights->prev->next = weights->next;
    else
        ctx->live_weights = weights->next;
    if (weights->next)
        weights->next->prev = weights->prev;
    pthread_mutex_unlock(&ctx->lock);
}

void mi4_weights_destroy(moeint4_weights *weights)
{
    unlink_weights(weights->ctx, weights);
    const moeint4_backend_iface *iface = &weights->backend->iface;
    if (iface->release)
        iface->release(weights->backend_context, weights->backend_weights);
    mi4_free(weights);
}
