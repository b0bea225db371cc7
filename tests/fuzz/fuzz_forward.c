/* Fuzzes moeint4_forward on the CPU backend over a few prepared layers
 * (every format, an expert map with -1 entries): token counts, topk, topk
 * ids and router weights (out of range, NaN), activations and their
 * parameters, dtypes, struct sizes, NULL pointers, weights from another
 * context. Checked beyond the sanitizers: inputs never modified; on failure
 * the output is untouched and a message says why; on success the same call
 * gives the same bits again, and sane inputs give a finite output. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "moeint4.h"
#include "testkit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NUM_LAYERS 3
#define MAX_TOKENS 8
#define MAX_TOPK 4
#define MAX_HIDDEN 128

typedef struct fuzz_world {
    moeint4_context *ctx, *other_ctx;
    tk_layer layers[NUM_LAYERS];
    moeint4_weights *weights[NUM_LAYERS];
} fuzz_world;

static const fuzz_world *world(void)
{
    static fuzz_world w; /* built once per process: preparing is the slow part */
    static int ready;
    if (ready)
        return &w;
    moeint4_context_options options = { sizeof options, MOEINT4_BACKEND_CPU, 0, 1, 0, 0, 0, 0 };
    if (moeint4_context_create(&options, &w.ctx) != MOEINT4_SUCCESS ||
        moeint4_context_create(&options, &w.other_ctx) != MOEINT4_SUCCESS)
        abort();
    tk_rng rng;
    tk_rng_seed(&rng, 7);
    if (tk_layer_random(&w.layers[0], MOEINT4_FORMAT_GPTQ_SYM, 0, 4, 64, 32, 32, MOEINT4_DTYPE_F16,
                        0, &rng) ||
        tk_layer_random(&w.layers[1], MOEINT4_FORMAT_AWQ, 0, 6, 32, 16, -1, MOEINT4_DTYPE_BF16, 1,
                        &rng) ||
        tk_layer_random(&w.layers[2], MOEINT4_FORMAT_GPTQ_ASYM, 1, 3, 128, 64, 64,
                        MOEINT4_DTYPE_F16, 0, &rng))
        abort();
    for (int i = 0; i < NUM_LAYERS; i++) {
        moeint4_weights_desc desc = tk_layer_desc(&w.layers[i]);
        if (moeint4_weights_prepare(w.ctx, &desc, &w.weights[i]) != MOEINT4_SUCCESS)
            abort();
    }
    ready = 1;
    return &w;
}

/* A value in [lo, hi], or now and then an odd one (then not sane). */
static float fuzz_float(fz_input *in, int *sane, float lo, float hi)
{
    static const float odd[] = { NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -1e-40f };
    int pick = fz_pick(in, 40);
    if (pick == 0 || lo == hi) {
        *sane = 0;
        return odd[fz_pick(in, (int)(sizeof odd / sizeof odd[0]))];
    }
    return lo + (hi - lo) * (float)fz_u8(in) / 255.0f;
}

typedef struct call {
    moeint4_forward_args args;
    uint8_t hidden[MAX_TOKENS * MAX_HIDDEN * 4];
    int32_t ids[MAX_TOKENS * MAX_TOPK];
    float router[MAX_TOKENS * MAX_TOPK];
    int sane; /* arguments valid and values moderate: the output must be finite */
} call;

