/* `moeint4 inspect PATH [--json]`, `moeint4 run --checkpoint PATH --layer L`
 * and `moeint4 bench --checkpoint PATH --layer L`: a real checkpoint through
 * the public ABI. The run's reference decodes the checkpoint's packed arrays
 * with the test kit (never the library's layout code), looks each input's
 * group up in g_idx, and sums in double. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_session.h"
#include "synth.h"

static const char *zeros_name(moeint4_zero_convention z)
{
    return z == MOEINT4_ZEROS_GPTQ_V1   ? "gptq v1 (stored zero - 1)"
           : z == MOEINT4_ZEROS_GPTQ_V2 ? "gptq_v2 (stored as is)"
                                        : "awq (stored as is)";
}

static int open_checkpoint(const char *path, moeint4_checkpoint **ck)
{
    moeint4_status s = moeint4_checkpoint_open(path, NULL, ck);
    if (s != MOEINT4_SUCCESS) {
        fprintf(stderr, "moeint4: %s: %s: %s\n", path, moeint4_status_string(s),
                moeint4_last_error());
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

/* "model.layers.*.self_attn.q_proj.weight" style: digits runs become '*'. */
static void generic_name(const char *name, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 2 < cap; i++) {
        if (name[i] >= '0' && name[i] <= '9') {
            out[j++] = '*';
            while (name[i + 1] >= '0' && name[i + 1] <= '9')
                i++;
        } else {
            out[j++] = name[i];
        }
    }
    out[j] = '\0';
}

typedef struct name_count {
    char name[160];
    int count;
    char dtype[8];
} name_count;

