/* Bad checkpoint files (bad/cases.json from the generator): each gives its
 * status and a message naming the file and the tensor, and nothing crashes
 * or leaks (the reliability run repeats this under ASan and valgrind). Then
 * the API's own argument checks, and prepare from several threads. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "checkpoint_test_util.h"
#include "moeint4.h"

static void expect_words(const char *text, const cJSON *words, const char *what)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, words)
    {
        if (!strstr(text, w->valuestring))
            fail_msg("%s: \"%s\" lacks \"%s\"", what, text, w->valuestring);
    }
}

static void test_bad_files(void **state)
{
    (void)state;
    cJSON *cases = ck_read_json(ck_path("bad", "cases.json"));
    assert_non_null(cases);
    assert_true(cJSON_GetArraySize(cases) >= 17);
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        const char *status = cJSON_GetObjectItem(c, "status")->valuestring;
        const cJSON *stage = cJSON_GetObjectItem(c, "stage");
        const cJSON *words = cJSON_GetObjectItem(c, "words");
        char dir[64];
        snprintf(dir, sizeof dir, "bad/%s", name);
        moeint4_checkpoint *ck = (moeint4_checkpoint *)(uintptr_t)0xbad;
        moeint4_status s = moeint4_checkpoint_open(ck_path(dir, NULL), NULL, &ck);
        if (!stage) { /* fails at open, and *checkpoint is untouched */
            if (strcmp(moeint4_status_string(s), status) != 0)
                fail_msg("%s: got %s \"%s\", expected %s", name, moeint4_status_string(s),
                         moeint4_last_error(), status);
            assert_ptr_equal(ck, (moeint4_checkpoint *)(uintptr_t)0xbad);
            expect_words(moeint4_last_error(), words, name);
            continue;
        }
        if (s != MOEINT4_SUCCESS)
            fail_msg("%s: open failed: %s", name, moeint4_last_error());
        moeint4_weights_desc d = { .struct_size = sizeof d };
        s = moeint4_checkpoint_layer_desc(ck, 0, &d);
        if (strcmp(moeint4_status_string(s), status) != 0)
            fail_msg("%s: layer_desc gave %s \"%s\", expected %s", name, moeint4_status_string(s),
                     moeint4_last_error(), status);
        if (strcmp(stage->valuestring, "desc") == 0) {
            expect_words(moeint4_last_error(), words, name);
        } else {
            char text[2048];
            assert_int_equal(moeint4_checkpoint_warnings(ck, text, sizeof text, NULL),
                             MOEINT4_SUCCESS);
            expect_words(text, words, name);
            moeint4_checkpoint_info info = { .struct_size = sizeof info };
            assert_int_equal(moeint4_checkpoint_query(ck, &info), MOEINT4_SUCCESS);
            assert_int_equal(info.num_warnings, 1);
        }
        moeint4_checkpoint_close(ck);
    }
    cJSON_Delete(cases);
    /* the good original of the table's files opens */
    moeint4_checkpoint *ck;
    assert_int_equal(moeint4_checkpoint_open(ck_path("bad/_good", NULL), NULL, &ck),
                     MOEINT4_SUCCESS);
    moeint4_checkpoint_close(ck);
}

static moeint4_checkpoint *open_deepseek(void)
{
    moeint4_checkpoint *ck = NULL;
    assert_int_equal(moeint4_checkpoint_open(ck_path("deepseek_v2_gptq_v2", NULL), NULL, &ck),
                     MOEINT4_SUCCESS);
    return ck;
}

static void expect_error(moeint4_status got, moeint4_status want, const char *words)
{
    if (got != want || !strstr(moeint4_last_error(), words))
        fail_msg("got %s \"%s\", expected %s with \"%s\"", moeint4_status_string(got),
                 moeint4_last_error(), moeint4_status_string(want), words);
}