static void make_call(fz_input *in, const tk_layer *layer, call *c)
{
    static const int dtypes[] = { MOEINT4_DTYPE_F32, MOEINT4_DTYPE_F16, MOEINT4_DTYPE_BF16, 0, 4 };
    int num_experts = layer->num_experts, hidden = layer->hidden_size;
    c->sane = 1;
    moeint4_forward_args *a = &c->args;
    memset(a, 0, sizeof *a);
    a->struct_size = sizeof *a;
    int dtype_pick = fz_pick(in, 32);
    a->dtype = (moeint4_dtype)dtypes[dtype_pick < 30 ? dtype_pick % 3 : dtype_pick - 27];
    a->num_tokens = fz_range(in, 0, MAX_TOKENS);
    a->topk = fz_range(in, 1, num_experts < MAX_TOPK ? num_experts : MAX_TOPK);
    switch (fz_pick(in, 48)) {
    case 0: a->num_tokens = -1; break;
    case 1: a->num_tokens = INT64_MIN; break;
    case 2: a->topk = 0; break;
    case 3: a->topk = -1; break;
    case 4: a->topk = num_experts + 1; break;
    case 5: a->topk = INT_MAX; break;
    default: break;
    }
    size_t elements = (size_t)MAX_TOKENS * (size_t)hidden;
    moeint4_dtype store = a->dtype == MOEINT4_DTYPE_F16 || a->dtype == MOEINT4_DTYPE_BF16
                              ? a->dtype
                              : MOEINT4_DTYPE_F32;
    for (size_t i = 0; i < elements; i++)
        tk_store(store, c->hidden, i, (double)(fz_generated(in) % 4001) / 1000.0 - 2.0);
    if (fz_pick(in, 8) == 0) /* one odd value: NaN, Inf, huge, negative zero, ... */
        tk_store(store, c->hidden, fz_u8(in) % elements, (double)fuzz_float(in, &c->sane, 0, 0));
    if (store != MOEINT4_DTYPE_F32 && fz_pick(in, 16) == 0) {
        fz_fill(in, c->hidden, elements * 2); /* raw 16-bit patterns */
        c->sane = 0;
    }
    for (int t = 0; t < MAX_TOKENS; t++)
        for (int j = 0; j < MAX_TOPK; j++) {
            /* distinct ids per token (a router's top-k), then maybe a bad one */
            c->ids[t * MAX_TOPK + j] = (int32_t)((t + j * (1 + fz_pick(in, 2))) % num_experts);
            c->router[t * MAX_TOPK + j] = (float)(fz_generated(in) % 1001) / 1000.0f;
        }
    if (fz_pick(in, 8) == 0)
        c->router[fz_u8(in) % (MAX_TOKENS * MAX_TOPK)] = fuzz_float(in, &c->sane, 0, 0);
    if (fz_pick(in, 8) == 0) {
        static const int32_t bad[] = { -1, INT32_MIN, INT32_MAX, 0 };
        int32_t value = bad[fz_pick(in, 4)];
        c->ids[fz_u8(in) % (MAX_TOKENS * MAX_TOPK)] = value ? value : num_experts;
    }
    /* the library reads ids as [M][topk]: repack the first M rows densely */
    for (int t = 0; t < MAX_TOKENS && a->topk > 0 && a->topk <= MAX_TOPK; t++)
        for (int j = 0; j < a->topk; j++) {
            c->ids[t * a->topk + j] = c->ids[t * MAX_TOPK + j];
            c->router[t * a->topk + j] = c->router[t * MAX_TOPK + j];
        }
    int act = fz_pick(in, 20);
    a->activation = (moeint4_activation)(act < 18 ? act % 3 : act == 18 ? 3 : -1);
    a->swiglu_limit = fuzz_float(in, &c->sane, 0.1f, 10.0f);
    a->swiglu_alpha = fuzz_float(in, &c->sane, -2.0f, 2.0f);
    a->swiglu_beta = fuzz_float(in, &c->sane, -2.0f, 2.0f);
    a->apply_router_weight_on_input = fz_pick(in, 16) == 0 ? 2 : fz_pick(in, 2);
    a->hidden_states = c->hidden;
    a->topk_ids = c->ids;
    a->topk_weights = c->router;
    switch (fz_pick(in, 40)) {
    case 0: a->hidden_states = NULL; break;
    case 1: a->topk_ids = NULL; break;
    case 2: a->topk_weights = NULL; break;
    case 3: a->struct_size = 0; break;
    case 4: a->struct_size = sizeof *a + 32; break;
    default: break;
    }
}

static int all_finite(moeint4_dtype dtype, const void *data, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (!isfinite(tk_load(dtype, data, i)))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const fuzz_world *w = world();
    fz_input in;
    fz_init(&in, data, size);
    int which = fz_pick(&in, NUM_LAYERS);
    const tk_layer *layer = &w->layers[which];
    static call c; /* large: keep it off the stack */
    make_call(&in, layer, &c);

    size_t out_bytes = (size_t)MAX_TOKENS * (size_t)layer->hidden_size * 4;
    uint8_t *out = fz_alloc(out_bytes), *again = fz_alloc(out_bytes);
    tk_poison(out, out_bytes);
    tk_poison(again, out_bytes);
    moeint4_forward_args args = c.args;
    args.output = fz_pick(&in, 64) == 0 ? NULL : out;
    moeint4_context *ctx = w->ctx;
    const moeint4_weights *weights = w->weights[which];
    switch (fz_pick(&in, 64)) {
    case 0: ctx = w->other_ctx; break;
    case 1: ctx = NULL; break;
    case 2: weights = NULL; break;
    default: break;
    }
    if (getenv("MOEINT4_FUZZ_VERBOSE")) /* for reproducers in reports */
        fprintf(stderr,
                "layer %d (E=%d K=%d N=%d) dtype %d M=%lld topk %d act %d limit %g "
                "alpha %g beta %g on_input %d struct_size %zu\n",
                which, layer->num_experts, layer->hidden_size, layer->intermediate_size,
                (int)args.dtype, (long long)args.num_tokens, args.topk, (int)args.activation,
                (double)args.swiglu_limit, (double)args.swiglu_alpha, (double)args.swiglu_beta,
                args.apply_router_weight_on_input, args.struct_size);
    call before = c;
    moeint4_status status = moeint4_forward(ctx, weights, &args);
    if (memcmp(&before, &c, sizeof c) != 0)
        abort(); /* inputs modified */
    size_t written =
        args.num_tokens > 0 && args.num_tokens <= MAX_TOKENS
            ? (size_t)args.num_tokens * (size_t)layer->hidden_size * tk_dtype_size(args.dtype)
            : 0;
    if (status != MOEINT4_SUCCESS) {
        uint8_t *poisoned = fz_alloc(out_bytes);
        tk_poison(poisoned, out_bytes);
        if (moeint4_last_error()[0] == '\0' || memcmp(out, poisoned, out_bytes) != 0)
            abort(); /* no words, or output touched on failure */
        free(poisoned);
    } else {
        if (moeint4_last_error()[0] != '\0')
            abort();
        args.output = again;
        if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS ||
            memcmp(out, again, written) != 0)
            abort(); /* not deterministic */
        if (c.sane && !all_finite(args.dtype, out, written / tk_dtype_size(args.dtype)))
            abort();
    }
    free(out);
    free(again);
    return 0;
}
