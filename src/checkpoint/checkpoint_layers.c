/* Finding the MoE layers of a checkpoint and checking every expert tensor's
 * dtype and shape against the config (headers only, plus g_idx to tell
 * act-order). What is quantized is decided from the tensors: an expert
 * projection is int4 when it has an I32 qweight; a float .weight there means
 * the checkpoint is not quantized, whatever the config says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/checkpoint.h"
#include "base/alloc.h"
#include "base/error.h"

#define NAME_CAP 256

static const char *const part_names[4] = { "qweight", "scales", "qzeros", "g_idx" };

static void shape_text(const mi4_st_tensor *t, char *buf, size_t cap)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && used < cap; d++)
        used +=
            (size_t)snprintf(buf + used, cap - used, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
}

/* A tensor of exactly `ndim` sizes `shape` (with `lead` > 0 prepended) and one of
 * two dtypes. */
static moeint4_status expect_tensor(const mi4_ckpt_ref *r, mi4_st_dtype d1, mi4_st_dtype d2,
                                    int lead, int64_t rows, int64_t cols, const char *why)
{
    const mi4_st_tensor *t = r->tensor;
    if (t->dtype != d1 && t->dtype != d2)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: tensor \"%s\" has dtype %s, expected %s%s%s",
                        r->file->label, t->name, mi4_st_dtype_name(t->dtype), mi4_st_dtype_name(d1),
                        d1 != d2 ? " or " : "", d1 != d2 ? mi4_st_dtype_name(d2) : "");
    int64_t want[3];
    int n = 0;
    if (lead > 0)
        want[n++] = lead;
    want[n++] = rows;
    if (cols >= 0)
        want[n++] = cols;
    int ok = t->ndim == n;
    for (int i = 0; ok && i < n; i++)
        ok = t->shape[i] == want[i];
    if (ok)
        return MOEINT4_SUCCESS;
    char got[96], exp[96];
    shape_text(t, got, sizeof got);
    mi4_st_tensor fake = { .ndim = n };
    memcpy(fake.shape, want, sizeof(int64_t) * (size_t)n);
    shape_text(&fake, exp, sizeof exp);
    return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: tensor \"%s\" has shape %s, expected %s (%s)",
                    r->file->label, t->name, got, exp, why);
}

static int32_t load_i32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* 1 when g_idx[k] != k / group somewhere. */
static int g_idx_nontrivial(const uint8_t *data, int64_t count, int in, int group)
{
    for (int64_t i = 0; i < count; i++)
        if (load_i32(data + 4 * i) != (int32_t)((i % in) / group))
            return 1;
    return 0;
}

typedef struct proj_geometry {
    int in, out, groups;
    const char *role; /* "gate_proj (IN = K = 2048, OUT = N = 768)" */
} proj_geometry;

/* Checks the four parts of one projection (lead = E for fused tensors). */
static moeint4_status check_proj(const moeint4_checkpoint *ck, const mi4_ckpt_proj *p, int lead,
                                 const proj_geometry *g, mi4_st_dtype scales_dtype)
{
    int awq = ck->format == MOEINT4_FORMAT_AWQ;
    char why[160];
    snprintf(why, sizeof why, "%s, %s", g->role,
             awq ? "AWQ qweight [IN, OUT/8]" : "GPTQ qweight [IN/8, OUT]");
    moeint4_status s = expect_tensor(p->qweight, MI4_ST_I32, MI4_ST_I32, lead,
                                     awq ? g->in : g->in / 8, awq ? g->out / 8 : g->out, why);
    snprintf(why, sizeof why, "%s, scales [G, OUT] with G = %d", g->role, g->groups);
    if (s == MOEINT4_SUCCESS)
        s = expect_tensor(p->scales, scales_dtype, scales_dtype, lead, g->groups, g->out, why);
    snprintf(why, sizeof why, "%s, qzeros [G, OUT/8]", g->role);
    if (s == MOEINT4_SUCCESS && p->qzeros)
        s = expect_tensor(p->qzeros, MI4_ST_I32, MI4_ST_I32, lead, g->groups, g->out / 8, why);
    snprintf(why, sizeof why, "%s, g_idx [IN]", g->role);
    if (s == MOEINT4_SUCCESS && p->g_idx)
        s = expect_tensor(p->g_idx, MI4_ST_I32, MI4_ST_I32, lead, g->in, -1, why);
    if (s == MOEINT4_SUCCESS && !p->qzeros && ck->format != MOEINT4_FORMAT_GPTQ_SYM)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\" has no qzeros next to it (%s is asymmetric)",
                        p->qweight->file->label, p->qweight->tensor->name,
                        awq ? "AWQ" : "GPTQ sym = false");
    return s;
}