static void test_arguments(void **state)
{
    (void)state;
    moeint4_checkpoint *ck = NULL;
    expect_error(moeint4_checkpoint_open(NULL, NULL, &ck), MOEINT4_INVALID_ARGUMENT,
                 "path is NULL");
    expect_error(moeint4_checkpoint_open(".", NULL, NULL), MOEINT4_INVALID_ARGUMENT,
                 "checkpoint is NULL");
    expect_error(moeint4_checkpoint_open(ck_path("no_such_dir", NULL), NULL, &ck),
                 MOEINT4_INVALID_ARGUMENT, "no_such_dir");
    moeint4_checkpoint_options small = { .struct_size = 4 };
    expect_error(moeint4_checkpoint_open(ck_path("deepseek_v2_gptq_v2", NULL), &small, &ck),
                 MOEINT4_INVALID_ARGUMENT,
                 "options->struct_size = 4 is below the first published size of "
                 "moeint4_checkpoint_options");
    assert_null(ck);
    moeint4_checkpoint_close(NULL);

    ck = open_deepseek();
    int count = -1;
    assert_int_equal(moeint4_checkpoint_layers(ck, NULL, 0, &count), MOEINT4_SUCCESS);
    assert_int_equal(count, 2);
    expect_error(moeint4_checkpoint_layers(ck, NULL, 2, &count), MOEINT4_INVALID_ARGUMENT,
                 "layers is NULL");
    /* layer 0 is DeepSeek's dense first layer: not a MoE layer */
    moeint4_checkpoint_layer_info li = { .struct_size = sizeof li };
    expect_error(moeint4_checkpoint_layer_query(ck, 0, &li), MOEINT4_INVALID_ARGUMENT,
                 "layer 0 is not a MoE layer of this checkpoint (MoE layers: 1, 2)");
    li.struct_size = 8;
    expect_error(moeint4_checkpoint_layer_query(ck, 1, &li), MOEINT4_INVALID_ARGUMENT,
                 "info->struct_size = 8 is below the first published size");
    li.struct_size = sizeof li;
    assert_int_equal(moeint4_checkpoint_layer_query(ck, 1, &li), MOEINT4_SUCCESS);
    assert_string_equal(li.router_name, "model.layers.1.mlp.gate.weight");
    assert_string_equal(li.shared_prefix, "model.layers.1.mlp.shared_experts");
    assert_int_equal(li.shared_experts, 2);
    moeint4_weights_desc d = { .struct_size = sizeof d };
    expect_error(moeint4_checkpoint_layer_desc(ck, 7, &d), MOEINT4_INVALID_ARGUMENT,
                 "layer 7 is not a MoE layer");
    expect_error(moeint4_checkpoint_layer_desc(ck, 1, NULL), MOEINT4_INVALID_ARGUMENT,
                 "desc is NULL");
    expect_error(moeint4_checkpoint_release_layer(ck, 3), MOEINT4_INVALID_ARGUMENT,
                 "layer 3 is not a MoE layer");

    /* tensors, as stored: the dense first layer's MLP is there, quantized */
    moeint4_tensor_view v = { .struct_size = sizeof v };
    assert_int_equal(moeint4_checkpoint_tensor(ck, "model.layers.0.mlp.down_proj.qweight", &v),
                     MOEINT4_SUCCESS);
    assert_string_equal(v.dtype, "I32");
    assert_int_equal(v.ndim, 2);
    assert_int_equal(v.shape[0], 256 / 8);
    assert_int_equal(v.shape[1], 256);
    assert_int_equal(v.bytes, 256 / 8 * 256 * 4);
    assert_non_null(v.data);
    expect_error(moeint4_checkpoint_tensor(ck, "model.layers.9.mlp.gate.weight", &v),
                 MOEINT4_INVALID_ARGUMENT, "\"model.layers.9.mlp.gate.weight\" is not in");
    moeint4_checkpoint_info info = { .struct_size = sizeof info };
    assert_int_equal(moeint4_checkpoint_query(ck, &info), MOEINT4_SUCCESS);
    assert_string_equal(info.architecture, "DeepseekV2ForCausalLM");
    assert_string_equal(info.quant_method, "gptq");
    assert_int_equal(info.num_hidden_layers, 3);
    assert_int_equal(moeint4_checkpoint_tensor_at(ck, info.num_tensors - 1, &v), MOEINT4_SUCCESS);
    expect_error(moeint4_checkpoint_tensor_at(ck, info.num_tensors, &v), MOEINT4_INVALID_ARGUMENT,
                 "is outside [0,");
    for (size_t i = 1; i < info.num_tensors; i++) { /* name order */
        moeint4_tensor_view a = { .struct_size = sizeof a }, b = { .struct_size = sizeof b };
        assert_int_equal(moeint4_checkpoint_tensor_at(ck, i - 1, &a), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_checkpoint_tensor_at(ck, i, &b), MOEINT4_SUCCESS);
        assert_true(strcmp(a.name, b.name) < 0);
    }
    size_t length = 1;
    assert_int_equal(moeint4_checkpoint_warnings(ck, NULL, 0, &length), MOEINT4_SUCCESS);
    assert_int_equal(length, 0);

    /* a context is needed, and the layer must exist */
    moeint4_weights *w = NULL;
    expect_error(moeint4_checkpoint_prepare(NULL, ck, 1, &w), MOEINT4_INVALID_ARGUMENT,
                 "ctx is NULL");
    moeint4_context *ctx;
    moeint4_context_options o = { .struct_size = sizeof o, .backend = MOEINT4_BACKEND_CPU };
    assert_int_equal(moeint4_context_create(&o, &ctx), MOEINT4_SUCCESS);
    expect_error(moeint4_checkpoint_prepare(ctx, ck, 0, &w), MOEINT4_INVALID_ARGUMENT,
                 "layer 0 is not a MoE layer");
    assert_null(w);
    /* the shared experts of DeepSeek: quantized, one MLP of n_shared x N */
    expect_error(moeint4_checkpoint_shared_desc(ck, 0, &d), MOEINT4_INVALID_ARGUMENT,
                 "layer 0 is not a MoE layer");
    assert_int_equal(moeint4_checkpoint_shared_desc(ck, 2, &d), MOEINT4_SUCCESS);
    assert_int_equal(d.intermediate_size, 2 * 128);
    moeint4_context_destroy(ctx);
    moeint4_checkpoint_close(ck);

    /* Mixtral has no shared expert */
    assert_int_equal(moeint4_checkpoint_open(ck_path("mixtral_awq_gemm_g64", NULL), NULL, &ck),
                     MOEINT4_SUCCESS);
    expect_error(moeint4_checkpoint_shared_desc(ck, 0, &d), MOEINT4_INVALID_ARGUMENT,
                 "layer 0 has no shared expert");
    moeint4_checkpoint_close(ck);
}

