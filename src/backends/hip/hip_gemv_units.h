/* What the decode GEMVs share (hip_decode_gemv.hip on BF16 weights,
 * hip_int4_gemv.hip and hip_int4_decode.hip on int4 weights): the
 * persistent grid, each warp's contiguous run of units, and the direct
 * GEMVs' slot -> expert table. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_GEMV_UNITS_H
#define MOEINT4_BACKENDS_HIP_HIP_GEMV_UNITS_H

#include "backends/hip/hip_gemm_common.h"

namespace mi4_gemm {

constexpr int GEMV_WARPS = 8;
constexpr int GEMV_BLOCKS_PER_SM = 2;

/* This warp's contiguous run [*begin, *end) of `units`. */
MI4_DEVICE void warp_units(int64_t units, int64_t *begin, int64_t *end)
{
    int64_t warps = (int64_t)gridDim.x * GEMV_WARPS;
    int64_t warp = (int64_t)blockIdx.x * GEMV_WARPS + (int)threadIdx.x / MI4_WARP;
    int64_t per_warp = (units + warps - 1) / warps;
    *begin = min(units, warp * per_warp);
    *end = min(units, *begin + per_warp);
}

/* Direct GEMVs: the local expert of every slot in shared memory, -1 for a
 * non-local or bad slot (hip_slots.h); returns the smallest bad slot
 * (INT_MAX: none). */
MI4_DEVICE int map_slots(const gemm_params &p, int *slot_expert)
{
    __shared__ int first_bad;
    const int tid = (int)threadIdx.x;
    if (tid == 0)
        first_bad = INT_MAX;
    __syncthreads();
    for (int s = tid; s < p.num_slots; s += (int)blockDim.x) {
        int local = mi4_slot_local(p.combine.check, s);
        if (local == MI4_SLOT_BAD)
            atomicMin(&first_bad, s);
        slot_expert[s] = local < 0 ? -1 : local;
    }
    __syncthreads();
    return first_bad;
}

/* Enough blocks to fill every SM, fewer when there is less work. */
inline unsigned persistent_grid(int64_t units, int resident_blocks)
{
    int64_t blocks = (units + GEMV_WARPS - 1) / GEMV_WARPS;
    int64_t cap = resident_blocks > 0 ? resident_blocks : 1;
    return (unsigned)(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace mi4_gemm

#endif
