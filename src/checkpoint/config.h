/* config.json and the three quantization descriptions (config.json's
 * quantization_config, AutoGPTQ's quantize_config.json, AutoAWQ's
 * quant_config.json), parsed into plain structs. */
#ifndef MOEINT4_CHECKPOINT_CONFIG_H
#define MOEINT4_CHECKPOINT_CONFIG_H

#include <stddef.h>

#include "checkpoint/families.h"
#include "moeint4.h"

#define MI4_CONFIG_MAX_SKIPPED 32

typedef struct mi4_quant_config {
    int present;
    char method[16]; /* "gptq" | "awq" */
    char source[48]; /* where it came from */
    int bits;
    int group_size;       /* 0: not given */
    int sym;              /* GPTQ: 1 symmetric (the default), 0 asymmetric */
    int desc_act;         /* -1: not given */
    int gptq_v2;          /* checkpoint_format "gptq_v2" */
    int zero_point;       /* AWQ */
    char awq_version[16]; /* AWQ: "gemm" */
    int num_skipped;      /* modules_to_not_convert */
    char skipped[MI4_CONFIG_MAX_SKIPPED][64];
} mi4_quant_config;

typedef struct mi4_model_config {
    char model_type[32];
    char architecture[64];
    const mi4_family *family;
    int num_hidden_layers;
    int hidden_size;
    int num_experts;
    char experts_key[32]; /* the config key num_experts came from */
    int top_k;
    int intermediate_size;        /* one routed expert */
    int shared_intermediate_size; /* 0: no shared MLP in the config */
    int shared_count;
    int first_dense; /* first_k_dense_replace */
} mi4_model_config;

/* Parses config.json text (`label` names it). The family must be known
 * (UNSUPPORTED naming the architecture otherwise). A quantization_config
 * inside it goes to *quant (present = 0 when absent). */
moeint4_status mi4_config_parse_model(const char *label, const char *text, size_t length,
                                      mi4_model_config *model, mi4_quant_config *quant);
/* Parses a stand-alone quantization description in any of the three forms. */
moeint4_status mi4_config_parse_quant(const char *label, const char *text, size_t length,
                                      mi4_quant_config *quant);

#endif