/* One file given directly: its config comes from next to it or from the
 * caller; a quantization description may come from the caller. */
static void test_single_file(void **state)
{
    (void)state;
    moeint4_checkpoint *ck = NULL;
    const char *file = ck_path("bad/not_quantized", "model.safetensors");
    char path[1024];
    snprintf(path, sizeof path, "%s", file);
    /* dense experts: not quantized, whatever description the caller gives */
    expect_error(moeint4_checkpoint_open(path, NULL, &ck), MOEINT4_UNSUPPORTED,
                 "not a quantized MoE checkpoint");
    moeint4_checkpoint_options o = {
        .struct_size = sizeof o,
        .quantization_json = "{\"w_bit\": 4, \"q_group_size\": 64, \"zero_point\": true, "
                             "\"version\": \"GEMM\"}"
    };
    expect_error(moeint4_checkpoint_open(path, &o, &ck), MOEINT4_UNSUPPORTED,
                 "experts.0.w1.weight\" is stored unquantized (BF16)");
    o.quantization_json = "{\"w_bit\": 4, \"q_group_size\": 64, \"version\": \"GEMV\"}";
    expect_error(moeint4_checkpoint_open(path, &o, &ck), MOEINT4_UNSUPPORTED,
                 "AWQ version \"GEMV\" is not served");
    o.quantization_json = NULL;
    o.config_json = "{\"model_type\": \"mixtral\", \"num_hidden_layers\": 1}";
    expect_error(moeint4_checkpoint_open(path, &o, &ck), MOEINT4_INVALID_ARGUMENT,
                 "options.config_json: \"hidden_size\" is missing");
    assert_null(ck);
}

