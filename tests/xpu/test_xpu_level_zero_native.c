/* A Level Zero "framework" hands the backend its own context, device and
 * immediate command list, and its own USM allocations (tensors at offsets
 * inside them): forward() must use them in place, match a run on the
 * backend's own handles bit for bit, and leave the framework's handles alive.
 * Runs on the stand-in loader (fake_ze_loader.c); fails without a device. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <level_zero/ze_api.h>

#include "moeint4.h"
#include "testkit.h"

enum { E = 8, K = 128, N = 64, GROUP = 64, M = 9, TOPK = 3 };

typedef struct framework {
    ze_driver_handle_t driver;
    ze_device_handle_t device;
    ze_context_handle_t context;
    ze_command_list_handle_t list;
} framework;

static void framework_open(framework *f)
{
    uint32_t count = 1;
    ze_context_desc_t context_desc = { ZE_STRUCTURE_TYPE_CONTEXT_DESC, NULL, 0 };
    ze_command_queue_desc_t queue_desc;
    memset(&queue_desc, 0, sizeof queue_desc);
    queue_desc.stype = ZE_STRUCTURE_TYPE_COMMAND_QUEUE_DESC;
    assert_int_equal(zeInit(ZE_INIT_FLAG_GPU_ONLY), ZE_RESULT_SUCCESS);
    assert_int_equal(zeDriverGet(&count, &f->driver), ZE_RESULT_SUCCESS);
    count = 1;
    assert_int_equal(zeDeviceGet(f->driver, &count, &f->device), ZE_RESULT_SUCCESS);
    assert_int_equal(zeContextCreate(f->driver, &context_desc, &f->context), ZE_RESULT_SUCCESS);
    assert_int_equal(zeCommandListCreateImmediate(f->context, f->device, &queue_desc, &f->list),
                     ZE_RESULT_SUCCESS);
}

static uint8_t *framework_alloc(const framework *f, size_t bytes)
{
    ze_device_mem_alloc_desc_t desc;
    memset(&desc, 0, sizeof desc);
    desc.stype = ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC;
    void *ptr = NULL;
    assert_int_equal(zeMemAllocDevice(f->context, &desc, bytes, 64, f->device, &ptr),
                     ZE_RESULT_SUCCESS);
    return ptr;
}

typedef struct inputs {
    tk_layer layer;
    uint16_t hidden[M * K];
    int32_t ids[M * TOPK];
    float weights[M * TOPK];
} inputs;

/* One forward on `ctx` with tensors at the given byte offsets inside device
 * blocks from `alloc_block` (NULL: moeint4_memory_alloc). Returns the output. */