/* Looks up <base>.{qweight,scales,qzeros,g_idx}. qweight missing: the caller
 * decides what that means (*proj->qweight NULL). */
static moeint4_status find_proj(const moeint4_checkpoint *ck, const char *base, mi4_ckpt_proj *p)
{
    const mi4_ckpt_ref **parts[4] = { &p->qweight, &p->scales, &p->qzeros, &p->g_idx };
    char name[NAME_CAP + 64];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", base, part_names[i]);
        *parts[i] = mi4_ckpt_find(ck, name);
    }
    if (p->qweight && !p->scales)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: tensor \"%s\" has no %s.scales",
                        p->qweight->file->label, p->qweight->tensor->name, base);
    return MOEINT4_SUCCESS;
}

/* A projection without qweight: unquantized (a float .weight) or missing. */
static moeint4_status missing_proj(const moeint4_checkpoint *ck, const char *base, const char *what)
{
    char name[NAME_CAP + 64];
    snprintf(name, sizeof name, "%s.weight", base);
    const mi4_ckpt_ref *dense = mi4_ckpt_find(ck, name);
    if (dense)
        return mi4_fail(MOEINT4_UNSUPPORTED,
                        "%s: tensor \"%s\" is stored unquantized (%s), so this is not a "
                        "quantized MoE checkpoint (%s)",
                        dense->file->label, name, mi4_st_dtype_name(dense->tensor->dtype), what);
    return mi4_fail(MOEINT4_INVALID_ARGUMENT, "tensor \"%s.qweight\" is missing (%s)", base, what);
}

/* group size from the first scales tensor: G rows over IN inputs. */
static moeint4_status group_size_of(moeint4_checkpoint *ck, const mi4_ckpt_ref *scales, int lead,
                                    int in, int *group_size)
{
    const mi4_st_tensor *t = scales->tensor;
    int64_t groups = t->ndim == 2 + (lead > 0) ? t->shape[lead > 0] : 0;
    if (groups <= 0 || in <= 0 || in % groups != 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: tensor \"%s\": %lld scale groups do not divide IN = %d",
                        scales->file->label, t->name, (long long)groups, in);
    int from_tensors = groups == 1 && ck->quant.group_size != in ? -1 : in / (int)groups;
    int from_config = ck->quant.group_size;
    if (from_config != 0 && from_config != from_tensors)
        mi4_ckpt_warn(ck,
                      "%s: group_size %d from the config, but \"%s\" has %lld groups over "
                      "%d inputs: using %d (the tensors)",
                      ck->quant.source, from_config, t->name, (long long)groups, in, from_tensors);
    *group_size = from_tensors;
    return MOEINT4_SUCCESS;
}

static void geometry(proj_geometry *g, char *role, size_t cap, const char *name, int in, int out,
                     int group_size, const char *in_name, const char *out_name)
{
    snprintf(role, cap, "%s: IN = %s = %d, OUT = %s = %d", name, in_name, in, out_name, out);
    g->in = in;
    g->out = out;
    g->groups = group_size == -1 ? 1 : in / group_size;
    g->role = role;
}

