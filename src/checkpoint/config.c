/* Parsing config.json and quantization descriptions with cJSON. Values are
 * checked for type and range; a missing key the family needs is an error
 * naming it. */
#include "checkpoint/config.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/error.h"

static void copy_string(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* An integer member: 1 found, 0 absent, -1 present but not an integer. */
static int get_int(const cJSON *obj, const char *key, int *value)
{
    const cJSON *item = key ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!item || cJSON_IsNull(item))
        return 0;
    /* range first: casting a double outside int's range is undefined */
    double v = cJSON_IsNumber(item) ? item->valuedouble : 0.5;
    if (!(v >= (double)INT_MIN && v <= (double)INT_MAX) || v != (double)(int)v)
        return -1;
    *value = (int)v;
    return 1;
}

static int get_bool(const cJSON *obj, const char *key, int fallback)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsBool(item))
        return cJSON_IsTrue(item);
    return fallback;
}

static const char *get_string(const cJSON *obj, const char *key)
{
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

static moeint4_status need_int(const char *label, const cJSON *obj, const char *key, int min,
                               int *value)
{
    int found = get_int(obj, key, value);
    if (found == 1 && *value >= min)
        return MOEINT4_SUCCESS;
    return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: \"%s\" is %s (an integer >= %d is needed)",
                    label, key, found == 0 ? "missing" : "not a valid value", min);
}

/* need_int over "a|b" alternatives (the first present wins); the key used
 * goes to `used` (for messages). */
static moeint4_status need_int_any(const char *label, const cJSON *obj, const char *keys, int min,
                                   int *value, char *used, size_t used_cap)
{
    char key[64];
    const char *at = keys;
    for (;;) {
        const char *bar = strchr(at, '|');
        size_t len = bar ? (size_t)(bar - at) : strlen(at);
        snprintf(key, sizeof key, "%.*s", (int)len, at);
        if (!bar || cJSON_GetObjectItemCaseSensitive(obj, key))
            break;
        at = bar + 1;
    }
    snprintf(used, used_cap, "%.*s", (int)(used_cap - 1), key);
    return need_int(label, obj, key, min, value);
}

static moeint4_status parse_quant_object(const char *label, const cJSON *q, const char *source,
                                         mi4_quant_config *quant)
{
    memset(quant, 0, sizeof *quant);
    if (!cJSON_IsObject(q))
        return mi4_fail(MOEINT4_INVALID_ARGUMENT,
                        "%s: the quantization description is not an object", label);
    quant->present = 1;
    quant->desc_act = -1;
    quant->sym = 1;
    copy_string(quant->source, sizeof quant->source, source);
    const char *method = get_string(q, "quant_method");
    int is_awq_file = cJSON_GetObjectItemCaseSensitive(q, "w_bit") != NULL;
    if (is_awq_file)
        method = "awq";
    else if (!method)
        method = "gptq"; /* AutoGPTQ's quantize_config.json has no quant_method */
    if (strcasecmp(method, "gptq") != 0 && strcasecmp(method, "awq") != 0)
        return mi4_fail(MOEINT4_UNSUPPORTED,
                        "%s: quant_method \"%s\" is not served (gptq and awq int4 only)", label,
                        method);
    copy_string(quant->method, sizeof quant->method, method);
    for (char *c = quant->method; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
    const char *bits_key = is_awq_file ? "w_bit" : "bits";
    const char *group_key = is_awq_file ? "q_group_size" : "group_size";
    moeint4_status status = need_int(label, q, bits_key, 1, &quant->bits);
    if (status != MOEINT4_SUCCESS)
        return status;
    if (quant->bits != 4)
        return mi4_fail(MOEINT4_UNSUPPORTED, "%s: %s = %d: only 4-bit weights are served", label,
                        bits_key, quant->bits);
    if (get_int(q, group_key, &quant->group_size) < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: \"%s\" is not an integer", label, group_key);
    if (strcmp(quant->method, "gptq") == 0) {
        quant->sym = get_bool(q, "sym", 1);
        quant->desc_act = get_bool(q, "desc_act", -1);
        const char *format = get_string(q, "checkpoint_format");
        if (format && strcmp(format, "gptq_v2") == 0)
            quant->gptq_v2 = 1;
        else if (format && strcmp(format, "gptq") != 0)
            return mi4_fail(MOEINT4_UNSUPPORTED,
                            "%s: checkpoint_format \"%s\" is not served (gptq or gptq_v2)", label,
                            format);
    } else {
        quant->zero_point = get_bool(q, "zero_point", 1);
        const char *version = get_string(q, "version");
        copy_string(quant->awq_version, sizeof quant->awq_version, version ? version : "gemm");
        if (strcasecmp(quant->awq_version, "gemm") != 0)
            return mi4_fail(MOEINT4_UNSUPPORTED, "%s: AWQ version \"%s\" is not served (GEMM only)",
                            label, quant->awq_version);
        if (!quant->zero_point)
            return mi4_fail(MOEINT4_UNSUPPORTED,
                            "%s: AWQ without zero points (zero_point = false) is not served",
                            label);
    }
    const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(q, "modules_to_not_convert");
    const cJSON *list = cJSON_IsArray(skipped) ? skipped : (const cJSON *)NULL;
    const cJSON *item;
    cJSON_ArrayForEach(item, list)
    {
        if (cJSON_IsString(item) && quant->num_skipped < MI4_CONFIG_MAX_SKIPPED)
            copy_string(quant->skipped[quant->num_skipped++], sizeof quant->skipped[0],
                        item->valuestring);
    }
    return MOEINT4_SUCCESS;
}

static cJSON *parse_object(const char *label, const char *text, size_t length,
                           moeint4_status *status)
{
    cJSON *root = cJSON_ParseWithLength(text, length);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        *status = mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: not a JSON object", label);
        return NULL;
    }
    *status = MOEINT4_SUCCESS;
    return root;
}

