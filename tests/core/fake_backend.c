#include "fake_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fake_context {
    fake_control *control;
} fake_context;

typedef struct fake_weights {
    int hidden_size;
} fake_weights;

static void say(char *buffer, size_t cap, const char *words)
{
    if (buffer && cap > 0)
        snprintf(buffer, cap, "%s", words);
}

static int fake_probe(void *user_data, int device_index, char *reason, size_t reason_cap)
{
    fake_control *control = user_data;
    control->probe_calls++;
    if (control->probe_ok)
        return 1;
    char words[128];
    snprintf(words, sizeof words, "fake device %d is not plugged in", device_index);
    say(reason, reason_cap, words);
    return 0;
}

static int fake_supports(void *user_data, const moeint4_problem *problem, char *reason,
                         size_t reason_cap)
{
    fake_control *control = user_data;
    control->supports_calls++;
    if (!control->supports_ok) {
        say(reason, reason_cap, "fake backend serves no problem at all");
        return 0;
    }
    if (control->only_format && problem->format != control->only_format) {
        say(reason, reason_cap, "fake backend serves one format only");
        return 0;
    }
    return 1;
}

static moeint4_status fake_context_create(void *user_data, const moeint4_context_options *options,
                                          void **backend_context, char *err, size_t err_cap)
{
    (void)options;
    (void)err;
    (void)err_cap;
    fake_context *context = calloc(1, sizeof *context);
    if (!context)
        return MOEINT4_OUT_OF_MEMORY;
    context->control = user_data;
    context->control->contexts_created++;
    *backend_context = context;
    return MOEINT4_SUCCESS;
}

static void fake_context_destroy(void *user_data, void *backend_context)
{
    fake_control *control = user_data;
    control->contexts_destroyed++;
    free(backend_context);
}

static moeint4_status fake_prepare(void *backend_context, const moeint4_weights_desc *desc,
                                   void **backend_weights, char *err, size_t err_cap)
{
    fake_control *control = ((fake_context *)backend_context)->control;
    if (control->prepare_status != MOEINT4_SUCCESS) {
        say(err, err_cap, control->error_message);
        return control->prepare_status;
    }
    fake_weights *weights = malloc(sizeof *weights);
    if (!weights)
        return MOEINT4_OUT_OF_MEMORY;
    weights->hidden_size = desc->hidden_size;
    control->weights_prepared++;
    *backend_weights = weights;
    return MOEINT4_SUCCESS;
}

static void fake_release(void *backend_context, void *backend_weights)
{
    ((fake_context *)backend_context)->control->weights_released++;
    free(backend_weights);
}

static moeint4_status fake_forward(void *backend_context, const void *backend_weights,
                                   const moeint4_forward_args *args, char *err, size_t err_cap)
{
    fake_control *control = ((fake_context *)backend_context)->control;
    const fake_weights *weights = backend_weights;
    if (control->forward_status != MOEINT4_SUCCESS) {
        say(err, err_cap, control->error_message);
        return control->forward_status;
    }
    if (control->only_dtype && args->dtype != control->only_dtype) {
        char words[128];
        snprintf(words, sizeof words, "args->dtype = %d is not supported (only %d)",
                 (int)args->dtype, (int)control->only_dtype);
        say(err, err_cap, words);
        return MOEINT4_UNSUPPORTED;
    }
    control->forwards++;
    size_t count = (size_t)args->num_tokens * (size_t)weights->hidden_size;
    if (args->dtype == MOEINT4_DTYPE_F32) {
        float *out = args->output;
        for (size_t i = 0; i < count; i++)
            out[i] = FAKE_OUTPUT_VALUE;
    } else {
        /* 0.25 is 0x3400 in f16 and 0x3e80 in bf16 */
        uint16_t bits = args->dtype == MOEINT4_DTYPE_F16 ? 0x3400u : 0x3e80u;
        uint16_t *out = args->output;
        for (size_t i = 0; i < count; i++)
            out[i] = bits;
    }
    return MOEINT4_SUCCESS;
}

moeint4_backend_iface fake_backend_iface(fake_control *control)
{
    moeint4_backend_iface iface;
    memset(&iface, 0, sizeof iface);
    iface.struct_size = sizeof iface;
    iface.api_version = MOEINT4_BACKEND_API_VERSION;
    iface.name = control->name;
    iface.device_pointers = 0;
    iface.platform_priority = control->priority;
    iface.user_data = control;
    iface.probe = fake_probe;
    iface.supports = fake_supports;
    iface.context_create = fake_context_create;
    iface.context_destroy = fake_context_destroy;
    iface.prepare = fake_prepare;
    iface.release = fake_release;
    iface.forward = fake_forward;
    return iface;
}