static size_t proj_bytes(const mi4_ckpt_proj *p)
{
    return p->qweight->tensor->bytes + p->scales->tensor->bytes +
           (p->qzeros ? p->qzeros->tensor->bytes : 0) + (p->g_idx ? p->g_idx->tensor->bytes : 0);
}

/* Act-order: any non-trivial g_idx; gate and up must share theirs (w13 has one). */
static moeint4_status read_act_order(moeint4_checkpoint *ck, mi4_ckpt_experts *x)
{
    int projections = x->fused ? 2 : 3;
    for (int e = 0; e < (x->fused ? 1 : x->num_experts); e++) {
        const mi4_ckpt_proj *p = &x->proj[e * projections];
        for (int j = 0; j < projections; j++) {
            if (!p[j].g_idx)
                continue;
            int in = (j == projections - 1) ? x->intermediate_size : x->hidden_size;
            int group = x->group_size == -1 ? in : x->group_size;
            const mi4_st_tensor *t = p[j].g_idx->tensor;
            if (g_idx_nontrivial(t->data, (int64_t)(t->bytes / 4), in, group))
                x->act_order = 1;
        }
        if (!x->fused && (p[0].g_idx != NULL) != (p[1].g_idx != NULL))
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "%s.%d: gate and up projections disagree on having a g_idx", x->prefix,
                            e);
        if (!x->fused && p[0].g_idx &&
            memcmp(p[0].g_idx->tensor->data, p[1].g_idx->tensor->data, p[0].g_idx->tensor->bytes) !=
                0)
            return mi4_fail(MOEINT4_UNSUPPORTED,
                            "%s: tensors \"%s\" and \"%s\" differ: gate and up of one expert must "
                            "share their act-order (they have the same input)",
                            p[1].g_idx->file->label, p[0].g_idx->tensor->name,
                            p[1].g_idx->tensor->name);
    }
    if (x->act_order && ck->quant.desc_act == 0)
        mi4_ckpt_warn(ck,
                      "%s: desc_act = false in %s, but the g_idx tensors are act-order: "
                      "going by the tensors",
                      x->prefix, ck->quant.source);
    return MOEINT4_SUCCESS;
}

/* The routed experts (per expert, or fused) or a shared MLP (one expert at
 * `x->prefix`, no expert number). */
