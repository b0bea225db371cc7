/* Routing, input conversion and the combine.
 *
 * Routing (one block, after vLLM's moe_align_block_size design): count the
 * slots of each local expert, pad each expert's count to the GEMM's row
 * tile, prefix-sum into segment offsets, and scatter slot indices into their
 * expert's segment. Ids outside [0, E) are counted nowhere; the smallest such
 * slot is reported and the number of tiles is set to 0, so no later kernel
 * touches anything and the combine leaves the output alone. Positions inside
 * a segment depend on atomic order, results do not: every row's arithmetic
 * is independent of its position, and the combine sums slots in index order. */
#include <limits.h>

#include "combine.h"
#include "hip_internal.h"

namespace {

constexpr int ROUTE_THREADS = 1024;

/* Exclusive prefix sum of values[0..n) in shared memory; returns the total.
 * Each thread sums a contiguous run, the run totals are scanned, then the
 * runs are rewritten. `partial` has ROUTE_THREADS entries. */
__device__ int block_exclusive_scan(int *values, int n, int *partial)
{
    int tid = (int)threadIdx.x;
    int per_thread = (n + ROUTE_THREADS - 1) / ROUTE_THREADS;
    int begin = tid * per_thread, end = min(begin + per_thread, n);
    int sum = 0;
    for (int i = begin; i < end; i++)
        sum += values[i];
    partial[tid] = sum;
    __syncthreads();
    for (int offset = 1; offset < ROUTE_THREADS; offset *= 2) {
        int add = tid >= offset ? partial[tid - offset] : 0;
        __syncthreads();
        partial[tid] += add;
        __syncthreads();
    }
    int running = partial[tid] - sum; /* exclusive start of this run */
    int total = partial[ROUTE_THREADS - 1];
    for (int i = begin; i < end; i++) {
        int v = values[i];
        values[i] = running;
        running += v;
    }
    __syncthreads();
    return total;
}

__global__ void __launch_bounds__(ROUTE_THREADS)
    route(const int32_t *topk_ids, int64_t num_slots, int num_experts, const int32_t *expert_map,
          int num_local, int tile_rows, int *status, int *sorted_slot, int *tile_expert)
{
    extern __shared__ int shared[];
    int *counts = shared;                /* [num_local] then offsets */
    int *cursor = shared + num_local;    /* [num_local] */
    __shared__ int partial[ROUTE_THREADS];
    __shared__ int first_bad;
    int tid = (int)threadIdx.x;
    if (tid == 0)
        first_bad = INT_MAX;
    for (int e = tid; e < num_local; e += ROUTE_THREADS)
        counts[e] = 0;
    __syncthreads();

    for (int64_t s = tid; s < num_slots; s += ROUTE_THREADS) {
        int id = topk_ids[s];
        if (id < 0 || id >= num_experts) {
            atomicMin(&first_bad, (int)s);
            continue;
        }
        int local = expert_map[id];
        if (local >= 0)
            atomicAdd(&counts[local], 1);
    }
    __syncthreads();
    if (first_bad != INT_MAX) {
        if (tid == 0) {
            status[0] = 1;
            status[1] = first_bad;
            status[2] = 0;
        }
        return;
    }

    for (int e = tid; e < num_local; e += ROUTE_THREADS)
        counts[e] = (counts[e] + tile_rows - 1) / tile_rows * tile_rows;
    __syncthreads();
    int total = block_exclusive_scan(counts, num_local, partial); /* counts: offsets now */
    for (int e = tid; e < num_local; e += ROUTE_THREADS) {
        cursor[e] = counts[e];
        int end = e + 1 < num_local ? counts[e + 1] : total;
        for (int t = counts[e] / tile_rows; t < end / tile_rows; t++)
            tile_expert[t] = e;
    }
    for (int i = tid; i < total; i += ROUTE_THREADS)
        sorted_slot[i] = -1;
    __syncthreads();

    for (int64_t s = tid; s < num_slots; s += ROUTE_THREADS) {
        int local = expert_map[topk_ids[s]];
        if (local >= 0)
            sorted_slot[atomicAdd(&cursor[local], 1)] = (int)s;
    }
    if (tid == 0) {
        status[0] = 0;
        status[1] = -1;
        status[2] = total / tile_rows;
    }
}

__device__ float load_as_f32(const void *x, moeint4_dtype dtype, size_t i)
{
    if (dtype == MOEINT4_DTYPE_F32)
        return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return dtype == MOEINT4_DTYPE_F16 ? mi4_dev_f16_to_f32(h) : mi4_dev_bf16_to_f32(h);
}

__global__ void convert(const void *x, moeint4_dtype dtype, int64_t rows, int hidden, int topk,
                        const float *topk_weights, int per_slot, uint16_t *x_bf16)
{
    int64_t total = rows * hidden;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = i / hidden;
        int64_t token = per_slot ? row / topk : row;
        float v = load_as_f32(x, dtype, (size_t)(token * hidden + i % hidden));
        if (per_slot)
            v *= topk_weights[row];
        x_bf16[i] = mi4_dev_f32_to_bf16(v);
    }
}

__global__ void combine(mi4_combine_params c)
{
    if (mi4_combine_status(c, blockIdx.x == 0 && threadIdx.x == 0))
        mi4_combine_quads(c, (int64_t)blockIdx.x * blockDim.x + threadIdx.x,
                          (int64_t)gridDim.x * blockDim.x);
}

unsigned grid_for(int64_t work, int threads)
{
    int64_t blocks = (work + threads - 1) / threads;
    if (blocks < 1)
        blocks = 1;
    return (unsigned)(blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

} // namespace

hipError_t mi4_hip_launch_route(const int32_t *topk_ids, int64_t num_slots,
                                const mi4_hip_weights *w, const mi4_hip_routing *r,
                                hipStream_t stream)
{
    size_t smem = 2 * (size_t)w->num_local_experts * sizeof(int);
    route<<<1, ROUTE_THREADS, smem, stream>>>(topk_ids, num_slots, w->num_experts, w->expert_map,
                                              w->num_local_experts, r->tile_rows, r->status,
                                              r->sorted_slot, r->tile_expert);
    return hipGetLastError();
}

hipError_t mi4_hip_launch_convert(const void *x, moeint4_dtype dtype, int64_t num_tokens,
                                  int hidden, int topk, const float *topk_weights, int per_slot,
                                  uint16_t *x_bf16, hipStream_t stream)
{
    int64_t rows = per_slot ? num_tokens * topk : num_tokens;
    convert<<<grid_for(rows * hidden, 256), 256, 0, stream>>>(x, dtype, rows, hidden, topk,
                                                              topk_weights, per_slot, x_bf16);
    return hipGetLastError();
}

hipError_t mi4_hip_launch_combine(const mi4_combine_params *c, hipStream_t stream)
{
    combine<<<grid_for(c->num_tokens * (c->hidden / 4), 256), 256, 0, stream>>>(*c);
    return hipGetLastError();
}
