/* Which slots a forward uses, and how it reports a bad one.
 *
 * A slot (m * topk + j) is bad when its id is outside [0, E) or its router
 * weight is not finite. The first bad slot a forward meets goes into a
 * record of MI4_RECORD_WORDS ints: [0] kind (MI4_RECORD_*), [1] slot,
 * [2] the id or the weight's bits, [3] topk (to name [m][j]).
 *   synchronous forward: the record is that forward's own (mapped host
 *     memory, cleared by the host before the launch), a bad slot stops the
 *     forward: nothing is written to the output;
 *   asynchronous forward (sticky): the record is the weights' device word
 *     kept across forwards until moeint4_forward_check reads and clears it;
 *     the first writer since then wins; a bad slot is dropped (contributes
 *     nothing) and the other slots are computed as usual. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_SLOTS_H
#define MOEINT4_BACKENDS_HIP_HIP_SLOTS_H

#include <limits.h>
#include <stdint.h>

#include "backends/hip/hip_platform.h"

enum {
    MI4_RECORD_NONE = 0,
    MI4_RECORD_BAD_ID = 1,
    MI4_RECORD_BAD_WEIGHT = 2,
    MI4_RECORD_WORDS = 4,
};

/* mi4_slot_local's value for a bad slot (never used as an index). */
#define MI4_SLOT_BAD INT_MIN

struct mi4_slot_check {
    const int32_t *topk_ids;
    const float *topk_weights;
    const int32_t *expert_map; /* [E]: global -> local or -1; NULL: identity
                                  (saves a dependent load before the weights) */
    int num_experts;
    int topk;
    int *record; /* MI4_RECORD_WORDS ints, see above */
    int sticky;  /* 1: asynchronous forward (drop bad slots, first writer wins) */
};

MI4_DEVICE bool mi4_weight_finite(float w)
{
    return (mi4_dev_f32_to_bits(w) & 0x7f800000u) != 0x7f800000u;
}

/* The local expert of a slot whose id and weight are already loaded: -1 for
 * an expert of another rank, MI4_SLOT_BAD for a bad slot. */
MI4_DEVICE int mi4_slot_local_of(const mi4_slot_check &c, int32_t id, float weight)
{
    if (id < 0 || id >= c.num_experts || !mi4_weight_finite(weight))
        return MI4_SLOT_BAD;
    return c.expert_map != nullptr ? c.expert_map[id] : id;
}

MI4_DEVICE int mi4_slot_local(const mi4_slot_check &c, int64_t slot)
{
    return mi4_slot_local_of(c, c.topk_ids[slot], c.topk_weights[slot]);
}

/* Called by one thread per forward with the smallest bad slot it found. */
MI4_DEVICE void mi4_report_bad_slot(const mi4_slot_check &c, int slot)
{
    int32_t id = c.topk_ids[slot];
    bool bad_id = id < 0 || id >= c.num_experts;
    int kind = bad_id ? MI4_RECORD_BAD_ID : MI4_RECORD_BAD_WEIGHT;
    int value = bad_id ? (int)id : (int)mi4_dev_f32_to_bits(c.topk_weights[slot]);
    if (c.sticky) {
        /* -1 marks the record taken while its words are written */
        if (atomicCAS(c.record, MI4_RECORD_NONE, -1) != MI4_RECORD_NONE)
            return;
        c.record[1] = slot;
        c.record[2] = value;
        c.record[3] = c.topk;
        __threadfence();
        atomicExch(c.record, kind);
    } else {
        c.record[1] = slot;
        c.record[2] = value;
        c.record[3] = c.topk;
        __threadfence_system();
        c.record[0] = kind;
    }
}

#endif
