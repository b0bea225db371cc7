/* Test kit: tests/data/vllm (cases produced by vLLM's own helpers) loaded
 * into a tk_layer from their natural-order debug arrays, packed by the kit's
 * packer (so comparing with the checkpoint arrays tests the packer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit.h"

#ifndef MOEINT4_VECTORS_DIR
#error "MOEINT4_VECTORS_DIR must name tests/data/vllm (tests/kit/CMakeLists.txt sets it)"
#endif

void *tk_read_vector(const char *relative_path, size_t *bytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", MOEINT4_VECTORS_DIR, relative_path);
    FILE *file = fopen(path, "rb");
    if (!file) {
        /* Name the file: a checkout without its test data must say what is missing. */
        fprintf(stderr, "test data file missing or unreadable: %s\n", path);
        return NULL;
    }
    void *data = NULL;
    long size = -1;
    if (fseek(file, 0, SEEK_END) == 0 && (size = ftell(file)) >= 0 && fseek(file, 0, SEEK_SET) == 0)
        data = malloc(size > 0 ? (size_t)size : 1);
    if (data && fread(data, 1, (size_t)size, file) != (size_t)size) {
        free(data);
        data = NULL;
    }
    fclose(file);
    if (data && bytes)
        *bytes = (size_t)size;
    return data;
}

/* Parameters from manifest.json. */
static const tk_vector_params vector_cases[] = {
    { "case1_gptq_sym_g128", MOEINT4_FORMAT_GPTQ_SYM, 4, 256, 128, 128, 7, 2 },
    { "case3_awq_asym_g64", MOEINT4_FORMAT_AWQ, 3, 128, 64, 64, 4, 3 },
};

const tk_vector_params *tk_vector_case_params(int index)
{
    int count = (int)(sizeof vector_cases / sizeof vector_cases[0]);
    return index >= 0 && index < count ? &vector_cases[index] : NULL;
}

/* Reads <case>/<array>.bin, which must hold exactly `bytes` bytes. */
void *tk_read_vector_array(const char *case_name, const char *array, size_t bytes)
{
    char path[512];
    size_t got = 0;
    snprintf(path, sizeof path, "%s/%s.bin", case_name, array);
    void *data = tk_read_vector(path, &got);
    if (data && got != bytes) {
        fprintf(stderr, "test data file %s/%s holds %zu bytes, expected %zu\n", MOEINT4_VECTORS_DIR,
                path, got, bytes);
        free(data);
        data = NULL;
    }
    return data;
}

/* codes [E][IN][OUT] (checkpoint orientation) -> the kit's [E][OUT][IN]. */
static int load_matrix(tk_matrix *m, const char *case_name, const char *which,
                       const tk_vector_params *p, int in, int out)
{
    char array[64];
    size_t weights = (size_t)p->num_experts * (size_t)in * (size_t)out;
    if (tk_matrix_alloc(m, p->format, 0, p->num_experts, in, out, p->group_size, MOEINT4_DTYPE_F16,
                        0) != 0)
        return -1;
    size_t groups = (size_t)p->num_experts * (size_t)m->num_groups * (size_t)out;
    snprintf(array, sizeof array, "debug_%s_q_natural", which);
    uint8_t *codes = tk_read_vector_array(case_name, array, weights);
    snprintf(array, sizeof array, "%s_scales", which);
    uint16_t *scales = tk_read_vector_array(case_name, array, groups * 2);
    uint8_t *zeros = NULL;
    if (p->format != MOEINT4_FORMAT_GPTQ_SYM) {
        snprintf(array, sizeof array, "debug_%s_zero_natural", which);
        zeros = tk_read_vector_array(case_name, array, groups);
    }
    int ok = codes && scales && (zeros || p->format == MOEINT4_FORMAT_GPTQ_SYM);
    if (ok) {
        for (int e = 0; e < p->num_experts; e++)
            for (int i = 0; i < in; i++)
                for (int o = 0; o < out; o++)
                    m->codes[((size_t)e * out + o) * in + i] =
                        codes[((size_t)e * in + i) * out + o];
        memcpy(m->scales, scales, groups * 2);
        if (zeros)
            memcpy(m->zeros, zeros, groups);
        else
            memset(m->zeros, 8, groups);
        tk_matrix_pack(m);
    }
    free(codes);
    free(scales);
    free(zeros);
    if (!ok)
        tk_matrix_free(m);
    return ok ? 0 : -1;
}

int tk_vector_case_load(tk_vector_case *c, const tk_vector_params *p)
{
    memset(c, 0, sizeof *c);
    c->params = p;
    tk_layer *layer = &c->layer;
    layer->num_experts = layer->num_local_experts = p->num_experts;
    layer->hidden_size = p->hidden_size;
    layer->intermediate_size = p->intermediate_size;
    layer->group_size = p->group_size;
    layer->format = p->format;
    size_t tokens = (size_t)p->num_tokens, k = (size_t)p->hidden_size, slots = tokens * p->topk;
    c->hidden = tk_read_vector_array(p->name, "hidden", tokens * k * 2);
    c->topk_ids = tk_read_vector_array(p->name, "topk_ids", slots * 4);
    c->topk_weights = tk_read_vector_array(p->name, "topk_weights", slots * 4);
    c->ref_out = tk_read_vector_array(p->name, "ref_out_f32", tokens * k * 4);
    if (!c->hidden || !c->topk_ids || !c->topk_weights || !c->ref_out ||
        load_matrix(&layer->w13, p->name, "w13", p, p->hidden_size, 2 * p->intermediate_size) ||
        load_matrix(&layer->w2, p->name, "w2", p, p->intermediate_size, p->hidden_size)) {
        tk_vector_case_free(c);
        return -1;
    }
    return 0;
}

void tk_vector_case_free(tk_vector_case *c)
{
    tk_layer_free(&c->layer);
    free(c->hidden);
    free(c->topk_ids);
    free(c->topk_weights);
    free(c->ref_out);
    memset(c, 0, sizeof *c);
}
