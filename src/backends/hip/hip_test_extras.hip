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
 *   hip_test_direct_serves(tokens, slots, experts, hidden, intermediate, int4,
 *     routed_measured): mi4_hip_direct_decode_serves for a layer of those sizes
 *     (host code only: runs without a GPU)
 *   hip_test_int4_gemm_tile(rows_per_expert, routed, ws_prefill): the name
 *     of mi4_hip_int4_gemm_tile's tile, NULL for none (host code only)
 *   hip_test_rounded_pairs(scales_bf16, &mismatches): the rounded A fragments
 *     of the int4 wgmma tiles (q_dequant<true>: two bf16x2 FMAs a pair)
 *     against int4_word_to_bf16 (the BF16 mode's bits) for every positive
 *     finite scale of that dtype, zero point 0..16 and code; -1 when this
 *     build has no wgmma tiles
 * The stream and graph calls return 0 on success, else the runtime's error
 * code; hip_download_weights returns a moeint4_status. */
#if defined(MOEINT4_HIP_TEST_EXTRAS)
#include <string.h>

#include "backends/hip/hip_int4_wgmma_ops.h"
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

/* One thread a scale's bits: every zero point 0..16 and code, each pair of
 * q_dequant<true> against the two bf16 int4_word_to_bf16 writes for it. */
__global__ void rounded_pairs_kernel(int scales_bf16, unsigned *mismatches)
{
#if defined(MI4_HAVE_WGMMA)
    using namespace mi4_gemm;
    const uint32_t bits = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t exponent = scales_bf16 ? 0x7f80u : 0x7c00u;
    if (bits > 0xffffu || (bits & 0x8000u) || bits == 0 || (bits & exponent) == exponent)
        return; /* prepare takes positive finite scales only */
    const float scale = mi4_dev_scale_to_f32((uint16_t)bits, scales_bf16);
    const q_split_scale split = q_split(scale);
    unsigned bad = 0;
    for (int zero = 0; zero <= 16; zero++)
        for (int half = 0; half < 2; half++) {
            const uint32_t word = half ? 0xfedcba98u : 0x76543210u; /* code j at bits 4j */
            const uint4 want = int4_word_to_bf16(word, zero, scale);
            const uint32_t element[4] = { want.x, want.y, want.z, want.w };
            for (int j = 0; j < 4; j++) { /* codes j and j + 4 */
                const uint32_t got = q_dequant<true>(word, 4 * j, int4_bias_pair(zero), split);
                const uint32_t lo = element[j / 2] >> (16 * (j % 2)) & 0xffffu;
                const uint32_t hi = element[(j + 4) / 2] >> (16 * (j % 2)) & 0xffffu;
                bad += got != (lo | hi << 16);
            }
        }
    if (bad)
        atomicAdd(mismatches, bad);
#else
    (void)scales_bf16;
    (void)mismatches;
#endif
}

int rounded_pairs(int scales_bf16, unsigned *mismatches)
{
    if (!mi4_hip_wgmma_built())
        return -1;
    unsigned *count = nullptr;
    hipError_t e = hipMalloc((void **)&count, sizeof *count);
    if (e == hipSuccess)
        e = hipMemset(count, 0, sizeof *count);
    if (e == hipSuccess)
        e = mi4_launch(rounded_pairs_kernel, dim3(256), dim3(256), 0, (hipStream_t)0, scales_bf16,
                       count);
    if (e == hipSuccess)
        e = hipMemcpy(mismatches, count, sizeof *count, hipMemcpyDeviceToHost);
    (void)hipFree(count);
    return (int)e;
}

int routed_fits(int hidden, int intermediate)
{
    return mi4_hip_int4_routed_fits(hidden, intermediate);
}

int direct_serves(int64_t tokens, int64_t slots, int experts, int hidden, int intermediate,
                  int int4, int routed_measured)
{
    mi4_hip_weights w;
    memset(&w, 0, sizeof w);
    w.num_experts = w.num_local_experts = experts;
    w.hidden_size = hidden;
    w.intermediate_size = intermediate;
    w.int4 = int4;
    return mi4_hip_direct_decode_serves(tokens, slots, &w, routed_measured);
}

const char *int4_gemm_tile(int64_t rows_per_expert, int routed, int ws_prefill)
{
    const int tile = mi4_hip_int4_gemm_tile(rows_per_expert, routed, ws_prefill);
    return tile < 0 ? nullptr : mi4_hip_tile_name((mi4_hip_tile_config)tile);
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
        {"hip_test_direct_serves", (void *)direct_serves},
        {"hip_test_int4_gemm_tile", (void *)int4_gemm_tile},
        {"hip_test_rounded_pairs", (void *)rounded_pairs},
    };
    for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++)
        if (strcmp(name, extras[i].name) == 0)
            return extras[i].fn;
    return nullptr;
}
#endif
