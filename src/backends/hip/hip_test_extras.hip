/* Extras for the tests, looked up through the plugin table's
 * get_proc_address; built only with MOEINT4_HIP_TEST_EXTRAS (test builds).
 * They run in the plugin's own runtime instance, so a test needs no HIP or
 * CUDA toolchain of its own:
 *   hip_download_weights(ctx, weights, w13, w2): prepared bf16 weights to host
 *     (int4 weights: expanded to bf16 as the matrix-core tiles read them)
 *   hip_test_stream_create(&stream) / hip_test_stream_destroy(stream)
 *   hip_test_stream_synchronize(stream)
 *   hip_test_capture_begin(stream), hip_test_capture_end(stream, &graph):
 *     stream capture (global mode: any unsafe call during the capture fails
 *     it) and instantiation
 *   hip_test_graph_launch(graph, stream) / hip_test_graph_destroy(graph)
 *   hip_test_wgmma_built(): 1 when this build has the sm_90a wgmma tiles
 *   hip_test_int4_routed_fits(hidden, intermediate): 1 when the routed decode
 *     GEMVs (tile "d8") of such a layer fit the current device
 * The stream and graph calls return 0 on success, else the runtime's error
 * code; hip_download_weights returns a moeint4_status. */
#if defined(MOEINT4_HIP_TEST_EXTRAS)
#include <string.h>

#include "backends/hip/hip_internal.h"

namespace {

moeint4_status hip_download_weights(void *backend_context, const void *backend_weights,
                                    uint16_t *w13, uint16_t *w2)
{
    mi4_hip_context *ctx = (mi4_hip_context *)backend_context;
    const mi4_hip_weights *w = (const mi4_hip_weights *)backend_weights;
    mi4_hip_device_scope scope(ctx->device);
    size_t k = (size_t)w->hidden_size, n = (size_t)w->intermediate_size;
    size_t bytes = (size_t)w->num_local_experts * 2 * n * k * 2;
    hipError_t e = hipSuccess;
    /* int4 weights: their expansion to bf16 (what the matrix-core tiles read) */
    mi4_hip_weights view = *w;
    void *scratch = nullptr;
    if (w->int4) {
        e = hipMalloc(&scratch, mi4_hip_int4_expand_bytes(w, MI4_TILE_256));
        if (e == hipSuccess)
            e = mi4_hip_int4_expand(w, scratch, (hipStream_t)0, &view);
        if (e == hipSuccess)
            e = hipStreamSynchronize(0);
    }
    if (e == hipSuccess && w13)
        e = hipMemcpy(w13, view.w13, bytes, hipMemcpyDeviceToHost);
    if (e == hipSuccess && w2)
        e = hipMemcpy(w2, view.w2, bytes / 2, hipMemcpyDeviceToHost);
    (void)hipFree(scratch);
    return e == hipSuccess ? MOEINT4_SUCCESS : MOEINT4_DEVICE_ERROR;
}

/* A blocking stream: the public memory helpers' copies (legacy default
 * stream) stay ordered with it. */
int stream_create(void **stream)
{
    return (int)hipStreamCreateWithFlags((hipStream_t *)stream, 0);
}

int stream_destroy(void *stream) { return (int)hipStreamDestroy((hipStream_t)stream); }

int stream_synchronize(void *stream) { return (int)hipStreamSynchronize((hipStream_t)stream); }

int capture_begin(void *stream)
{
    return (int)hipStreamBeginCapture((hipStream_t)stream, hipStreamCaptureModeGlobal);
}

int capture_end(void *stream, void **graph_exec)
{
    hipGraph_t graph = nullptr;
    hipError_t e = hipStreamEndCapture((hipStream_t)stream, &graph);
    if (e != hipSuccess)
        return (int)e;
    e = hipGraphInstantiateWithFlags((hipGraphExec_t *)graph_exec, graph, 0);
    (void)hipGraphDestroy(graph);
    return (int)e;
}

int graph_launch(void *graph_exec, void *stream)
{
    return (int)hipGraphLaunch((hipGraphExec_t)graph_exec, (hipStream_t)stream);
}

int graph_destroy(void *graph_exec) { return (int)hipGraphExecDestroy((hipGraphExec_t)graph_exec); }

int wgmma_built(void) { return mi4_hip_wgmma_built(); }

int routed_fits(int hidden, int intermediate)
{
    return mi4_hip_int4_routed_fits(hidden, intermediate);
}

} // namespace

void *mi4_hip_test_extra(const char *name)
{
    static const struct {
        const char *name;
        void *fn;
    } extras[] = {
        {"hip_download_weights", (void *)hip_download_weights},
        {"hip_test_stream_create", (void *)stream_create},
        {"hip_test_stream_destroy", (void *)stream_destroy},
        {"hip_test_stream_synchronize", (void *)stream_synchronize},
        {"hip_test_capture_begin", (void *)capture_begin},
        {"hip_test_capture_end", (void *)capture_end},
        {"hip_test_graph_launch", (void *)graph_launch},
        {"hip_test_graph_destroy", (void *)graph_destroy},
        {"hip_test_wgmma_built", (void *)wgmma_built},
        {"hip_test_int4_routed_fits", (void *)routed_fits},
    };
    for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++)
        if (strcmp(name, extras[i].name) == 0)
            return extras[i].fn;
    return nullptr;
}
#endif