static moeint4_status open_experts(moeint4_checkpoint *ck, const mi4_ckpt_layer *l,
                                   mi4_ckpt_experts *x, int shared)
{
    const mi4_family *f = ck->model.family;
    int K = x->hidden_size, N = x->intermediate_size, E = x->num_experts;
    char name[NAME_CAP + 64];
    snprintf(name, sizeof name, "%s.%s.qweight", x->prefix, f->fused_w13);
    x->fused = !shared && mi4_ckpt_find(ck, name) != NULL;
    int projections = x->fused ? 2 : 3;
    size_t count = x->fused ? 2 : (size_t)E * 3;
    x->proj = mi4_calloc(count, sizeof *x->proj);
    if (!x->proj)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory for layer %d's tensor table", l->layer);
    moeint4_status s = MOEINT4_SUCCESS;
    for (int e = 0; e < (x->fused ? 1 : E) && s == MOEINT4_SUCCESS; e++)
        for (int j = 0; j < projections && s == MOEINT4_SUCCESS; j++) {
            char base[NAME_CAP];
            const char *proj = x->fused ? (j == 0 ? f->fused_w13 : f->fused_w2) : f->proj[j];
            if (shared || x->fused)
                snprintf(base, sizeof base, "%s.%s", x->prefix, proj);
            else
                snprintf(base, sizeof base, "%s.%d.%s", x->prefix, e, proj);
            mi4_ckpt_proj *p = &x->proj[e * projections + j];
            s = find_proj(ck, base, p);
            if (s != MOEINT4_SUCCESS || p->qweight)
                continue;
            if (shared && j == 0) {
                x->num_experts = 0; /* dense shared MLP: the caller reads its .weight */
                return MOEINT4_SUCCESS;
            }
            char what[200];
            if (!shared && !x->fused && j > 0) {
                snprintf(what, sizeof what, "expert %d of layer %d: %s is int4, %s is not", e,
                         l->layer, f->proj[0], proj);
            } else if (!shared && !x->fused) {
                int present = 0;
                for (int other = 0; other < E; other++) {
                    snprintf(name, sizeof name, "%s.%d.%s.qweight", x->prefix, other, f->proj[0]);
                    present += mi4_ckpt_find(ck, name) != NULL;
                }
                snprintf(what, sizeof what,
                         "expert %d of layer %d is missing: config.json's %s says %d experts, "
                         "the checkpoint has %d",
                         e, l->layer, ck->model.experts_key, E, present);
            } else {
                snprintf(what, sizeof what, "layer %d", l->layer);
            }
            s = missing_proj(ck, base, what);
        }
    if (s != MOEINT4_SUCCESS)
        return s;
    int lead = x->fused ? E : 0;
    s = group_size_of(ck, x->proj[0].scales, lead, K, &x->group_size);
    if (s != MOEINT4_SUCCESS)
        return s; /* x->group_size unset: geometry() divides by it */
    x->scales_dtype = x->proj[0].scales->tensor->dtype;
    if (x->scales_dtype != MI4_ST_F16 && x->scales_dtype != MI4_ST_BF16)
        return mi4_fail(MOEINT4_UNSUPPORTED,
                        "%s: tensor \"%s\": scales of dtype %s (F16 or BF16 are served)",
                        x->proj[0].scales->file->label, x->proj[0].scales->tensor->name,
                        mi4_st_dtype_name(x->scales_dtype));
    char roles[3][96];
    proj_geometry g[3];
    if (x->fused) {
        geometry(&g[0], roles[0], sizeof roles[0], f->fused_w13, K, 2 * N, x->group_size, "K",
                 "2N");
        geometry(&g[1], roles[1], sizeof roles[1], f->fused_w2, N, K, x->group_size, "N", "K");
    } else {
        geometry(&g[0], roles[0], sizeof roles[0], f->proj[0], K, N, x->group_size, "K", "N");
        geometry(&g[1], roles[1], sizeof roles[1], f->proj[1], K, N, x->group_size, "K", "N");
        geometry(&g[2], roles[2], sizeof roles[2], f->proj[2], N, K, x->group_size, "N", "K");
    }
    for (int e = 0; e < (x->fused ? 1 : E) && s == MOEINT4_SUCCESS; e++)
        for (int j = 0; j < projections && s == MOEINT4_SUCCESS; j++) {
            const mi4_ckpt_proj *p = &x->proj[e * projections + j];
            s = check_proj(ck, p, lead, &g[j], x->scales_dtype);
            x->stored_bytes += proj_bytes(p);
        }
    if (s == MOEINT4_SUCCESS)
        s = read_act_order(ck, x);
    return s;
}

static int by_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Layer numbers L with a tensor "model.layers.L.<block>.experts.*". */
static moeint4_status find_layer_numbers(moeint4_checkpoint *ck, int **out, int *count)
{
    const char *block = ck->model.family->block;
    int cap = ck->model.num_hidden_layers > 0 ? ck->model.num_hidden_layers : 1;
    int *numbers = mi4_malloc(sizeof(int) * (size_t)cap);
    if (!numbers)
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory");
    int n = 0;
    static const char prefix[] = "model.layers.";
    for (size_t i = 0; i < ck->num_refs; i++) {
        const char *name = ck->refs[i].tensor->name;
        if (strncmp(name, prefix, sizeof prefix - 1) != 0)
            continue;
        char *rest;
        long layer = strtol(name + sizeof prefix - 1, &rest, 10);
        size_t bl = strlen(block);
        if (rest == name + sizeof prefix - 1 || *rest != '.' || strncmp(rest + 1, block, bl) != 0 ||
            strncmp(rest + 1 + bl, ".experts.", 9) != 0)
            continue;
        if (layer < 0 || layer >= ck->model.num_hidden_layers) {
            mi4_free(numbers);
            return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                            "%s: tensor \"%s\": layer %ld is outside config.json's "
                            "num_hidden_layers = %d",
                            ck->refs[i].file->label, name, layer, ck->model.num_hidden_layers);
        }
        int seen = 0;
        for (int j = 0; j < n && !seen; j++)
            seen = numbers[j] == (int)layer;
        if (!seen)
            numbers[n++] = (int)layer;
    }
    qsort(numbers, (size_t)n, sizeof(int), by_int);
    *out = numbers;
    *count = n;
    return MOEINT4_SUCCESS;
}

