/* The HIP backend out of device memory: a prepare far larger than
 * the device, one whose w13 fits but whose w2 does not, a prepare and a
 * forward on a device filled up with moeint4_memory_alloc. Each fails with
 * OUT_OF_MEMORY naming the device allocation, reads no host weight array,
 * leaves its outputs untouched and leaks nothing; the same context then
 * prepares and runs a layer that matches the double reference. Also the
 * device bytes moeint4_weights_memory reports (bf16: 4x the int4 bytes;
 * int4: the codes, scales and zero points). Runs in the weights mode
 * MOEINT4_HIP_WEIGHTS names (ctest runs it in both).
 * Exits 77 (ctest: skipped) when the plugin or a GPU is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "tk_cmocka.h"

#include "hip_test_util.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
/* Device filling stops here: a device of more than 200 GiB skips the cases. */
#define FILL_MAX_GIB_BLOCKS 200
#define FILL_MAX_BLOCKS 512

/* ---- host and device memory at hand ---- */

/* MemAvailable (free + reclaimable cache), else the free pages. */
static size_t host_available_bytes(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    if (kib > 0)
        return (size_t)kib * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* Device blocks taken with moeint4_memory_alloc until the device refused. */
typedef struct device_fill {
    void *block[FILL_MAX_BLOCKS];
    int count;
    size_t bytes;
} device_fill;

static void fill_release(moeint4_context *ctx, device_fill *fill)
{
    for (int i = 0; i < fill->count; i++)
        moeint4_memory_free(ctx, fill->block[i]);
    fill->count = 0;
    fill->bytes = 0;
}

/* Takes 1 GiB blocks until the device says OUT_OF_MEMORY, then blocks of half
 * the size, down to `smallest` (GIB: whole GiB only). Returns 1 when the
 * device ran out, 0 (nothing held) when it is larger than the caps. Any
 * failure other than OUT_OF_MEMORY fails the test, nothing held. */
static int fill_device(moeint4_context *ctx, device_fill *fill, size_t smallest)
{
    memset(fill, 0, sizeof *fill);
    size_t size = GIB;
    int gib_blocks = 0;
    while (size >= smallest) {
        if (fill->count == FILL_MAX_BLOCKS || gib_blocks == FILL_MAX_GIB_BLOCKS) {
            fill_release(ctx, fill);
            return 0;
        }
        void *block = NULL;
        moeint4_status status = moeint4_memory_alloc(ctx, size, &block);
        if (status == MOEINT4_SUCCESS) {
            fill->block[fill->count++] = block;
            fill->bytes += size;
            gib_blocks += size == GIB;
            continue;
        }
        /* a refusal is OUT_OF_MEMORY naming the device allocation */
        if (status != MOEINT4_OUT_OF_MEMORY ||
            strstr(moeint4_last_error(), "device bytes for moeint4_memory_alloc") == NULL) {
            char message[512];
            snprintf(message, sizeof message, "%s", moeint4_last_error());
            fill_release(ctx, fill);
            fail_msg("moeint4_memory_alloc(%zu bytes): %s: %s", size, moeint4_status_string(status),
                     message);
        }
        size /= 2;
    }
    return 1;
}

/* Free device memory in whole GiB, measured by allocating it. */
static size_t device_free_gib(moeint4_context *ctx)
{
    device_fill fill;
    if (!fill_device(ctx, &fill, GIB))
        return SIZE_MAX;
    size_t bytes = fill.bytes;
    fill_release(ctx, &fill);
    return bytes;
}

/* Pages of [data, data + bytes) that were ever mapped in, i.e. read (an
 * untouched anonymous mapping has none; a read maps the zero page). */
static size_t resident_pages(const void *data, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = (bytes + page - 1) / page;
    unsigned char *vector = malloc(pages);
    assert_non_null(vector);
    assert_int_equal(mincore((void *)data, bytes, vector), 0);
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vector[i] & 1u;
    free(vector);
    return resident;
}

/* ---- prepares that must fail ---- */

typedef struct unread_layer {
    int hidden, intermediate, max_experts;
    const int32_t *qweight; /* never-touched mapping, large enough for w13 and w2 */
    size_t qweight_bytes;
    uint16_t *w13_scales, *w2_scales; /* per-channel F16, valid */
} unread_layer;

/* GPTQ_SYM, per-channel scales (G = 1: the smallest scales the formats
 * allow) and a qweight mapping no one has touched. 0 when the mapping is
 * refused (overcommit policy). */
static int unread_layer_make(unread_layer *u, int max_experts, int hidden, int intermediate)
{
    memset(u, 0, sizeof *u);
    u->hidden = hidden;
    u->intermediate = intermediate;
    u->max_experts = max_experts;
    /* w13 GPTQ [E][K/8][2N] int32 is the larger of the two */
    u->qweight_bytes = (size_t)max_experts * (size_t)hidden * (size_t)intermediate;
    void *map =
        mmap(NULL, u->qweight_bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED)
        return 0;
    u->qweight = map;
    size_t w13_count = (size_t)max_experts * 2 * (size_t)intermediate;
    size_t w2_count = (size_t)max_experts * (size_t)hidden;
    u->w13_scales = malloc(w13_count * sizeof(uint16_t));
    u->w2_scales = malloc(w2_count * sizeof(uint16_t));
    assert_non_null(u->w13_scales);
    assert_non_null(u->w2_scales);
    tk_rng rng;
    tk_rng_seed(&rng, 7001);
    for (size_t i = 0; i < w13_count; i++)
        u->w13_scales[i] = tk_f32_to_f16((float)tk_rng_range(&rng, 0.5e-2, 1.5e-2));
    for (size_t i = 0; i < w2_count; i++)
        u->w2_scales[i] = tk_f32_to_f16((float)tk_rng_range(&rng, 0.5e-2, 1.5e-2));
    return 1;
}

static void unread_layer_free(unread_layer *u)
{
    if (u->qweight)
        munmap((void *)u->qweight, u->qweight_bytes);
    free(u->w13_scales);
    free(u->w2_scales);
    memset(u, 0, sizeof *u);
}

static moeint4_weights_desc unread_desc(const unread_layer *u, int experts)
{
    moeint4_weights_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.struct_size = sizeof desc;
    desc.num_experts = experts;
    desc.num_local_experts = experts;
    desc.hidden_size = u->hidden;
    desc.intermediate_size = u->intermediate;
    desc.group_size = -1;
    desc.format = MOEINT4_FORMAT_GPTQ_SYM;
    desc.scales_dtype = MOEINT4_DTYPE_F16;
    desc.w13_qweight = u->qweight;
    desc.w13_scales = u->w13_scales;
    desc.w2_qweight = u->qweight;
    desc.w2_scales = u->w2_scales;
    return desc;
}

/* The prepare fails with OUT_OF_MEMORY, names the device allocation
 * (`allocation`, e.g. "w2 (bf16)") and leaves *weights as it was. */
static void expect_prepare_out_of_memory(moeint4_context *ctx, const moeint4_weights_desc *desc,
                                         const char *allocation)
{
    char marker[16];
    moeint4_weights *const untouched = (moeint4_weights *)(void *)marker;
    moeint4_weights *weights = untouched;
    moeint4_status status = moeint4_weights_prepare(ctx, desc, &weights);
    char message[512];
    snprintf(message, sizeof message, "%s", moeint4_last_error());
    print_message("prepare E=%d K=%d N=%d (%.1f GiB bf16): %s: %s\n", desc->num_local_experts,
                  desc->hidden_size, desc->intermediate_size,
                  (double)desc->num_local_experts * 3 * desc->intermediate_size *
                      desc->hidden_size * 2 / (double)GIB,
                  moeint4_status_string(status), message);
    if (status == MOEINT4_SUCCESS && weights != untouched)
        moeint4_weights_release(weights); /* do not keep the device full */
    assert_int_equal(status, MOEINT4_OUT_OF_MEMORY);
    assert_ptr_equal(weights, untouched);
    assert_non_null(strstr(message, "device bytes for"));
    assert_non_null(strstr(message, allocation));
}

/* 1 unless MOEINT4_HIP_WEIGHTS asks for bf16 (the contexts here use AUTO). */
static int int4_mode(void) { return !hip_test_weights_env_is("bf16"); }

/* ---- 1: larger than the device ---- */

static void test_prepare_larger_than_device(void **state)
{
    (void)state;
    const int int4 = int4_mode();
    const int hidden = 4096, intermediate = 14336, huge_experts = int4 ? 4096 : 1024;
    /* device bytes of one expert's weights: bf16, or int4 codes */
    const size_t per_expert = (size_t)3 * intermediate * hidden * 2 / (int4 ? 4 : 1);
    const size_t w13_per_expert = per_expert / 3 * 2;
    if (host_available_bytes() < 2 * GIB) {
        print_message("skipped: less than 2 GiB of host memory available\n");
        tk_skip("see the \"skipped:\" line above");
    }
    moeint4_context *ctx = hip_test_context("mma");
    size_t free_bytes = device_free_gib(ctx);
    print_message("device: %.0f GiB free (1 GiB blocks)\n", (double)free_bytes / (double)GIB);
    if (free_bytes >= (size_t)huge_experts * per_expert) {
        print_message("skipped: the device holds a %zu-byte layer\n",
                      (size_t)huge_experts * per_expert);
        moeint4_context_destroy(ctx);
        tk_skip("see the \"skipped:\" line above");
    }
    unread_layer u;
    if (!unread_layer_make(&u, huge_experts, hidden, intermediate)) {
        print_message("skipped: no %zu-byte MAP_NORESERVE mapping (vm.overcommit_memory = 2?)\n",
                      (size_t)huge_experts * hidden * intermediate);
        moeint4_context_destroy(ctx);
        tk_skip("see the \"skipped:\" line above");
    }

    /* 336 GiB of bf16 or int4 codes: the first device allocation (w13) fails. */
    moeint4_weights_desc desc = unread_desc(&u, huge_experts);
    expect_prepare_out_of_memory(ctx, &desc, int4 ? "w13 (int4 codes)" : "w13 (bf16)");
    assert_int_equal(resident_pages(u.qweight, u.qweight_bytes), 0);
    size_t after = device_free_gib(ctx);
    assert_true(after >= free_bytes || free_bytes - after <= GIB);

    /* w13 takes ~80% of the device, w2 does not fit: w13 must be given back. */
    if (free_bytes >= 16 * GIB) {
        int experts = (int)(free_bytes / 5 * 4 / w13_per_expert);
        desc = unread_desc(&u, experts);
        expect_prepare_out_of_memory(ctx, &desc, int4 ? "w2 (int4 codes)" : "w2 (bf16)");
        assert_int_equal(resident_pages(u.qweight, u.qweight_bytes), 0);
        after = device_free_gib(ctx);
        print_message("device after: %.0f GiB free\n", (double)after / (double)GIB);
        /* one block of slack for the driver's own bookkeeping; w13 is ~80% */
        assert_true(after >= free_bytes || free_bytes - after <= GIB);
    } else {
        print_message("w13-fits case left out: only %zu bytes free\n", free_bytes);
    }
    unread_layer_free(&u);

    /* The same context still prepares and runs a layer. */
    tk_layer layer;
    moeint4_weights *w =
        hip_test_prepare(ctx, &layer, MOEINT4_FORMAT_GPTQ_ASYM, 16, 256, 128, 64, 0, 7011);
    hip_test_case c;
    memset(&c, 0, sizeof c);
    c.dtype = MOEINT4_DTYPE_BF16;
    c.num_tokens = 37;
    c.topk = 4;
    c.activation = MOEINT4_ACTIVATION_SILU;
    c.seed = 7012;
    assert_true(hip_test_error(ctx, w, &layer, &c) <= HIP_TOLERANCE);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
}

/* ---- 2: a device filled up ---- */

/* A batch on the device, uploaded before the device is filled up. */
typedef struct device_batch {
    int64_t num_tokens;
    int topk;
    size_t out_bytes;
    uint16_t *hidden; /* host bf16 [M][K] */
    int32_t *ids;
    float *router;
    void *d_hidden, *d_ids, *d_router, *d_out;
} device_batch;

static void batch_make(moeint4_context *ctx, device_batch *b, const tk_layer *layer,
                       int64_t num_tokens, int topk, const void *poison, uint64_t seed)
{
    size_t count = (size_t)num_tokens * (size_t)layer->hidden_size;
    size_t slots = (size_t)num_tokens * (size_t)topk;
    b->num_tokens = num_tokens;
    b->topk = topk;
    b->out_bytes = count * sizeof(uint16_t);
    b->hidden = malloc(count * sizeof *b->hidden);
    b->ids = malloc(slots * sizeof *b->ids);
    b->router = malloc(slots * sizeof *b->router);
    assert_non_null(b->hidden);
    assert_non_null(b->ids);
    assert_non_null(b->router);
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    tk_fill_activations(&rng, MOEINT4_DTYPE_BF16, count, 1.0, b->hidden);
    tk_route_random(&rng, num_tokens, layer->num_experts, topk, b->ids, b->router);
    b->d_hidden = hip_test_upload(ctx, b->hidden, count * sizeof *b->hidden);
    b->d_ids = hip_test_upload(ctx, b->ids, slots * sizeof *b->ids);
    b->d_router = hip_test_upload(ctx, b->router, slots * sizeof *b->router);
    b->d_out = hip_test_upload(ctx, poison, b->out_bytes);
}

static void batch_free(moeint4_context *ctx, device_batch *b)
{
    moeint4_memory_free(ctx, b->d_hidden);
    moeint4_memory_free(ctx, b->d_ids);
    moeint4_memory_free(ctx, b->d_router);
    moeint4_memory_free(ctx, b->d_out);
    free(b->hidden);
    free(b->ids);
    free(b->router);
}

static moeint4_status batch_forward(moeint4_context *ctx, const moeint4_weights *weights,
                                    const device_batch *b)
{
    moeint4_forward_args args = tk_forward_args(MOEINT4_DTYPE_BF16, b->num_tokens, b->topk,
                                                b->d_hidden, b->d_ids, b->d_router, b->d_out, NULL);
    return moeint4_forward(ctx, weights, &args);
}

/* Relative L2 error of 16 rows spread over the batch (the double reference
 * of all 2048 rows would take minutes). */
static double batch_error(const tk_layer *layer, const device_batch *b, const uint16_t *got)
{
    enum { rows = 16 };
    size_t k = (size_t)layer->hidden_size;
    int64_t row_list[rows];
    uint16_t *picked = malloc(rows * k * sizeof *picked);
    double *want = malloc(rows * k * sizeof *want);
    assert_non_null(picked);
    assert_non_null(want);
    for (int r = 0; r < rows; r++) {
        row_list[r] = (int64_t)r * (b->num_tokens - 1) / (rows - 1);
        memcpy(picked + (size_t)r * k, got + (size_t)row_list[r] * k, k * sizeof *picked);
    }
    const tk_activation silu = { MOEINT4_ACTIVATION_SILU, 0.0, 0.0, 0.0, 0 };
    tk_reference_moe(layer, MOEINT4_DTYPE_BF16, b->hidden, b->num_tokens, b->topk, b->ids,
                     b->router, &silu, row_list, rows, want);
    double error = tk_relative_l2(MOEINT4_DTYPE_BF16, picked, want, rows * k);
    free(picked);
    free(want);
    return error;
}

static void test_full_device(void **state)
{
    (void)state;
    if (host_available_bytes() < 4 * GIB) {
        print_message("skipped: less than 4 GiB of host memory available\n");
        tk_skip("see the \"skipped:\" line above");
    }
    moeint4_context *ctx = hip_test_context("mma");
    /* Qwen3-30B-A3B's layer: 1.125 GiB of bf16 (w13 0.75 GiB, w2 0.375 GiB). */
    tk_layer layer;
    tk_rng rng;
    tk_rng_seed(&rng, 7021);
    assert_int_equal(tk_layer_random(&layer, MOEINT4_FORMAT_GPTQ_SYM, 0, 128, 2048, 768, 128,
                                     MOEINT4_DTYPE_F16, 0, &rng),
                     0);
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    /* 2048 tokens x 8: a workspace of ~200 MiB, far above the 1 MiB a
     * filled device has left. */
    device_batch batch;
    size_t out_bytes = (size_t)2048 * 2048 * sizeof(uint16_t);
    uint16_t *poison = malloc(out_bytes), *got = malloc(out_bytes);
    assert_non_null(poison);
    assert_non_null(got);
    tk_poison(poison, out_bytes);
    batch_make(ctx, &batch, &layer, 2048, 8, poison, 7022);

    device_fill fill;
    if (!fill_device(ctx, &fill, MIB)) {
        print_message("skipped: the device has more than %d GiB\n", FILL_MAX_GIB_BLOCKS);
        batch_free(ctx, &batch);
        tk_layer_free(&layer);
        moeint4_context_destroy(ctx);
        free(poison);
        free(got);
        tk_skip("see the \"skipped:\" line above");
    }
    print_message("device filled: %zu blocks, %.3f GiB\n", (size_t)fill.count,
                  (double)fill.bytes / (double)GIB);
    if (fill.bytes < 2 * GIB)
        fill_release(ctx, &fill);
    assert_true(fill.bytes >= 2 * GIB);

    /* One GiB block back: between 1 GiB and 1 GiB + 1 MiB free. w13 fits,
     * w2 does not, and w13 must be given back. The int4 layer (0.29 GiB)
     * needs less: 774 MiB of the block are taken again, leaving ~250 MiB
     * (w13's codes and scales 198 MiB, w2's codes 96 MiB). */
    const int int4 = int4_mode();
    moeint4_memory_free(ctx, fill.block[0]);
    fill.block[0] = NULL;
    void *int4_refill = NULL;
    if (int4)
        assert_int_equal(moeint4_memory_alloc(ctx, 774 * MIB, &int4_refill), MOEINT4_SUCCESS);
    char marker[16];
    moeint4_weights *const untouched = (moeint4_weights *)(void *)marker;
    moeint4_weights *weights = untouched;
    moeint4_status status = moeint4_weights_prepare(ctx, &desc, &weights);
    char message[512];
    snprintf(message, sizeof message, "%s", moeint4_last_error());
    print_message("prepare with 1 GiB free: %s: %s\n", moeint4_status_string(status), message);
    if (status == MOEINT4_SUCCESS && weights != untouched)
        moeint4_weights_release(weights);
    /* a kept w13 (0.75 GiB) would leave ~0.25 GiB; half a GiB of slack for
     * the driver (int4: a kept w13 would leave ~52 MiB; 150 MiB asked) */
    moeint4_status again = moeint4_memory_alloc(ctx, int4 ? 150 * MIB : GIB / 2, &fill.block[0]);
    moeint4_memory_free(ctx, int4_refill);
    fill_release(ctx, &fill);
    assert_int_equal(status, MOEINT4_OUT_OF_MEMORY);
    assert_ptr_equal(weights, untouched);
    assert_non_null(
        strstr(message, int4 ? "device bytes for w2 (int4 codes)" : "device bytes for w2 (bf16)"));
    assert_int_equal(again, MOEINT4_SUCCESS); /* nothing of w13 kept */

    /* All memory back: the same prepare succeeds. */
    weights = NULL;
    status = moeint4_weights_prepare(ctx, &desc, &weights);
    if (status != MOEINT4_SUCCESS)
        print_error("prepare after freeing: %s: %s\n", moeint4_status_string(status),
                    moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);

    /* A forward on a filled device: the workspace cannot be allocated. */
    assert_int_equal(fill_device(ctx, &fill, MIB), 1);
    status = batch_forward(ctx, weights, &batch);
    snprintf(message, sizeof message, "%s", moeint4_last_error());
    fill_release(ctx, &fill);
    print_message("forward on a full device: %s: %s\n", moeint4_status_string(status), message);
    assert_int_equal(status, MOEINT4_OUT_OF_MEMORY);
    assert_non_null(strstr(message, "device bytes for forward workspace"));
    assert_int_equal(
        moeint4_memory_copy(ctx, got, batch.d_out, out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    assert_memory_equal(got, poison, out_bytes);

    /* Memory back: the forward works and matches the reference. */
    status = batch_forward(ctx, weights, &batch);
    if (status != MOEINT4_SUCCESS)
        print_error("forward after freeing: %s: %s\n", moeint4_status_string(status),
                    moeint4_last_error());
    assert_int_equal(status, MOEINT4_SUCCESS);
    assert_int_equal(
        moeint4_memory_copy(ctx, got, batch.d_out, out_bytes, MOEINT4_COPY_DEVICE_TO_HOST),
        MOEINT4_SUCCESS);
    double error = batch_error(&layer, &batch, got);
    print_message("forward after freeing: rel L2 %.3e\n", error);
    assert_true(error <= HIP_TOLERANCE);

    moeint4_weights_release(weights);
    batch_free(ctx, &batch);
    tk_layer_free(&layer);
    moeint4_context_destroy(ctx);
    free(poison);
    free(got);
}

/* ---- 3: the memory report ---- */

/* bf16 w13 [E_l][2N][K] + w2 [E_l][K][N] (int4: codes, 16-bit scales and
 * byte zero points per (row, group)) + the int32 expert map [E]. */
static void check_memory_report(moeint4_context *ctx, moeint4_format format, int experts,
                                int hidden, int intermediate, int group_size, int map_mode,
                                uint64_t seed)
{
    tk_layer layer;
    moeint4_weights *w = hip_test_prepare(ctx, &layer, format, experts, hidden, intermediate,
                                          group_size, map_mode, seed);
    size_t weights_count =
        (size_t)layer.num_local_experts * 3 * (size_t)intermediate * (size_t)hidden;
    size_t int4_bytes = weights_count / 2, bf16_bytes = weights_count * 2;
    size_t groups13 = group_size == -1 ? 1 : (size_t)(hidden / group_size);
    size_t groups2 = group_size == -1 ? 1 : (size_t)(intermediate / group_size);
    size_t row_groups = (size_t)layer.num_local_experts *
                        (2 * (size_t)intermediate * groups13 + (size_t)hidden * groups2);
    size_t int4_layout =
        int4_bytes + row_groups * 2 + (format == MOEINT4_FORMAT_GPTQ_SYM ? 0 : row_groups);
    const int int4 = int4_mode();
    size_t map_bytes = (size_t)layer.num_experts * sizeof(int32_t);
    size_t record_bytes = 4 * sizeof(int); /* the bad-slot record of asynchronous forwards */
    size_t host_bytes = 0, device_bytes = 0, only_host = 0, only_device = 0;
    assert_int_equal(moeint4_weights_memory(w, &host_bytes, &device_bytes), MOEINT4_SUCCESS);
    print_message("E=%d (local %d) K=%d N=%d: device %zu bytes (bf16 %zu + map %zu + record "
                  "%zu), host %zu\n",
                  layer.num_experts, layer.num_local_experts, hidden, intermediate, device_bytes,
                  bf16_bytes, map_bytes, record_bytes, host_bytes);
    if (int4) {
        assert_int_equal(device_bytes, int4_layout + map_bytes + record_bytes);
    } else {
        assert_int_equal(device_bytes, bf16_bytes + map_bytes + record_bytes);
        assert_int_equal(device_bytes - map_bytes - record_bytes, 4 * int4_bytes);
    }
    assert_true(host_bytes > 0 && host_bytes < 4096); /* the weights live on the device */
    assert_int_equal(moeint4_weights_memory(w, NULL, &only_device), MOEINT4_SUCCESS);
    assert_int_equal(moeint4_weights_memory(w, &only_host, NULL), MOEINT4_SUCCESS);
    assert_int_equal(only_device, device_bytes);
    assert_int_equal(only_host, host_bytes);
    moeint4_weights_release(w);
    tk_layer_free(&layer);
}

static void test_memory_report(void **state)
{
    (void)state;
    moeint4_context *ctx = hip_test_context("mma");
    check_memory_report(ctx, MOEINT4_FORMAT_GPTQ_SYM, 16, 256, 128, 128, 0, 7031);
    /* an expert map: the bf16 arrays hold the local experts, the map all */
    check_memory_report(ctx, MOEINT4_FORMAT_AWQ, 64, 1024, 512, 64, 1, 7032);
    moeint4_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    if (!hip_test_available())
        return HIP_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prepare_larger_than_device),
        cmocka_unit_test(test_full_device),
        cmocka_unit_test(test_memory_report),
    };
    return tk_cmocka_run("hip memory", tests, sizeof tests / sizeof tests[0], NULL, NULL, argc,
                         argv);
}