static uint16_t *forward_on(moeint4_context *ctx, const framework *f, const inputs *in,
                            void *stream)
{
    moeint4_weights_desc desc = tk_layer_desc(&in->layer);
    moeint4_weights *weights = NULL;
    if (moeint4_weights_prepare(ctx, &desc, &weights) != MOEINT4_SUCCESS)
        fail_msg("prepare: %s", moeint4_last_error());
    size_t out_bytes = sizeof in->hidden, offset = f ? 192 : 0;
    uint8_t *blocks[4];
    size_t sizes[4] = { sizeof in->hidden, sizeof in->ids, sizeof in->weights, out_bytes };
    const void *host[4] = { in->hidden, in->ids, in->weights, NULL };
    uint8_t *poison = malloc(out_bytes);
    memset(poison, 0xff, out_bytes);
    host[3] = poison;
    for (int i = 0; i < 4; ++i) {
        if (f)
            blocks[i] = framework_alloc(f, sizes[i] + offset);
        else
            assert_int_equal(moeint4_memory_alloc(ctx, sizes[i], (void **)&blocks[i]),
                             MOEINT4_SUCCESS);
        assert_int_equal(moeint4_memory_copy(ctx, blocks[i] + offset, host[i], sizes[i],
                                             MOEINT4_COPY_HOST_TO_DEVICE),
                         MOEINT4_SUCCESS);
    }
    moeint4_forward_args args = { 0 };
    args.struct_size = sizeof args;
    args.dtype = MOEINT4_DTYPE_BF16;
    args.num_tokens = M;
    args.topk = TOPK;
    args.hidden_states = blocks[0] + offset;
    args.topk_ids = (const int32_t *)(blocks[1] + offset);
    args.topk_weights = (const float *)(blocks[2] + offset);
    args.output = blocks[3] + offset;
    args.activation = MOEINT4_ACTIVATION_GELU;
    args.stream = stream;
    if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS)
        fail_msg("forward: %s", moeint4_last_error());
    uint16_t *out = malloc(out_bytes);
    assert_int_equal(
        moeint4_memory_copy(ctx, out, blocks[3] + offset, out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    for (int i = 0; i < 4; ++i) {
        if (f)
            assert_int_equal(zeMemFree(f->context, blocks[i]), ZE_RESULT_SUCCESS);
        else
            moeint4_memory_free(ctx, blocks[i]);
    }
    free(poison);
    moeint4_weights_release(weights);
    return out;
}

extern int fake_native_modules_refused; /* fake_ze_loader.c */

static void test_framework_handles_and_memory_used_in_place(void **state)
{
    (void)state;
    unsetenv("MOEINT4_XPU_TEST_CPU_DEVICE"); /* Level Zero only */
    inputs *in = calloc(1, sizeof *in);
    tk_rng rng;
    tk_rng_seed(&rng, 9);
    assert_int_equal(tk_layer_random(&in->layer, MOEINT4_FORMAT_GPTQ_SYM, 0, E, K, N, GROUP,
                                     MOEINT4_DTYPE_F16, 1, &rng),
                     0);
    tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, M * K, 1.0, in->hidden);
    tk_route_random(&rng, M, E, TOPK, in->ids, in->weights);

    moeint4_context_options options = { 0 };
    options.struct_size = sizeof options;
    options.backend = MOEINT4_BACKEND_XPU;
    moeint4_context *own = NULL;
    if (moeint4_context_create(&options, &own) != MOEINT4_SUCCESS)
        fail_msg("xpu over Level Zero: %s", moeint4_last_error());
    uint16_t *expected = forward_on(own, NULL, in, NULL);
    /* every embedded ocloc binary was offered natively, refused, then the
     * SPIR-V built: the fallback a non-matching Intel device takes */
    assert_int_equal(fake_native_modules_refused, MOEINT4_XPU_AOT_TARGET_COUNT);
    moeint4_context_destroy(own);

    framework f;
    framework_open(&f);
    options.native_context = f.context;
    options.native_device = f.device;
    options.native_queue = f.list;
    moeint4_context *ctx = NULL;
    assert_int_equal(moeint4_context_create(&options, &ctx), MOEINT4_SUCCESS);
    uint16_t *got = forward_on(ctx, &f, in, f.list);
    assert_memory_equal(got, expected, sizeof in->hidden);

    double want[M * K];
    tk_activation act = { MOEINT4_ACTIVATION_GELU, 0, 0, 0, 0 };
    tk_reference_moe(&in->layer, MOEINT4_DTYPE_BF16, in->hidden, M, TOPK, in->ids, in->weights,
                     &act, NULL, M, want);
    double err = tk_relative_l2(MOEINT4_DTYPE_BF16, got, want, M * K);
    print_message("relative L2 vs reference (bf16 output): %.3g\n", err);
    assert_true(err < 1e-2);

    /* the framework's list and context outlive the backend's context */
    moeint4_context_destroy(ctx);
    assert_int_equal(zeCommandListAppendBarrier(f.list, NULL, 0, NULL), ZE_RESULT_SUCCESS);
    assert_int_equal(zeCommandListDestroy(f.list), ZE_RESULT_SUCCESS);
    assert_int_equal(zeContextDestroy(f.context), ZE_RESULT_SUCCESS);
    free(expected), free(got);
    tk_layer_free(&in->layer);
    free(in);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framework_handles_and_memory_used_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