/* Float tensors of modules (".weight") grouped by their layer-generic name. */
static int unquantized_modules(const moeint4_checkpoint *ck, size_t tensors, name_count *list,
                               int cap)
{
    int n = 0;
    for (size_t i = 0; i < tensors; i++) {
        moeint4_tensor_view v = { .struct_size = sizeof v };
        if (moeint4_checkpoint_tensor_at(ck, i, &v) != MOEINT4_SUCCESS)
            continue;
        size_t len = strlen(v.name);
        if (len < 7 || strcmp(v.name + len - 7, ".weight") != 0 || v.ndim != 2 ||
            (strcmp(v.dtype, "F16") && strcmp(v.dtype, "BF16") && strcmp(v.dtype, "F32")))
            continue;
        char g[160];
        generic_name(v.name, g, sizeof g);
        int found = -1;
        for (int k = 0; k < n && found < 0; k++)
            if (strcmp(list[k].name, g) == 0)
                found = k;
        if (found < 0 && n < cap) {
            found = n++;
            snprintf(list[found].name, sizeof list[found].name, "%s", g);
            snprintf(list[found].dtype, sizeof list[found].dtype, "%s", v.dtype);
            list[found].count = 0;
        }
        if (found >= 0)
            list[found].count++;
    }
    return n;
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

/* What the HIP backend holds with gpu_weights BF16: every weight as 2 bytes. */
static size_t hip_bf16_bytes(const moeint4_checkpoint_layer_info *li)
{
    return (size_t)li->num_experts * 3 * (size_t)li->hidden_size * (size_t)li->intermediate_size *
           2;
}

static void print_layer_text(const moeint4_checkpoint_layer_info *li)
{
    size_t bf16 = hip_bf16_bytes(li);
    printf("  layer %d: %d experts, top-k %d, K=%d N=%d, %s, zeros %s, group %d%s%s, scales %s\n",
           li->layer, li->num_experts, li->top_k, li->hidden_size, li->intermediate_size,
           cli_format_name(li->format), zeros_name(li->zeros), li->group_size,
           li->act_order ? ", act-order" : "", li->fused_experts ? ", fused 3-D tensors" : "",
           cli_dtype_name(li->scales_dtype));
    printf("    int4 as stored %.2f MB; prepared: cpu ~%.2f MB, hip ~%.2f MB (gpu_weights INT4, "
           "the default) or %.2f MB (BF16)\n",
           li->expert_bytes / 1e6, li->expert_bytes / 1e6, li->expert_bytes / 1e6, bf16 / 1e6);
    printf("    router %s (%s)\n", li->router_name, li->router_dtype);
    if (li->shared_experts > 0)
        printf("    shared experts: %d, N=%d, %s, at %s%s%s\n", li->shared_experts,
               li->shared_intermediate_size, li->shared_quantized ? "int4" : "dense",
               li->shared_prefix, li->shared_gate_name[0] ? ", gate " : "", li->shared_gate_name);
}

static void print_layer_json(const moeint4_checkpoint_layer_info *li, int first)
{
    printf("%s\n    {\"layer\": %d, \"experts\": %d, \"top_k\": %d, \"K\": %d, \"N\": %d, "
           "\"format\": \"%s\", \"zeros\": \"%s\", \"zero_offset\": %d, \"group_size\": %d, "
           "\"act_order\": %s, \"fused_experts\": %s, \"bytes\": %zu, \"hip_bf16_bytes\": %zu, "
           "\"router\": ",
           first ? "" : ",", li->layer, li->num_experts, li->top_k, li->hidden_size,
           li->intermediate_size, cli_format_name(li->format),
           li->zeros == MOEINT4_ZEROS_GPTQ_V1   ? "gptq"
           : li->zeros == MOEINT4_ZEROS_GPTQ_V2 ? "gptq_v2"
                                                : "awq",
           li->zero_offset, li->group_size, li->act_order ? "true" : "false",
           li->fused_experts ? "true" : "false", li->expert_bytes, hip_bf16_bytes(li));
    json_string(li->router_name);
    printf(", \"shared_experts\": %d, \"shared_N\": %d, \"shared_quantized\": %s}",
           li->shared_experts, li->shared_intermediate_size,
           li->shared_quantized ? "true" : "false");
}

int cli_inspect_main(int argc, char **argv)
{
    const char *path = NULL;
    int as_json = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strncmp(argv[i], "--", 2) == 0 || path) {
            fprintf(stderr, "moeint4 inspect: unexpected argument '%s'\n", argv[i]);
            return CLI_EXIT_USAGE;
        } else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "moeint4 inspect: a checkpoint path is needed\n");
        return CLI_EXIT_USAGE;
    }
    moeint4_checkpoint *ck;
    if (open_checkpoint(path, &ck) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    int count = 0, status = CLI_EXIT_OK;
    moeint4_checkpoint_layers(ck, NULL, 0, &count);
    int *layers = calloc((size_t)(count ? count : 1), sizeof *layers);
    name_count *modules = calloc(64, sizeof *modules);
    if (!layers || !modules) {
        fprintf(stderr, "moeint4: out of memory\n");
        free(layers);
        free(modules);
        moeint4_checkpoint_close(ck);
        return CLI_EXIT_FAILURE;
    }
    moeint4_checkpoint_layers(ck, layers, count, &count);
    moeint4_checkpoint_info info = { .struct_size = sizeof info };
    moeint4_checkpoint_query(ck, &info);
    /* building every layer's arrays checks symmetric zeros against the label */
    for (int i = 0; i < count && status == CLI_EXIT_OK; i++) {
        moeint4_weights_desc d = { .struct_size = sizeof d };
        moeint4_status s = moeint4_checkpoint_layer_desc(ck, layers[i], &d);
        if (s != MOEINT4_SUCCESS) {
            fprintf(stderr, "moeint4: layer %d: %s: %s\n", layers[i], moeint4_status_string(s),
                    moeint4_last_error());
            status = CLI_EXIT_FAILURE;
        }
        moeint4_checkpoint_release_layer(ck, layers[i]);
    }
    int modules_found = unquantized_modules(ck, info.num_tensors, modules, 64);
    size_t warnings_length = 0;
    moeint4_checkpoint_warnings(ck, NULL, 0, &warnings_length);
    char *warnings = malloc(warnings_length + 1);
    if (warnings)
        moeint4_checkpoint_warnings(ck, warnings, warnings_length + 1, NULL);
    if (as_json) {
        printf("{\n  \"path\": ");
        json_string(path);
        printf(",\n  \"model_type\": \"%s\", \"architecture\": \"%s\", \"quant_method\": \"%s\", "
               "\"quant_source\": ",
               info.model_type, info.architecture, info.quant_method);
        json_string(info.quant_source);
        printf(",\n  \"files\": %d, \"tensors\": %zu, \"bytes\": %zu, \"hidden_layers\": %d,\n"
               "  \"moe_layers\": [",
               info.num_files, info.num_tensors, info.file_bytes, info.num_hidden_layers);
        for (int i = 0; i < count; i++) {
            moeint4_checkpoint_layer_info li = { .struct_size = sizeof li };
            moeint4_checkpoint_layer_query(ck, layers[i], &li);
            print_layer_json(&li, i == 0);
        }
        printf("\n  ],\n  \"unquantized_modules\": [");
        for (int i = 0; i < modules_found; i++) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_string(modules[i].name);
            printf(", \"dtype\": \"%s\", \"count\": %d}", modules[i].dtype, modules[i].count);
        }
        printf("],\n  \"warnings\": [");
        for (char *line = warnings, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next)
                *next++ = '\0';
            printf("%s", line == warnings ? "" : ", ");
            json_string(line);
        }
        printf("]\n}\n");
    } else {
        printf("checkpoint: %s\n", path);
        printf("architecture: %s (model_type %s), %d layers\n", info.architecture, info.model_type,
               info.num_hidden_layers);
        printf("quantization: %s, from %s\n", info.quant_method, info.quant_source);
        printf("files: %d (%.2f MB), %zu tensors\n", info.num_files, info.file_bytes / 1e6,
               info.num_tensors);
        printf("MoE layers: %d\n", count);
        for (int i = 0; i < count; i++) {
            moeint4_checkpoint_layer_info li = { .struct_size = sizeof li };
            moeint4_checkpoint_layer_query(ck, layers[i], &li);
            print_layer_text(&li);
        }
        printf("unquantized modules (float .weight tensors, never treated as experts):\n");
        for (int i = 0; i < modules_found; i++)
            printf("  %s (%s) x%d\n", modules[i].name, modules[i].dtype, modules[i].count);
        printf("warnings: %s%s", warnings && *warnings ? "\n" : "none\n", warnings ? warnings : "");
    }
    free(warnings);
    free(layers);
    free(modules);
    moeint4_checkpoint_close(ck);
    return status;
}