/* moeint4_checkpoint_prepare on one layer from several threads at once: the
 * stacked arrays one call builds must not be freed under another's prepare
 * (each thread's forward matches a forward of weights prepared alone). */
#define PREPARE_THREADS 4
#define PREPARE_ROUNDS 8
#define PREPARE_TOKENS 3

typedef struct prepare_worker {
    moeint4_checkpoint *ck;
    const float *hidden, *expected;
    int failures;
    char message[256];
} prepare_worker;

static moeint4_status prepare_and_forward(moeint4_context *ctx, moeint4_checkpoint *ck,
                                          const float *hidden, float *out)
{
    static const int32_t ids[PREPARE_TOKENS * 2] = { 0, 1, 2, 3, 1, 2 };
    static const float router[PREPARE_TOKENS * 2] = { 0.75f, 0.25f, 0.5f, 0.5f, 1.0f, 0.125f };
    moeint4_weights *w = NULL;
    moeint4_status s = moeint4_checkpoint_prepare(ctx, ck, 0, &w);
    moeint4_forward_args a = { .struct_size = sizeof a,
                               .dtype = MOEINT4_DTYPE_F32,
                               .num_tokens = PREPARE_TOKENS,
                               .topk = 2,
                               .hidden_states = hidden,
                               .topk_ids = ids,
                               .topk_weights = router,
                               .output = out,
                               .activation = MOEINT4_ACTIVATION_SILU };
    if (s == MOEINT4_SUCCESS)
        s = moeint4_forward(ctx, w, &a);
    moeint4_weights_release(w);
    return s;
}

static moeint4_context *one_thread_cpu_context(void)
{
    moeint4_context_options o = { .struct_size = sizeof o,
                                  .backend = MOEINT4_BACKEND_CPU,
                                  .num_threads = 1 };
    moeint4_context *ctx = NULL;
    return moeint4_context_create(&o, &ctx) == MOEINT4_SUCCESS ? ctx : NULL;
}

static void *prepare_worker_main(void *arg)
{
    prepare_worker *self = arg;
    moeint4_context *ctx = one_thread_cpu_context();
    float out[PREPARE_TOKENS * 128];
    for (int round = 0; round < PREPARE_ROUNDS && ctx; round++) {
        moeint4_status s = prepare_and_forward(ctx, self->ck, self->hidden, out);
        if (s != MOEINT4_SUCCESS || memcmp(out, self->expected, sizeof out) != 0) {
            self->failures++;
            snprintf(self->message, sizeof self->message, "round %d: %s %s", round,
                     moeint4_status_string(s), s ? moeint4_last_error() : "output differs");
        }
    }
    if (!ctx) {
        self->failures++;
        snprintf(self->message, sizeof self->message, "context: %s", moeint4_last_error());
    }
    moeint4_context_destroy(ctx);
    return NULL;
}

/* Act-order on every backend: the XPU backend sorts the weights into
 * contiguous groups at prepare and gathers x by the sort order on the
 * device. Where the XPU plugin runs (PoCL's CPU device in CI) its forward of
 * a symmetric and an asymmetric act-order checkpoint matches the CPU
 * backend's (both f32 throughout); says so where it does not run. AUTO takes
 * whatever comes first. */
