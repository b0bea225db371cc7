/* The family table. Names are those transformers' model classes write
 * (checked against save_pretrained output: docs/CHECKPOINTS.md). */
#include "checkpoint/families.h"

#include <stdio.h>
#include <string.h>

#define GATE_UP_DOWN                                                                               \
    {                                                                                              \
        "gate_proj", "up_proj", "down_proj"                                                        \
    }

static const mi4_family families[] = {
    { "qwen2_moe", "Qwen2MoeForCausalLM", "mlp", GATE_UP_DOWN, "gate_up_proj", "down_proj", "gate",
      "shared_expert", "shared_expert_gate", "num_experts", "num_experts_per_tok",
      "moe_intermediate_size", "shared_expert_intermediate_size", NULL },
    /* Qwen's own configs say num_experts; transformers 5 writes num_local_experts */
    { "qwen3_moe", "Qwen3MoeForCausalLM", "mlp", GATE_UP_DOWN, "gate_up_proj", "down_proj", "gate",
      NULL, NULL, "num_experts|num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
      NULL, NULL },
    /* Mixtral: w1 = gate, w3 = up, w2 = down */
    { "mixtral",
      "MixtralForCausalLM",
      "block_sparse_moe",
      { "w1", "w3", "w2" },
      "gate_up_proj",
      "down_proj",
      "gate",
      NULL,
      NULL,
      "num_local_experts",
      "num_experts_per_tok",
      "intermediate_size",
      NULL,
      NULL },
    { "deepseek_v2", "DeepseekV2ForCausalLM", "mlp", GATE_UP_DOWN, "gate_up_proj", "down_proj",
      "gate", "shared_experts", NULL, "n_routed_experts", "num_experts_per_tok",
      "moe_intermediate_size", NULL, "n_shared_experts" },
    { "deepseek_v3", "DeepseekV3ForCausalLM", "mlp", GATE_UP_DOWN, "gate_up_proj", "down_proj",
      "gate", "shared_experts", NULL, "n_routed_experts", "num_experts_per_tok",
      "moe_intermediate_size", NULL, "n_shared_experts" },
};

const mi4_family *mi4_family_find(const char *model_type, const char *architecture)
{
    size_t count = sizeof families / sizeof families[0];
    for (size_t i = 0; model_type && i < count; i++)
        if (strcmp(families[i].model_type, model_type) == 0)
            return &families[i];
    for (size_t i = 0; architecture && i < count; i++)
        if (strcmp(families[i].architecture, architecture) == 0)
            return &families[i];
    return NULL;
}

void mi4_family_list(char *buffer, size_t capacity)
{
    size_t used = 0;
    buffer[0] = '\0';
    for (size_t i = 0; i < sizeof families / sizeof families[0] && used < capacity; i++)
        used += (size_t)snprintf(buffer + used, capacity - used, "%s%s", i ? ", " : "",
                                 families[i].model_type);
}
