/* Fuzzes descriptor validation and moeint4_weights_prepare on the CPU
 * backend: random (mostly small) shapes, formats, group sizes, expert maps,
 * scales and zero points, g_idx, NULL pointers and struct sizes. A prepare
 * that succeeds is used for one forward and released. Checked beyond the
 * sanitizers: inputs never modified, *weights untouched and a message on
 * failure, no message on success. */
#include <limits.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "fuzz_quant.h"
#include "moeint4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static moeint4_context *cpu_context(void)
{
    static moeint4_context *ctx; /* one per process: creating it is the slow part */
    if (!ctx) {
        moeint4_context_options options = { sizeof options, MOEINT4_BACKEND_CPU, 0, 1, 0, 0, 0, 0 };
        if (moeint4_context_create(&options, &ctx) != MOEINT4_SUCCESS)
            abort();
    }
    return ctx;
}

static int32_t *make_expert_map(fz_input *in, int num_experts, int num_local)
{
    if (num_experts < 1 || num_experts > FZ_MAX_DIM || fz_pick(in, 3) == 0)
        return NULL;
    int32_t *map = fz_alloc((size_t)num_experts * sizeof *map);
    for (int e = 0; e < num_experts; e++)
        map[e] = -1;
    /* local experts land on distinct global slots, then maybe one wrong entry */
    for (int local = 0; local < num_local && local < num_experts; local++) {
        int slot = (int)(fz_u8(in) % (unsigned)num_experts);
        while (map[slot] != -1)
            slot = (slot + 1) % num_experts;
        map[slot] = local;
    }
    if (fz_pick(in, 8) == 7) {
        static const int32_t wrong[] = { -2, INT32_MIN, INT32_MAX, 0, 1 };
        int32_t value = wrong[fz_pick(in, 5)];
        map[fz_u8(in) % (unsigned)num_experts] =
            value >= 0 && value <= 1 ? num_local - value : value;
    }
    return map;
}

static void run_one_forward(moeint4_context *ctx, const moeint4_weights *weights, int num_experts,
                            int hidden, fz_input *in)
{
    int tokens = fz_range(in, 1, 3), topk = num_experts < 2 ? 1 : 2;
    float *hidden_states = fz_alloc((size_t)tokens * (size_t)hidden * sizeof(float));
    float *output = fz_alloc((size_t)tokens * (size_t)hidden * sizeof(float));
    int32_t ids[6];
    float router[6];
    for (int i = 0; i < tokens * hidden; i++)
        hidden_states[i] = (float)((int)(fz_generated(in) % 2001) - 1000) / 1000.0f;
    for (int i = 0; i < tokens * topk; i++) {
        ids[i] = (int32_t)((i % topk + (int)fz_u8(in)) % num_experts);
        router[i] = 0.5f;
    }
    for (int t = 0; t < tokens && topk == 2; t++)
        if (ids[2 * t] == ids[2 * t + 1])
            ids[2 * t + 1] = (ids[2 * t] + 1) % num_experts;
    moeint4_forward_args args = { 0 };
    args.struct_size = sizeof args;
    args.dtype = MOEINT4_DTYPE_F32;
    args.num_tokens = tokens;
    args.topk = topk;
    args.hidden_states = hidden_states;
    args.topk_ids = ids;
    args.topk_weights = router;
    args.output = output;
    if (moeint4_forward(ctx, weights, &args) != MOEINT4_SUCCESS)
        abort(); /* valid arguments on weights that prepared fine */
    free(hidden_states);
    free(output);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_input in;
    fz_init(&in, data, size);
    moeint4_context *ctx = cpu_context();

    moeint4_format format = fz_format(&in);
    int group = fz_group_size(&in);
    int zero_offset = fz_zero_offset(&in);
    moeint4_dtype scales_dtype = fz_scales_dtype(&in);
    int hidden = fz_dimension(&in, 8, 128), inter = fz_dimension(&in, 8, 64);
    int num_experts = fz_range(&in, 1, 6);
    int num_local = fz_pick(&in, 4) == 0 ? fz_range(&in, 1, 6) : num_experts;
    if (fz_pick(&in, 64) == 0) { /* byte counts far past size_t; 2N past int */
        hidden = 1 << 30;
        inter = 1 << 30;
        num_experts = num_local = INT_MAX;
    }
    if (fz_pick(&in, 32) == 0)
        num_experts = -fz_range(&in, 0, 3);
    int32_t *expert_map = make_expert_map(&in, num_experts, num_local);
    if (!expert_map && fz_pick(&in, 2) == 0)
        num_local = num_experts; /* NULL map means identity */

    /* OUT = 2N only when it is representable; otherwise the arrays are tiny */
    int w13_out = inter > 0 && inter <= FZ_MAX_DIM ? 2 * inter : -1;
    fz_quant w13, w2;
    fz_quant_make(&in, &w13, format, zero_offset, num_local, hidden, w13_out, group, scales_dtype);
    fz_quant_make(&in, &w2, format, zero_offset, num_local, inter, hidden, group, scales_dtype);

    moeint4_weights_desc desc = { 0 };
    desc.struct_size = fz_struct_size(&in, sizeof desc);
    desc.num_experts = num_experts;
    desc.num_local_experts = num_local;
    desc.expert_map = expert_map;
    desc.hidden_size = hidden;
    desc.intermediate_size = inter;
    desc.group_size = group;
    desc.format = format;
    desc.zero_offset = zero_offset;
    desc.scales_dtype = scales_dtype;
    desc.w13_qweight = w13.view.qweight;
    desc.w13_scales = w13.view.scales;
    desc.w13_qzeros = w13.view.qzeros;
    desc.w13_g_idx = w13.view.g_idx;
    desc.w2_qweight = w2.view.qweight;
    desc.w2_scales = w2.view.scales;
    desc.w2_qzeros = w2.view.qzeros;
    desc.w2_g_idx = fz_pick(&in, 2) ? w2.view.g_idx : NULL;

    fz_snapshot before_w13, before_w2;
    fz_snapshot_take(&before_w13, &w13);
    fz_snapshot_take(&before_w2, &w2);
    int32_t map_copy[FZ_MAX_DIM];
    if (expert_map)
        memcpy(map_copy, expert_map, (size_t)num_experts * sizeof *expert_map);

    moeint4_weights *const sentinel = (moeint4_weights *)(uintptr_t)0x5a5a5a5a;
    moeint4_weights *weights = sentinel;
    moeint4_status status = moeint4_weights_prepare(ctx, &desc, &weights);
    const char *message = moeint4_last_error();
    if (status == MOEINT4_SUCCESS) {
        if (weights == sentinel || !weights || message[0] != '\0')
            abort();
        run_one_forward(ctx, weights, num_experts, hidden, &in);
        moeint4_weights_release(weights);
    } else if (weights != sentinel || message[0] == '\0') {
        abort(); /* output written on failure, or a failure without words */
    }
    fz_snapshot_check(&before_w13);
    fz_snapshot_check(&before_w2);
    if (expert_map && memcmp(map_copy, expert_map, (size_t)num_experts * sizeof *expert_map))
        abort();
    free(expert_map);
    fz_quant_free(&w13);
    fz_quant_free(&w2);
    return 0;
}