static void test_act_order_on_every_backend(void **state)
{
    (void)state;
    moeint4_backend_info xpu = { .struct_size = sizeof xpu };
    assert_int_equal(moeint4_backend_query(MOEINT4_BACKEND_XPU, &xpu), MOEINT4_SUCCESS);
    if (!xpu.compiled || !xpu.available)
        print_message("xpu not available (%s): its act-order path is not exercised here\n",
                      xpu.reason);
    const char *names[] = { "qwen3_moe_gptq_fused", "qwen3_moe_gptq_v1_act_order" };
    float hidden[PREPARE_TOKENS * 128], want[PREPARE_TOKENS * 128], got[PREPARE_TOKENS * 128];
    for (int i = 0; i < PREPARE_TOKENS * 128; i++)
        hidden[i] = (float)((i * 37 % 101) - 50) / 50.0f;
    for (int c = 0; c < 2; c++) {
        moeint4_checkpoint *ck;
        assert_int_equal(moeint4_checkpoint_open(ck_path(names[c], NULL), NULL, &ck),
                         MOEINT4_SUCCESS);
        moeint4_context *cpu = one_thread_cpu_context();
        assert_non_null(cpu);
        assert_int_equal(prepare_and_forward(cpu, ck, hidden, want), MOEINT4_SUCCESS);
        moeint4_context_destroy(cpu);
        if (xpu.compiled && xpu.available) {
            moeint4_context_options o = { .struct_size = sizeof o, .backend = MOEINT4_BACKEND_XPU };
            moeint4_context *ctx;
            assert_int_equal(moeint4_context_create(&o, &ctx), MOEINT4_SUCCESS);
            moeint4_status st = prepare_and_forward(ctx, ck, hidden, got);
            if (st != MOEINT4_SUCCESS)
                fail_msg("%s on xpu: %s", names[c], moeint4_last_error());
            double diff = 0, norm = 0;
            for (int i = 0; i < PREPARE_TOKENS * 128; i++) {
                diff += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
                norm += (double)want[i] * want[i];
            }
            print_message("%s: xpu against cpu, relative L2 %.3g\n", names[c], sqrt(diff / norm));
            assert_true(norm > 0 && sqrt(diff / norm) < 1e-5); /* f32 sums in both */
            moeint4_context_destroy(ctx);
        }
        moeint4_context *ctx;
        moeint4_weights *w = NULL;
        assert_int_equal(moeint4_context_create(NULL, &ctx), MOEINT4_SUCCESS);
        assert_int_equal(moeint4_checkpoint_prepare(ctx, ck, 0, &w), MOEINT4_SUCCESS);
        moeint4_weights_release(w);
        moeint4_context_destroy(ctx);
        moeint4_checkpoint_close(ck);
    }
}

static void test_prepare_from_threads(void **state)
{
    (void)state;
    moeint4_checkpoint *ck;
    /* Mixtral: K = 128, layer 0 */
    assert_int_equal(moeint4_checkpoint_open(ck_path("mixtral_awq_gemm_g64", NULL), NULL, &ck),
                     MOEINT4_SUCCESS);
    static float hidden[PREPARE_TOKENS * 128], expected[PREPARE_TOKENS * 128];
    for (int i = 0; i < PREPARE_TOKENS * 128; i++)
        hidden[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    moeint4_context *ctx = one_thread_cpu_context();
    assert_non_null(ctx);
    assert_int_equal(prepare_and_forward(ctx, ck, hidden, expected), MOEINT4_SUCCESS);
    moeint4_context_destroy(ctx);
    prepare_worker workers[PREPARE_THREADS];
    pthread_t threads[PREPARE_THREADS];
    for (int i = 0; i < PREPARE_THREADS; i++) {
        workers[i] = (prepare_worker){ .ck = ck, .hidden = hidden, .expected = expected };
        assert_int_equal(pthread_create(&threads[i], NULL, prepare_worker_main, &workers[i]), 0);
    }
    for (int i = 0; i < PREPARE_THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    for (int i = 0; i < PREPARE_THREADS; i++)
        if (workers[i].failures)
            fail_msg("thread %d: %d failures, last %s", i, workers[i].failures, workers[i].message);
    moeint4_checkpoint_close(ck);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ck_generated_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_act_order_on_every_backend),
        cmocka_unit_test(test_prepare_from_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
