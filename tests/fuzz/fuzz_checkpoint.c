/* Fuzzes what a checkpoint on disk feeds the library: the safetensors header
 * parser (mi4_st_parse on the raw bytes), config.json and the quantization
 * descriptions (mi4_config_parse_*), and a whole one-file checkpoint
 * (config.json + model.safetensors written to a scratch folder, then
 * moeint4_checkpoint_open, every layer's query and description, close).
 * The first input byte picks the mode; for the checkpoint, two more bytes
 * give the length of the config text that precedes the file.
 * Checked beyond the sanitizers: a failure leaves a message and the output
 * untouched; every tensor a parse accepts lies inside the data and no two
 * overlap; every layer of an opened checkpoint gives a description that
 * moeint4_weights_prepare accepts or refuses with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"
#include "moeint4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_safetensors(const uint8_t *data, size_t size)
{
    mi4_st_file f;
    memset(&f, 0xa5, sizeof f);
    mi4_st_file before = f;
    if (mi4_st_parse("fuzz.safetensors", data, size, &f) != MOEINT4_SUCCESS) {
        if (memcmp(&f, &before, sizeof f) != 0 || moeint4_last_error()[0] == '\0')
            abort();
        return;
    }
    for (size_t i = 0; i < f.count; i++) {
        const mi4_st_tensor *t = &f.tensors[i];
        if (t->data < f.data || t->offset + t->bytes > f.data_bytes ||
            t->bytes != mi4_st_dtype_size(t->dtype) * (t->bytes / mi4_st_dtype_size(t->dtype)))
            abort();
        if (mi4_st_find(&f, t->name) != t)
            abort();
        for (size_t j = 0; j < i; j++) { /* no two non-empty tensors share a byte */
            const mi4_st_tensor *u = &f.tensors[j];
            if (t->bytes && u->bytes && t->offset < u->offset + u->bytes &&
                u->offset < t->offset + t->bytes)
                abort();
        }
    }
    mi4_st_close(&f);
}

static void fuzz_config(const uint8_t *data, size_t size)
{
    mi4_model_config model;
    mi4_quant_config quant;
    if (mi4_config_parse_model("config.json", (const char *)data, size, &model, &quant) ==
        MOEINT4_SUCCESS) {
        if (!model.family || model.hidden_size < 1 || model.num_experts < 1 || model.top_k < 1)
            abort();
        if (quant.present && quant.bits != 4)
            abort();
    } else if (moeint4_last_error()[0] == '\0') {
        abort();
    }
    if (mi4_config_parse_quant("quant.json", (const char *)data, size, &quant) == MOEINT4_SUCCESS &&
        (quant.bits != 4 || !quant.present))
        abort();
}

static char scratch[256];

static int write_file(const char *name, const uint8_t *data, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t wrote = size ? fwrite(data, 1, size, f) : 0;
    fclose(f);
    return wrote == size ? 0 : -1;
}

/* The scratch folder goes at exit (libFuzzer exits through exit()). */
static void remove_scratch(void)
{
    static const char *const names[] = { "config.json", "model.safetensors" };
    char path[512];
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", scratch, names[i]);
        unlink(path);
    }
    rmdir(scratch);
}

static void fuzz_checkpoint(const uint8_t *data, size_t size)
{
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/moeint4-fuzz-checkpoint-XXXXXX");
        if (!mkdtemp(scratch))
            abort();
        atexit(remove_scratch);
    }
    size_t config_bytes = size >= 2 ? (size_t)(data[0] | data[1] << 8) : 0;
    data += size >= 2 ? 2 : size;
    size -= size >= 2 ? 2 : size;
    if (config_bytes > size)
        config_bytes = size;
    if (write_file("config.json", data, config_bytes) ||
        write_file("model.safetensors", data + config_bytes, size - config_bytes))
        abort();
    moeint4_checkpoint *ck = (moeint4_checkpoint *)(uintptr_t)0x1;
    if (moeint4_checkpoint_open(scratch, NULL, &ck) != MOEINT4_SUCCESS) {
        if (ck != (moeint4_checkpoint *)(uintptr_t)0x1 || moeint4_last_error()[0] == '\0')
            abort();
        return;
    }
    int layers[64], count = 0;
    moeint4_checkpoint_layers(ck, layers, 64, &count);
    moeint4_context *ctx = NULL;
    moeint4_context_options o = { .struct_size = sizeof o,
                                  .backend = MOEINT4_BACKEND_CPU,
                                  .num_threads = 1 };
    if (moeint4_context_create(&o, &ctx) != MOEINT4_SUCCESS)
        abort();
    for (int i = 0; i < count && i < 64; i++) {
        moeint4_checkpoint_layer_info li = { .struct_size = sizeof li };
        if (moeint4_checkpoint_layer_query(ck, layers[i], &li) != MOEINT4_SUCCESS)
            abort();
        moeint4_weights_desc d = { .struct_size = sizeof d };
        if (moeint4_checkpoint_layer_desc(ck, layers[i], &d) != MOEINT4_SUCCESS) {
            if (moeint4_last_error()[0] == '\0')
                abort();
            continue;
        }
        moeint4_weights *w = NULL;
        moeint4_status s = moeint4_weights_prepare(ctx, &d, &w);
        if (s != MOEINT4_SUCCESS && moeint4_last_error()[0] == '\0')
            abort();
        moeint4_weights_release(w);
        moeint4_checkpoint_release_layer(ck, layers[i]);
    }
    moeint4_context_destroy(ctx);
    moeint4_checkpoint_close(ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0: fuzz_safetensors(data + 1, size - 1); break;
    case 1: fuzz_config(data + 1, size - 1); break;
    default: fuzz_checkpoint(data + 1, size - 1); break;
    }
    return 0;
}