moeint4_status mi4_config_parse_quant(const char *label, const char *text, size_t length,
                                      mi4_quant_config *quant)
{
    moeint4_status status;
    cJSON *root = parse_object(label, text, length, &status);
    if (!root)
        return status;
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    status = parse_quant_object(label, inner ? inner : root, label, quant);
    cJSON_Delete(root);
    return status;
}

static moeint4_status parse_model(const char *label, const cJSON *root, mi4_model_config *m)
{
    memset(m, 0, sizeof *m);
    copy_string(m->model_type, sizeof m->model_type, get_string(root, "model_type"));
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (cJSON_IsArray(arch) && cJSON_IsString(cJSON_GetArrayItem(arch, 0)))
        copy_string(m->architecture, sizeof m->architecture,
                    cJSON_GetArrayItem(arch, 0)->valuestring);
    m->family = mi4_family_find(m->model_type[0] ? m->model_type : NULL,
                                m->architecture[0] ? m->architecture : NULL);
    if (!m->family) {
        char known[256];
        mi4_family_list(known, sizeof known);
        return mi4_fail(MOEINT4_UNSUPPORTED,
                        "%s: architecture \"%s\" (model_type \"%s\") is not a known MoE family "
                        "(known: %s)",
                        label, m->architecture, m->model_type, known);
    }
    const mi4_family *f = m->family;
    moeint4_status status;
    if ((status = need_int(label, root, "num_hidden_layers", 1, &m->num_hidden_layers)) ||
        (status = need_int(label, root, "hidden_size", 1, &m->hidden_size)) ||
        (status = need_int_any(label, root, f->key_experts, 1, &m->num_experts, m->experts_key,
                               sizeof m->experts_key)) ||
        (status = need_int(label, root, f->key_top_k, 1, &m->top_k)) ||
        (status = need_int(label, root, f->key_intermediate, 1, &m->intermediate_size)))
        return status;
    if (f->key_shared_intermediate &&
        get_int(root, f->key_shared_intermediate, &m->shared_intermediate_size) < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: \"%s\" is not an integer", label,
                        f->key_shared_intermediate);
    if (f->key_shared_count && get_int(root, f->key_shared_count, &m->shared_count) < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: \"%s\" is not an integer", label,
                        f->key_shared_count);
    if (m->shared_count > 0)
        m->shared_intermediate_size = m->shared_count * m->intermediate_size;
    else if (m->shared_intermediate_size > 0)
        m->shared_count = 1;
    if (get_int(root, "first_k_dense_replace", &m->first_dense) < 0)
        return mi4_fail(MOEINT4_INVALID_ARGUMENT, "%s: \"first_k_dense_replace\" is not an integer",
                        label);
    return MOEINT4_SUCCESS;
}

moeint4_status mi4_config_parse_model(const char *label, const char *text, size_t length,
                                      mi4_model_config *model, mi4_quant_config *quant)
{
    moeint4_status status;
    cJSON *root = parse_object(label, text, length, &status);
    if (!root)
        return status;
    status = parse_model(label, root, model);
    memset(quant, 0, sizeof *quant);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "quantization_config");
    if (status == MOEINT4_SUCCESS && q) {
        char source[48];
        snprintf(source, sizeof source, "%s quantization_config", label);
        status = parse_quant_object(label, q, source, quant);
    }
    cJSON_Delete(root);
    return status;
}