static moeint4_status open_layer(moeint4_checkpoint *ck, mi4_ckpt_layer *l)
{
    const mi4_family *f = ck->model.family;
    const mi4_model_config *m = &ck->model;
    snprintf(l->block, sizeof l->block, "model.layers.%d.%s", l->layer, f->block);
    if (l->layer < m->first_dense)
        mi4_ckpt_warn(ck,
                      "layer %d has routed experts, but first_k_dense_replace = %d says it "
                      "is dense",
                      l->layer, m->first_dense);
    char name[NAME_CAP + 64];
    snprintf(name, sizeof name, "%s.%s.weight", l->block, f->router);
    l->router = mi4_ckpt_find(ck, name);
    if (!l->router)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "layer %d: router tensor \"%s\" is missing",
                        l->layer, name);
    if (l->router->tensor->dtype != MI4_ST_F32 && l->router->tensor->dtype != MI4_ST_F16 &&
        l->router->tensor->dtype != MI4_ST_BF16)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: router tensor \"%s\" has dtype %s (a float dtype expected)",
                        l->router->file->label, name, mi4_st_dtype_name(l->router->tensor->dtype));
    mi4_ckpt_experts *x = &l->routed;
    snprintf(x->prefix, sizeof x->prefix, "%s.experts", l->block);
    x->num_experts = m->num_experts;
    x->hidden_size = m->hidden_size;
    x->intermediate_size = m->intermediate_size;
    moeint4_status s = open_experts(ck, l, x, 0);
    if (s != MOEINT4_SUCCESS || !f->shared_block)
        return s;
    if (f->shared_gate) {
        snprintf(name, sizeof name, "%s.%s.weight", l->block, f->shared_gate);
        l->shared_gate = mi4_ckpt_find(ck, name);
    }
    snprintf(l->shared_prefix, sizeof l->shared_prefix, "%s.%s", l->block, f->shared_block);
    snprintf(name, sizeof name, "%s.%s.", l->shared_prefix, f->proj[0]);
    if (!mi4_ckpt_find_prefix(ck, name)) {
        l->shared_prefix[0] = '\0';
        return MOEINT4_SUCCESS;
    }
    l->has_shared = 1;
    mi4_ckpt_experts *sx = &l->shared;
    snprintf(sx->prefix, sizeof sx->prefix, "%s", l->shared_prefix);
    sx->num_experts = 1;
    sx->hidden_size = m->hidden_size;
    sx->intermediate_size = m->shared_intermediate_size;
    if (sx->intermediate_size <= 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "layer %d has a shared expert (%s) but config.json gives no size for it",
                        l->layer, l->shared_prefix);
    s = open_experts(ck, l, sx, 1);
    l->shared_quantized = sx->num_experts == 1;
    return s;
}

const mi4_ckpt_layer *mi4_ckpt_layer_find(const moeint4_checkpoint *ck, int layer)
{
    for (int i = 0; i < ck->num_layers; i++)
        if (ck->layers[i].layer == layer)
            return &ck->layers[i];
    return NULL;
}

