/* The HIP backend's load-time dequantization, byte for byte against the
 * layout module's CPU conversion (moeint4_layout_dequantize_bf16), for every
 * format, zero convention, group size and scales dtype. Talks to the plugin
 * table directly (dlopen) to read the device weights back through its
 * "hip_download_weights" extra. Exits 77 (skipped) without plugin or GPU. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hip_test_util.h"
#include "moeint4_backend.h"

typedef moeint4_status (*download_fn)(void *, const void *, uint16_t *, uint16_t *);

typedef struct plugin {
    void *handle;
    const moeint4_backend_iface *iface;
    void *context;
    download_fn download;
} plugin;

static int plugin_open(plugin *p)
{
    char path[4096];
    const char *dir = getenv("MOEINT4_BACKEND_PATH");
    snprintf(path, sizeof path, "%s/libmoeint4-hip.so", dir && *dir ? dir : MOEINT4_HIP_PLUGIN_DIR);
    memset(p, 0, sizeof *p);
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
        printf("cannot load %s: %s\n", path, dlerror());
        return 0;
    }
    moeint4_plugin_backend_fn entry;
    void *symbol = dlsym(p->handle, "moeint4_plugin_backend");
    if (!symbol) {
        printf("%s exports no moeint4_plugin_backend\n", path);
        return 0;
    }
    memcpy(&entry, &symbol, sizeof entry);
    p->iface = entry(MOEINT4_BACKEND_API_VERSION);
    char reason[256] = "";
    if (!p->iface || !p->iface->probe(p->iface->user_data, 0, reason, sizeof reason)) {
        printf("hip plugin has no device: %s\n", reason);
        return 0;
    }
    void *extra = p->iface->get_proc_address(p->iface->user_data, "hip_download_weights");
    memcpy(&p->download, &extra, sizeof extra);
    return 1;
}

static plugin the_plugin;

static int setup(void **state)
{
    char err[256] = "";
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    unsetenv("MOEINT4_HIP_GEMM");
    if (the_plugin.iface->context_create(the_plugin.iface->user_data, &options, &the_plugin.context,
                                         err, sizeof err) != MOEINT4_SUCCESS) {
        printf("context_create: %s\n", err);
        return -1;
    }
    *state = &the_plugin;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    the_plugin.iface->context_destroy(the_plugin.iface->user_data, the_plugin.context);
    return 0;
}

/* bf16 of one projection on the CPU (layout module) and from the device. */
static void compare_projection(const tk_matrix *m, const uint16_t *device_bits, const char *name)
{
    size_t count = (size_t)m->num_experts * (size_t)m->out_features * (size_t)m->in_features;
    uint16_t *cpu = malloc(count * sizeof *cpu);
    assert_non_null(cpu);
    tk_poison(cpu, count * sizeof *cpu);
    moeint4_quant_matrix view = tk_matrix_view(m);
    assert_int_equal(moeint4_layout_dequantize_bf16(&view, cpu), MOEINT4_SUCCESS);
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (cpu[i] != device_bits[i] && mismatches++ == 0)
            first = i;
    if (mismatches)
        print_error("%s: %zu of %zu bf16 values differ; first at %zu: cpu 0x%04x device 0x%04x\n",
                    name, mismatches, count, first, cpu[first], device_bits[first]);
    assert_int_equal(mismatches, 0);
    free(cpu);
}

/* Act-order: each expert's g_idx is k / group shuffled (every group keeps
 * group_size rows, in an order of its own). */
static void shuffle_g_idx(tk_matrix *m, tk_rng *rng)
{
    for (int e = 0; e < m->num_experts; e++) {
        int32_t *row = m->g_idx + (size_t)e * m->in_features;
        for (int k = m->in_features - 1; k > 0; k--) {
            int j = tk_rng_below(rng, k + 1);
            int32_t t = row[k];
            row[k] = row[j];
            row[j] = t;
        }
    }
}

