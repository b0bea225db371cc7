/* Forward arguments as every test and the moeint4 command fill them. */
#include <string.h>

#include "synth.h"

moeint4_forward_args tk_forward_args(moeint4_dtype dtype, int64_t num_tokens, int topk,
                                     const void *hidden, const int32_t *ids, const float *weights,
                                     void *output, const tk_activation *act)
{
    moeint4_forward_args args;
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.dtype = dtype;
    args.num_tokens = num_tokens;
    args.topk = topk;
    args.hidden_states = hidden;
    args.topk_ids = ids;
    args.topk_weights = weights;
    args.output = output;
    args.activation = MOEINT4_ACTIVATION_SILU;
    if (act) {
        args.activation = act->kind;
        args.swiglu_limit = (float)act->limit;
        args.swiglu_alpha = (float)act->alpha;
        args.swiglu_beta = (float)act->beta;
        args.apply_router_weight_on_input = act->apply_router_weight_on_input;
    }
    return args;
}