static void set_format(moeint4_checkpoint *ck)
{
    const mi4_quant_config *q = &ck->quant;
    if (strcmp(q->method, "awq") == 0) {
        ck->format = MOEINT4_FORMAT_AWQ;
        ck->zeros = MOEINT4_ZEROS_AWQ;
        ck->zero_offset = 0;
        return;
    }
    ck->format = q->sym ? MOEINT4_FORMAT_GPTQ_SYM : MOEINT4_FORMAT_GPTQ_ASYM;
    ck->zeros = q->gptq_v2 ? MOEINT4_ZEROS_GPTQ_V2 : MOEINT4_ZEROS_GPTQ_V1;
    ck->zero_offset = !q->sym && !q->gptq_v2 ? 1 : 0;
}

/* No quantization description: say whether the tensors are int4 or float. */
static moeint4_status not_described(const moeint4_checkpoint *ck, int first_layer)
{
    const mi4_family *f = ck->model.family;
    char base[NAME_CAP];
    snprintf(base, sizeof base, "model.layers.%d.%s.experts.0.%s", first_layer, f->block,
             f->proj[0]);
    char name[NAME_CAP + 64];
    snprintf(name, sizeof name, "%s.qweight", base);
    if (mi4_ckpt_find(ck, name))
        return mi4_fail(
            MOEINT4_UNSUPPORTED,
            "the checkpoint has int4 tensors (\"%s\") but no quantization description "
            "(config.json quantization_config, quantize_config.json, quant_config.json): "
            "pass one in options.quantization_json",
            name);
    return missing_proj(ck, base, "and it has no quantization description");
}

/* modules_to_not_convert naming a module the tensors store as int4 (the
 * experts' projections, the experts block): the tensors win, with a warning. */
static void check_skipped_modules(moeint4_checkpoint *ck)
{
    const mi4_family *f = ck->model.family;
    const mi4_ckpt_layer *l = &ck->layers[0];
    for (int i = 0; i < ck->quant.num_skipped; i++) {
        const char *name = ck->quant.skipped[i];
        int hit = strcmp(name, "experts") == 0;
        for (int j = 0; j < 3 && !hit; j++)
            hit = strcmp(name, f->proj[j]) == 0;
        if (hit)
            mi4_ckpt_warn(ck,
                          "%s: modules_to_not_convert lists \"%s\", but \"%s\" is stored as "
                          "int4 (%s): going by the tensors",
                          ck->quant.source, name, l->routed.proj[0].qweight->tensor->name,
                          l->routed.proj[0].qweight->file->label);
    }
}

moeint4_status mi4_ckpt_discover_layers(moeint4_checkpoint *ck)
{
    int *numbers = NULL, count = 0;
    moeint4_status s = find_layer_numbers(ck, &numbers, &count);
    if (s != MOEINT4_SUCCESS)
        return s;
    if (count == 0) {
        mi4_free(numbers);
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "no tensor named model.layers.L.%s.experts.* in %d file(s): no MoE layer "
                        "for model_type %s",
                        ck->model.family->block, ck->num_files, ck->model.family->model_type);
    }
    if (!ck->quant.present) {
        s = not_described(ck, numbers[0]);
        mi4_free(numbers);
        return s;
    }
    set_format(ck);
    ck->layers = mi4_calloc((size_t)count, sizeof *ck->layers);
    if (!ck->layers) {
        mi4_free(numbers);
        return mi4_fail(MOEINT4_OUT_OF_MEMORY, "no memory for %d layers", count);
    }
    ck->num_layers = count;
    for (int i = 0; i < count; i++)
        ck->layers[i].layer = numbers[i];
    mi4_free(numbers);
    for (int i = 0; i < count && s == MOEINT4_SUCCESS; i++)
        s = open_layer(ck, &ck->layers[i]);
    if (s == MOEINT4_SUCCESS)
        check_skipped_modules(ck);
    return s;
}