/* How a check expects prepare to hold the weights: as the environment's
 * mode (byte-identical to the layout module's dequantization), as BF16, or
 * (act-order in int4 mode) as int4 codes of the layout module's sorted copy,
 * whose values test_hip_forward's test_int4_act_order checks. */
typedef enum held_as { HELD_AS_ENV_MODE, HELD_AS_BF16, HELD_AS_SORTED_INT4 } held_as;

static void check_layer_held(plugin *p, void *context, moeint4_format format, int zero_offset,
                             int group_size, moeint4_dtype scales_dtype, uint64_t seed,
                             int act_order, held_as expect)
{
    const int experts = 3, hidden = 256, intermediate = 128;
    tk_layer layer;
    tk_rng rng;
    tk_rng_seed(&rng, seed);
    assert_int_equal(tk_layer_random(&layer, format, zero_offset, experts, hidden, intermediate,
                                     group_size, scales_dtype, 0, &rng),
                     0);
    if (act_order) {
        assert_int_equal(tk_layer_add_g_idx(&layer), 0);
        shuffle_g_idx(&layer.w13, &rng);
        shuffle_g_idx(&layer.w2, &rng);
    }
    moeint4_weights_desc desc = tk_layer_desc(&layer);
    void *weights = NULL;
    char err[512] = "";
    moeint4_status status = p->iface->prepare(context, &desc, &weights, err, sizeof err);
    if (status != MOEINT4_SUCCESS)
        print_error("prepare: %s\n", err);
    assert_int_equal(status, MOEINT4_SUCCESS);
    size_t host_bytes = 0, device_bytes = 0;
    if (expect == HELD_AS_SORTED_INT4) { /* int4-sized: codes, scales, zeros, the order */
        p->iface->memory_usage(context, weights, &host_bytes, &device_bytes);
        size_t weights_count = (size_t)experts * 3 * hidden * intermediate;
        assert_true(device_bytes >= weights_count / 2 && device_bytes < weights_count);
        p->iface->release(context, weights);
        tk_layer_free(&layer);
        return;
    }

    size_t w13_count = (size_t)experts * 2 * intermediate * hidden;
    size_t w2_count = (size_t)experts * hidden * intermediate;
    uint16_t *w13 = malloc(w13_count * 2), *w2 = malloc(w2_count * 2);
    assert_non_null(w13);
    assert_non_null(w2);
    tk_poison(w13, w13_count * 2);
    tk_poison(w2, w2_count * 2);
    assert_int_equal(p->download(context, weights, w13, w2), MOEINT4_SUCCESS);
    print_message("format %d zero_offset %d group %d scales %d%s\n", (int)format, zero_offset,
                  group_size, (int)scales_dtype, act_order ? " act-order" : "");
    compare_projection(&layer.w13, w13, "w13");
    compare_projection(&layer.w2, w2, "w2");

    p->iface->memory_usage(context, weights, &host_bytes, &device_bytes);
    /* bf16 weights, or (int4 mode) the int4 codes and their group scales */
    if (expect == HELD_AS_BF16 || hip_test_weights_env_is("bf16"))
        assert_true(device_bytes >= (w13_count + w2_count) * 2);
    else
        assert_true(device_bytes >= (w13_count + w2_count) / 2 &&
                    device_bytes < (w13_count + w2_count) * 2);

    p->iface->release(context, weights);
    free(w13);
    free(w2);
    tk_layer_free(&layer);
}

static void check_format(plugin *p, moeint4_format format, int zero_offset, int group_size,
                         moeint4_dtype scales_dtype, uint64_t seed)
{
    check_layer_held(p, p->context, format, zero_offset, group_size, scales_dtype, seed, 0,
                     HELD_AS_ENV_MODE);
}

/* Act-order checkpoints: in BF16 mode each input column uses the group its
 * g_idx names, byte-identical to the layout module's dequantization; in
 * int4 mode (and so under AUTO) the weights are the layout module's sorted
 * copy as int4 codes. */