/* ---- run / bench on one layer ---- */

typedef struct ckpt_layer_run {
    moeint4_checkpoint *ck;
    moeint4_checkpoint_layer_info info;
    moeint4_weights_desc desc;
    moeint4_context *ctx;
    moeint4_weights *weights;
    moeint4_backend_info backend;
} ckpt_layer_run;

static void layer_run_close(ckpt_layer_run *r)
{
    moeint4_weights_release(r->weights);
    moeint4_context_destroy(r->ctx);
    moeint4_checkpoint_close(r->ck);
}

static int layer_run_open(ckpt_layer_run *r, const cli_options *o)
{
    memset(r, 0, sizeof *r);
    if (open_checkpoint(o->checkpoint_path, &r->ck) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    r->info.struct_size = sizeof r->info;
    r->desc.struct_size = sizeof r->desc;
    moeint4_status s = moeint4_checkpoint_layer_query(r->ck, o->layer, &r->info);
    if (s == MOEINT4_SUCCESS)
        s = moeint4_checkpoint_layer_desc(r->ck, o->layer, &r->desc);
    moeint4_context_options co = { .struct_size = sizeof co,
                                   .backend = o->backend,
                                   .num_threads = o->threads,
                                   .gpu_weights = o->gpu_weights };
    if (s == MOEINT4_SUCCESS)
        s = moeint4_context_create(&co, &r->ctx);
    if (s == MOEINT4_SUCCESS)
        s = moeint4_weights_prepare(r->ctx, &r->desc, &r->weights);
    moeint4_backend id = MOEINT4_BACKEND_CPU;
    r->backend.struct_size = sizeof r->backend;
    if (s == MOEINT4_SUCCESS)
        s = moeint4_weights_backend(r->weights, &id);
    if (s == MOEINT4_SUCCESS)
        s = moeint4_backend_query(id, &r->backend);
    if (s != MOEINT4_SUCCESS) {
        fprintf(stderr, "moeint4: %s layer %d: %s: %s\n", o->checkpoint_path, o->layer,
                moeint4_status_string(s), moeint4_last_error());
        layer_run_close(r);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

/* A test-kit view of one projection's packed arrays (codes decoded on demand). */
static tk_matrix kit_view(const moeint4_weights_desc *d, int w13)
{
    tk_matrix m;
    memset(&m, 0, sizeof m);
    m.format = d->format;
    m.zero_offset = d->zero_offset;
    m.num_experts = d->num_local_experts;
    m.in_features = w13 ? d->hidden_size : d->intermediate_size;
    m.out_features = w13 ? 2 * d->intermediate_size : d->hidden_size;
    m.group_size = d->group_size;
    m.num_groups = d->group_size == -1 ? 1 : m.in_features / d->group_size;
    m.scales_dtype = d->scales_dtype == MOEINT4_DTYPE_BF16 ? MOEINT4_DTYPE_BF16 : MOEINT4_DTYPE_F16;
    m.qweight = (int32_t *)(w13 ? d->w13_qweight : d->w2_qweight);
    m.qzeros = (int32_t *)(w13 ? d->w13_qzeros : d->w2_qzeros);
    m.scales = (uint16_t *)(w13 ? d->w13_scales : d->w2_scales);
    m.g_idx = (int32_t *)(w13 ? d->w13_g_idx : d->w2_g_idx);
    return m;
}

static void kit_project(const tk_matrix *m, int e, const double *x, double *y)
{
    int group = m->group_size == -1 ? m->in_features : m->group_size;
    for (int o = 0; o < m->out_features; o++) {
        double sum = 0.0;
        for (int k = 0; k < m->in_features; k++) {
            int g = m->g_idx ? m->g_idx[(size_t)e * m->in_features + k] : k / group;
            double value = (tk_matrix_code(m, e, o, k) - tk_matrix_packed_zero(m, e, g, o)) *
                           tk_matrix_scale(m, e, o, k); /* column k's group, g_idx's */
            sum += value * x[k];
        }
        y[o] = sum;
    }
}

/* Relative L2 error of sampled rows against the double reference (SiLU). */
static double check_rows(const ckpt_layer_run *r, moeint4_dtype dtype, int64_t tokens, int topk,
                         const void *hidden, const int32_t *ids, const float *weights,
                         const void *output)
{
    int K = r->info.hidden_size, N = r->info.intermediate_size;
    tk_matrix w13 = kit_view(&r->desc, 1), w2 = kit_view(&r->desc, 0);
    double *x = malloc(sizeof(double) * (size_t)K), *h = malloc(sizeof(double) * 3 * (size_t)N);
    double *y = malloc(sizeof(double) * (size_t)K), *ref = malloc(sizeof(double) * (size_t)K);
    double err = 0.0, norm = 0.0;
    if (!x || !h || !y || !ref) {
        err = -1.0;
        goto done;
    }
    int rows = tokens < CLI_SAMPLE_ROWS ? (int)tokens : CLI_SAMPLE_ROWS;
    for (int s = 0; s < rows; s++) {
        int64_t m = rows == 1 ? 0 : s * (tokens - 1) / (rows - 1);
        for (int k = 0; k < K; k++) {
            x[k] = tk_load(dtype, hidden, (size_t)m * K + k);
            ref[k] = 0.0;
        }
        for (int j = 0; j < topk; j++) {
            int e = ids[m * topk + j];
            kit_project(&w13, e, x, h);
            for (int n = 0; n < N; n++)
                h[2 * N + n] = h[n] / (1.0 + exp(-h[n])) * h[N + n];
            kit_project(&w2, e, h + 2 * N, y);
            for (int k = 0; k < K; k++)
                ref[k] += weights[m * topk + j] * y[k];
        }
        for (int k = 0; k < K; k++) {
            double d = tk_load(dtype, output, (size_t)m * K + k) - ref[k];
            err += d * d;
            norm += ref[k] * ref[k];
        }
    }
    err = norm > 0.0 ? sqrt(err / norm) : (err > 0.0 ? INFINITY : 0.0);
done:
    free(x);
    free(h);
    free(y);
    free(ref);
    return err;
}

typedef struct batch {
    void *hidden, *output;
    int32_t *ids;
    float *weights;
} batch;

static int batch_make(batch *b, const ckpt_layer_run *r, const cli_options *o, int64_t tokens)
{
    size_t values = (size_t)tokens * (size_t)r->info.hidden_size;
    size_t slots = (size_t)tokens * (size_t)r->info.top_k;
    b->hidden = malloc(values * tk_dtype_size(o->dtype));
    b->output = malloc(values * tk_dtype_size(o->dtype));
    b->ids = malloc(slots * sizeof *b->ids);
    b->weights = malloc(slots * sizeof *b->weights);
    if (!b->hidden || !b->output || !b->ids || !b->weights)
        return CLI_EXIT_FAILURE;
    tk_rng rng;
    tk_rng_seed(&rng, o->seed * 7919u + 17u);
    tk_fill_activations(&rng, o->dtype, values, 1.0, b->hidden);
    tk_route_random(&rng, tokens, r->info.num_experts, r->info.top_k, b->ids, b->weights);
    tk_poison(b->output, values * tk_dtype_size(o->dtype)); /* an unwritten value fails */
    return CLI_EXIT_OK;
}

static void batch_free(batch *b)
{
    free(b->hidden);
    free(b->output);
    free(b->ids);
    free(b->weights);
}

/* Where a forward reads and writes: the batch's host arrays, or device copies
 * of them (device backends get their inputs through moeint4_memory_*), made
 * once so that a timed forward times the forward only. */
typedef struct batch_place {
    void *hidden, *output, *ids, *weights;
    int on_device;
} batch_place;

static void batch_place_free(const ckpt_layer_run *r, batch_place *p)
{
    if (p->on_device) {
        moeint4_memory_free(r->ctx, p->hidden);
        moeint4_memory_free(r->ctx, p->output);
        moeint4_memory_free(r->ctx, p->ids);
        moeint4_memory_free(r->ctx, p->weights);
    }
    memset(p, 0, sizeof *p);
}

static moeint4_status batch_place_make(const ckpt_layer_run *r, const cli_options *o,
                                       int64_t tokens, const batch *b, batch_place *p)
{
    size_t act = (size_t)tokens * r->info.hidden_size * tk_dtype_size(o->dtype);
    size_t slots = (size_t)tokens * r->info.top_k;
    if (!r->backend.device_pointers) {
        *p = (batch_place){ b->hidden, b->output, b->ids, b->weights, 0 };
        return MOEINT4_SUCCESS;
    }
    *p = (batch_place){ NULL, NULL, NULL, NULL, 1 };
    moeint4_status s;
    if ((s = moeint4_memory_alloc(r->ctx, act, &p->hidden)) ||
        (s = moeint4_memory_alloc(r->ctx, act, &p->output)) ||
        (s = moeint4_memory_alloc(r->ctx, slots * 4, &p->ids)) ||
        (s = moeint4_memory_alloc(r->ctx, slots * 4, &p->weights)) ||
        (s = moeint4_memory_copy(r->ctx, p->hidden, b->hidden, act, MOEINT4_COPY_HOST_TO_DEVICE)) ||
        (s = moeint4_memory_copy(r->ctx, p->ids, b->ids, slots * 4, MOEINT4_COPY_HOST_TO_DEVICE)) ||
        (s = moeint4_memory_copy(r->ctx, p->weights, b->weights, slots * 4,
                                 MOEINT4_COPY_HOST_TO_DEVICE)))
        batch_place_free(r, p);
    return s;
}

static moeint4_status forward_at(const ckpt_layer_run *r, const cli_options *o, int64_t tokens,
                                 const batch_place *p)
{
    moeint4_forward_args a = { .struct_size = sizeof a,
                               .dtype = o->dtype,
                               .num_tokens = tokens,
                               .topk = r->info.top_k,
                               .hidden_states = p->hidden,
                               .topk_ids = p->ids,
                               .topk_weights = p->weights,
                               .output = p->output,
                               .activation = MOEINT4_ACTIVATION_SILU };
    return moeint4_forward(r->ctx, r->weights, &a);
}

/* One forward whose output lands in b->output. */
static moeint4_status forward_once(const ckpt_layer_run *r, const cli_options *o, int64_t tokens,
                                   batch *b)
{
    batch_place p;
    moeint4_status s = batch_place_make(r, o, tokens, b, &p);
    if (s == MOEINT4_SUCCESS)
        s = forward_at(r, o, tokens, &p);
    if (s == MOEINT4_SUCCESS && p.on_device)
        s = moeint4_memory_copy(r->ctx, b->output, p.output,
                                (size_t)tokens * r->info.hidden_size * tk_dtype_size(o->dtype),
                                MOEINT4_COPY_DEVICE_TO_HOST);
    batch_place_free(r, &p);
    return s;
}

int cli_checkpoint_run_main(const cli_options *o)
{
    ckpt_layer_run r;
    if (layer_run_open(&r, o) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    int64_t tokens = o->tokens[0];
    batch b = { 0 };
    int status = batch_make(&b, &r, o, tokens);
    printf("checkpoint: %s, layer %d: %d experts, top-k %d, K=%d N=%d, %s, group %d%s\n",
           o->checkpoint_path, o->layer, r.info.num_experts, r.info.top_k, r.info.hidden_size,
           r.info.intermediate_size, cli_format_name(r.info.format), r.info.group_size,
           r.info.act_order ? ", act-order" : "");
    printf("backend: %s, M=%lld, %s, silu, random routing (seed %llu)\n", r.backend.name,
           (long long)tokens, cli_dtype_name(o->dtype), (unsigned long long)o->seed);
    moeint4_status s =
        status == CLI_EXIT_OK ? forward_once(&r, o, tokens, &b) : MOEINT4_OUT_OF_MEMORY;
    if (s != MOEINT4_SUCCESS) {
        cli_print_failure("forward", s);
        status = CLI_EXIT_FAILURE;
    } else {
        double error =
            check_rows(&r, o->dtype, tokens, r.info.top_k, b.hidden, b.ids, b.weights, b.output);
        int rows = tokens < CLI_SAMPLE_ROWS ? (int)tokens : CLI_SAMPLE_ROWS;
        int ok = error >= 0.0 && error <= CLI_MAX_REL_ERROR;
        printf("check: rel-L2 error %.3e over %d sampled rows against the double reference: %s "
               "(limit %.0e)\n",
               error, rows, ok ? "ok" : "FAILED", CLI_MAX_REL_ERROR);
        status = ok ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    }
    batch_free(&b);
    layer_run_close(&r);
    return status;
}

int cli_checkpoint_bench_main(const cli_options *o)
{
    ckpt_layer_run r;
    if (layer_run_open(&r, o) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    printf("checkpoint: %s, layer %d (E=%d top-k %d K=%d N=%d %s g%d%s), backend %s, %s\n",
           o->checkpoint_path, o->layer, r.info.num_experts, r.info.top_k, r.info.hidden_size,
           r.info.intermediate_size, cli_format_name(r.info.format), r.info.group_size,
           r.info.act_order ? " act-order" : "", r.backend.name, cli_dtype_name(o->dtype));
    if (r.backend.device_pointers)
        printf("(device backend: inputs copied to the device once per M; each timed call is one "
               "synchronous forward)\n");
    printf("%8s %12s %12s\n", "M", "median ms", "min ms");
    int status = CLI_EXIT_OK;
    double *times = malloc(sizeof(double) * (size_t)o->iters);
    for (int t = 0; t < o->num_token_counts && status == CLI_EXIT_OK && times; t++) {
        batch b = { 0 };
        batch_place place = { 0 };
        if (batch_make(&b, &r, o, o->tokens[t]) != CLI_EXIT_OK) {
            status = CLI_EXIT_FAILURE;
        } else {
            moeint4_status s = batch_place_make(&r, o, o->tokens[t], &b, &place);
            if (s == MOEINT4_SUCCESS)
                s = forward_at(&r, o, o->tokens[t], &place); /* warm-up */
            for (int i = 0; i < o->iters && s == MOEINT4_SUCCESS; i++) {
                double start = cli_now();
                s = forward_at(&r, o, o->tokens[t], &place);
                times[i] = cli_now() - start;
            }
            batch_place_free(&r, &place);
            if (s != MOEINT4_SUCCESS) {
                cli_print_failure("forward", s);
                status = CLI_EXIT_FAILURE;
            } else {
                double best = times[0];
                for (int i = 1; i < o->iters; i++)
                    best = times[i] < best ? times[i] : best;
                printf("%8lld %12.3f %12.3f\n", (long long)o->tokens[t],
                       1e3 * cli_median(times, o->iters), 1e3 * best);
            }
        }
        batch_free(&b);
    }
    if (!times)
        status = CLI_EXIT_FAILURE;
    free(times);
    layer_run_close(&r);
    return status;
}