static void test_act_order(void **state)
{
    plugin *p = *state;
    held_as in_this_context = hip_test_weights_env_is("bf16") ? HELD_AS_BF16 : HELD_AS_SORTED_INT4;
    check_layer_held(p, p->context, MOEINT4_FORMAT_GPTQ_ASYM, 1, 32, MOEINT4_DTYPE_F16, 3000, 1,
                     in_this_context);
    check_layer_held(p, p->context, MOEINT4_FORMAT_GPTQ_SYM, 0, 128, MOEINT4_DTYPE_BF16, 3001, 1,
                     in_this_context);

    /* An AUTO context (no option, no environment) holds them as int4. */
    char *saved = hip_test_env_save("MOEINT4_HIP_WEIGHTS");
    unsetenv("MOEINT4_HIP_WEIGHTS");
    moeint4_context_options options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    void *auto_context = NULL;
    char err[256] = "";
    assert_int_equal(
        p->iface->context_create(p->iface->user_data, &options, &auto_context, err, sizeof err),
        MOEINT4_SUCCESS);
    check_layer_held(p, auto_context, MOEINT4_FORMAT_GPTQ_ASYM, 1, 32, MOEINT4_DTYPE_F16, 3002, 1,
                     HELD_AS_SORTED_INT4);
    p->iface->context_destroy(p->iface->user_data, auto_context);
    hip_test_env_restore("MOEINT4_HIP_WEIGHTS", saved);
}

static void test_every_format_and_group(void **state)
{
    plugin *p = *state;
    const int groups[] = { 32, 64, 128, -1 };
    uint64_t seed = 1000;
    for (int g = 0; g < 4; g++) {
        check_format(p, MOEINT4_FORMAT_GPTQ_SYM, 0, groups[g], MOEINT4_DTYPE_F16, seed++);
        check_format(p, MOEINT4_FORMAT_GPTQ_ASYM, 0, groups[g], MOEINT4_DTYPE_F16, seed++);
        check_format(p, MOEINT4_FORMAT_GPTQ_ASYM, 1, groups[g], MOEINT4_DTYPE_F16, seed++);
        check_format(p, MOEINT4_FORMAT_AWQ, 0, groups[g], MOEINT4_DTYPE_F16, seed++);
    }
}

static void test_bf16_scales(void **state)
{
    plugin *p = *state;
    check_format(p, MOEINT4_FORMAT_GPTQ_SYM, 0, 128, MOEINT4_DTYPE_BF16, 2000);
    check_format(p, MOEINT4_FORMAT_AWQ, 0, 32, MOEINT4_DTYPE_BF16, 2001);
}

/* The int4 wgmma tiles' rounded A fragments (two bf16x2 FMAs a pair of
 * weights, from the scale split into two bf16) give the bits of the BF16
 * mode's weights, which the tests above hold to the CPU conversion: every
 * positive finite f16 and bf16 scale, zero point 0..16 and code, on the
 * device (the plugin's "hip_test_rounded_pairs"). Builds without the
 * sm_90a tiles skip it. */
static void test_rounded_pairs(void **state)
{
    plugin *p = *state;
    typedef int (*pairs_fn)(int, unsigned *);
    void *extra = p->iface->get_proc_address(p->iface->user_data, "hip_test_rounded_pairs");
    assert_non_null(extra);
    pairs_fn pairs;
    memcpy(&pairs, &extra, sizeof extra);
    for (int scales_bf16 = 0; scales_bf16 < 2; scales_bf16++) {
        unsigned mismatches = 12345;
        int e = pairs(scales_bf16, &mismatches);
        if (e == -1) {
            print_message("no sm_90a wgmma tiles in this build\n");
            skip();
        }
        assert_int_equal(e, 0);
        print_message("%s scales: %u mismatching pairs\n", scales_bf16 ? "bf16" : "f16",
                      mismatches);
        assert_int_equal(mismatches, 0);
    }
}

int main(void)
{
    if (!plugin_open(&the_plugin))
        return HIP_TEST_SKIP;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_format_and_group),
        cmocka_unit_test(test_bf16_scales),
        cmocka_unit_test(test_act_order),
        cmocka_unit_test(test_rounded_pairs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
