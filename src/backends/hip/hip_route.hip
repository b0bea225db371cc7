/* Routing, input conversion and the combine.
 *
 * Routing (after vLLM's moe_align_block_size design): count the slots of
 * each local expert, pad each expert's count to the GEMM's row tile,
 * prefix-sum into segment offsets, and scatter slot indices into their
 * expert's segment. Bad slots (hip_slots.h: id outside [0, E), router weight
 * not finite) are counted nowhere and the smallest one is reported; a
 * synchronous forward then sets the number of tiles to 0, so no later kernel
 * touches anything and the combine leaves the output alone, an asynchronous
 * one goes on without them. Positions inside
 * a segment depend on atomic order, results do not: every row's arithmetic
 * is independent of its position, and the combine sums slots in index order.
 *
 * Two paths with the same result (MOEINT4_HIP_ROUTE=auto|one|multi):
 *   one   : one block does everything; one launch, cheapest for few slots,
 *           but each thread walks num_slots / 1024 slots twice (SLOT_UNROLL
 *           loads in flight).
 *   multi : (1) count_chunks: each block histograms its chunk of slots in
 *           shared memory and writes its counts and its smallest bad slot to
 *           the scratch; (2) route_offsets, one block: sums the counts,
 *           pads, scans, writes tile_expert, the -1 padding and the status,
 *           and turns the scratch counts into each block's start in every
 *           expert's segment; (3) scatter_chunks: each block places its
 *           chunk's slots from those starts. Every scratch word is written
 *           each forward before it is read, so nothing needs clearing. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_combine.h"
#include "backends/hip/hip_internal.h"
#include "backends/hip/hip_slots.h"

namespace {

constexpr int ROUTE_THREADS = 1024;

constexpr int SLOT_UNROLL = 8; /* slots of one thread in flight together */

/* The local experts of this thread's slots base + i * THREADS + tid,
 * i < SLOT_UNROLL: all id and weight loads are issued before the first use,
 * then the expert_map loads (none for an identity map). -1 for slots at
 * or past `end` and for experts of other ranks, MI4_SLOT_BAD for bad slots. */
template <int THREADS>
__device__ __forceinline__ void load_locals(const mi4_slot_check &c, int64_t base, int64_t end,
                                            int (&local)[SLOT_UNROLL])
{
    int id[SLOT_UNROLL];
    float weight[SLOT_UNROLL];
#pragma unroll
    for (int i = 0; i < SLOT_UNROLL; i++) {
        int64_t s = base + (int64_t)i * THREADS + (int)threadIdx.x;
        id[i] = s < end ? c.topk_ids[s] : 0;
        weight[i] = s < end ? c.topk_weights[s] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < SLOT_UNROLL; i++) {
        int64_t s = base + (int64_t)i * THREADS + (int)threadIdx.x;
        local[i] = s < end ? mi4_slot_local_of(c, id[i], weight[i]) : -1;
    }
}

/* The loaded slots base + i * THREADS + tid (load_locals) per local expert
 * into the shared `histogram`, the smallest bad one into `first_bad`. */
template <int THREADS>
__device__ __forceinline__ void count_loaded(const int (&local)[SLOT_UNROLL], int64_t base,
                                             int *histogram, int *first_bad)
{
#pragma unroll
    for (int i = 0; i < SLOT_UNROLL; i++) {
        if (local[i] >= 0)
            atomicAdd(&histogram[local[i]], 1);
        else if (local[i] == MI4_SLOT_BAD)
            atomicMin(first_bad, (int)(base + (int64_t)i * THREADS + (int)threadIdx.x));
    }
}

/* The good ones of the loaded slots into sorted_slot at the shared
 * per-expert cursors. */
template <int THREADS>
__device__ __forceinline__ void place_loaded(const int (&local)[SLOT_UNROLL], int64_t base,
                                             int *cursor, int *sorted_slot)
{
#pragma unroll
    for (int i = 0; i < SLOT_UNROLL; i++)
        if (local[i] >= 0)
            sorted_slot[atomicAdd(&cursor[local[i]], 1)] =
                (int)(base + (int64_t)i * THREADS + (int)threadIdx.x);
}

/* Slots [begin, end) per local expert into the shared `histogram`, the
 * smallest bad slot into the shared `first_bad` (a block of THREADS). */
template <int THREADS>
__device__ __forceinline__ void count_slots(const mi4_slot_check &c, int64_t begin, int64_t end,
                                            int *histogram, int *first_bad)
{
    for (int64_t base = begin; base < end; base += (int64_t)THREADS * SLOT_UNROLL) {
        int local[SLOT_UNROLL];
        load_locals<THREADS>(c, base, end, local);
        count_loaded<THREADS>(local, base, histogram, first_bad);
    }
}

/* The good local slots of [begin, end) into sorted_slot at the shared
 * per-expert cursors. */
template <int THREADS>
__device__ __forceinline__ void place_slots(const mi4_slot_check &c, int64_t begin, int64_t end,
                                            int *cursor, int *sorted_slot)
{
    for (int64_t base = begin; base < end; base += (int64_t)THREADS * SLOT_UNROLL) {
        int local[SLOT_UNROLL];
        load_locals<THREADS>(c, base, end, local);
        place_loaded<THREADS>(local, base, cursor, sorted_slot);
    }
}

constexpr int ROUTE_WARPS = ROUTE_THREADS / MI4_WARP;
static_assert(ROUTE_WARPS <= MI4_WARP, "one warp scans the warps' totals");

/* Exclusive prefix sum of values[0..n) in shared memory; returns the total.
 * Each thread sums a contiguous run; the run totals are scanned within each
 * warp by shuffles, then the warps' totals by warp 0 (two barriers; a scan
 * over the block's threads in shared memory took 20); then the runs are
 * rewritten. `partial` has ROUTE_WARPS entries. */
__device__ int block_exclusive_scan(int *values, int n, int *partial)
{
    const int tid = (int)threadIdx.x, lane = tid % MI4_WARP, warp = tid / MI4_WARP;
    const int per_thread = (n + ROUTE_THREADS - 1) / ROUTE_THREADS;
    const int begin = tid * per_thread, end = min(begin + per_thread, n);
    int sum = 0;
    for (int i = begin; i < end; i++)
        sum += values[i];
    const int inclusive = mi4_warp_inclusive_scan(sum);
    if (lane == MI4_WARP - 1)
        partial[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
        /* every lane reads before the scan's shuffles, writes after them */
        const int warp_total = mi4_warp_inclusive_scan(lane < ROUTE_WARPS ? partial[lane] : 0);
        if (lane < ROUTE_WARPS)
            partial[lane] = warp_total; /* inclusive over warps 0..lane */
    }
    __syncthreads();
    int running = (warp > 0 ? partial[warp - 1] : 0) + inclusive - sum; /* this run's start */
    const int total = partial[ROUTE_WARPS - 1];
    for (int i = begin; i < end; i++) {
        int v = values[i];
        values[i] = running;
        running += v;
    }
    __syncthreads();
    return total;
}

__global__ void __launch_bounds__(ROUTE_THREADS)
    route(mi4_slot_check check, int64_t num_slots, int num_local, int tile_rows, int *status,
          int *sorted_slot, int *tile_expert)
{
    extern __shared__ int shared[];
    int *counts = shared;                /* [num_local] then offsets */
    int *cursor = shared + num_local;    /* [num_local] */
    __shared__ int partial[ROUTE_WARPS];
    __shared__ int first_bad;
    mi4_grid_allow_next(); /* a GEMM launched early waits for this kernel's end */
    int tid = (int)threadIdx.x;
    if (tid == 0)
        first_bad = INT_MAX;
    for (int e = tid; e < num_local; e += ROUTE_THREADS)
        counts[e] = 0;
    /* up to SLOT_UNROLL slots a thread: loaded once, kept for the placing */
    const bool one_load = num_slots <= (int64_t)ROUTE_THREADS * SLOT_UNROLL;
    int local[SLOT_UNROLL];
    if (one_load)
        load_locals<ROUTE_THREADS>(check, 0, num_slots, local);
    __syncthreads();

    if (one_load)
        count_loaded<ROUTE_THREADS>(local, 0, counts, &first_bad);
    else
        count_slots<ROUTE_THREADS>(check, 0, num_slots, counts, &first_bad);
    __syncthreads();
    const int bad = first_bad != INT_MAX;
    if (bad && tid == 0)
        mi4_report_bad_slot(check, first_bad);
    if (bad && !check.sticky) {
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

    if (one_load)
        place_loaded<ROUTE_THREADS>(local, 0, cursor, sorted_slot);
    else
        place_slots<ROUTE_THREADS>(check, 0, num_slots, cursor, sorted_slot);
    if (tid == 0) {
        status[0] = bad;
        status[1] = bad ? first_bad : -1;
        status[2] = total / tile_rows;
    }
}

/* ---- the multi-block path ---- */

constexpr int CHUNK_THREADS = 256;
constexpr int64_t CHUNK_STEP = (int64_t)CHUNK_THREADS * SLOT_UNROLL;
constexpr int MAX_CHUNKS = 256;
constexpr int ROUTE_BATCH = 8; /* chunk counts a thread loads at once */
/* Bounds chunks x local experts: route_offsets walks that scratch twice. */
constexpr int64_t MAX_CHUNK_COUNTS = 65536;
/* Above this many slots, auto takes the multi-block path. */
constexpr int64_t MULTI_ROUTE_SLOTS = 4096;

/* Block b of count_chunks and scatter_chunks owns slots [b * chunk, (b + 1) * chunk). */
struct chunk_plan {
    int chunks;
    int64_t chunk;
};

chunk_plan plan_chunks(int64_t num_slots, int num_local)
{
    int64_t cap = MAX_CHUNK_COUNTS / (num_local > 0 ? num_local : 1);
    cap = cap < 1 ? 1 : cap > MAX_CHUNKS ? MAX_CHUNKS : cap;
    int64_t chunks = (num_slots + CHUNK_STEP - 1) / CHUNK_STEP;
    chunks = chunks < 1 ? 1 : chunks > cap ? cap : chunks;
    chunk_plan plan;
    plan.chunks = (int)chunks;
    plan.chunk = (num_slots + chunks - 1) / chunks;
    return plan;
}

/* (1) The chunk's slots per local expert -> chunk_counts[b][e], and its
 * smallest bad slot (INT_MAX: none) -> chunk_bad[b]. */
__global__ void __launch_bounds__(CHUNK_THREADS)
    count_chunks(mi4_slot_check check, int64_t num_slots, int64_t chunk, int num_local,
                 int *chunk_counts, int *chunk_bad)
{
    extern __shared__ int histogram[]; /* [num_local] */
    __shared__ int first_bad;
    const int tid = (int)threadIdx.x;
    if (tid == 0)
        first_bad = INT_MAX;
    for (int e = tid; e < num_local; e += CHUNK_THREADS)
        histogram[e] = 0;
    __syncthreads();
    const int64_t begin = (int64_t)blockIdx.x * chunk;
    const int64_t end = begin + chunk < num_slots ? begin + chunk : num_slots;
    count_slots<CHUNK_THREADS>(check, begin, end, histogram, &first_bad);
    __syncthreads();
    int *counts = chunk_counts + (size_t)blockIdx.x * (size_t)num_local;
    for (int e = tid; e < num_local; e += CHUNK_THREADS)
        counts[e] = histogram[e];
    if (tid == 0)
        chunk_bad[blockIdx.x] = first_bad;
}

/* Expert e's counts of chunks c0 .. c0 + ROUTE_BATCH - 1 (0 past `chunks`),
 * loaded together: one load a step made route_offsets' walks chains of
 * dependent global round trips (17 us at 16 chunks on the H200). */
__device__ __forceinline__ void load_count_batch(const int *chunk_counts, int c0, int chunks,
                                                 int num_local, int e, int (&n)[ROUTE_BATCH])
{
#pragma unroll
    for (int j = 0; j < ROUTE_BATCH; j++)
        n[j] = c0 + j < chunks ? chunk_counts[(size_t)(c0 + j) * num_local + e] : 0;
}

/* (2) One block: the status, the padded segments (tile_expert, -1 padding)
 * and, in place of chunk_counts[b][e], where chunk b's slots of expert e
 * start in sorted_slot. */
__global__ void __launch_bounds__(ROUTE_THREADS)
    route_offsets(mi4_slot_check check, int chunks, int num_local, int tile_rows,
                  int *chunk_counts, const int *chunk_bad, int *status, int *sorted_slot,
                  int *tile_expert)
{
    extern __shared__ int shared[];
    int *offset = shared;            /* [num_local]: padded counts, then segment starts */
    int *count = shared + num_local; /* [num_local] */
    __shared__ int partial[ROUTE_WARPS];
    __shared__ int first_bad;
    const int tid = (int)threadIdx.x;
    if (tid == 0)
        first_bad = INT_MAX;
    __syncthreads();
    for (int c = tid; c < chunks; c += ROUTE_THREADS)
        atomicMin(&first_bad, chunk_bad[c]);
    __syncthreads();
    const int bad = first_bad != INT_MAX;
    if (bad && tid == 0)
        mi4_report_bad_slot(check, first_bad);
    if (bad && !check.sticky) {
        if (tid == 0) {
            status[0] = 1;
            status[1] = first_bad;
            status[2] = 0;
        }
        return;
    }

    /* a thread walks an expert's column of chunk counts, a batch at a time */
    for (int e = tid; e < num_local; e += ROUTE_THREADS) {
        int sum = 0;
        for (int c0 = 0; c0 < chunks; c0 += ROUTE_BATCH) {
            int n[ROUTE_BATCH];
            load_count_batch(chunk_counts, c0, chunks, num_local, e, n);
#pragma unroll
            for (int j = 0; j < ROUTE_BATCH; j++)
                sum += n[j];
        }
        count[e] = sum;
        offset[e] = (sum + tile_rows - 1) / tile_rows * tile_rows;
    }
    __syncthreads();
    const int total = block_exclusive_scan(offset, num_local, partial); /* offset: starts now */
    const int tiles = total / tile_rows;
    for (int t = tid; t < tiles; t += ROUTE_THREADS) {
        /* The tile's expert is the last one starting at or before its first
         * row (an empty segment starts where the next one does):
         * offset[lo] <= row < offset[hi], offset[num_local] being total. */
        const int row = t * tile_rows;
        int lo = 0, hi = num_local;
        while (hi - lo > 1) {
            int mid = (lo + hi) / 2;
            if (offset[mid] <= row)
                lo = mid;
            else
                hi = mid;
        }
        tile_expert[t] = lo;
    }
    /* padding (fewer than tile_rows rows) ends each segment's last tile:
     * rows offset[e] + count[e] .. the next segment's start, spread over
     * the block */
    for (int i = tid; i < num_local * tile_rows; i += ROUTE_THREADS) {
        const int e = i / tile_rows;
        const int row = offset[e] + count[e] + i % tile_rows;
        if (row < (e + 1 < num_local ? offset[e + 1] : total))
            sorted_slot[row] = -1;
    }
    for (int e = tid; e < num_local; e += ROUTE_THREADS) {
        int start = offset[e];
        for (int c0 = 0; c0 < chunks; c0 += ROUTE_BATCH) {
            int n[ROUTE_BATCH];
            load_count_batch(chunk_counts, c0, chunks, num_local, e, n);
#pragma unroll
            for (int j = 0; j < ROUTE_BATCH; j++)
                if (c0 + j < chunks) {
                    chunk_counts[(size_t)(c0 + j) * num_local + e] = start;
                    start += n[j];
                }
        }
    }
    if (tid == 0) {
        status[0] = bad;
        status[1] = bad ? first_bad : -1;
        status[2] = tiles;
    }
}

/* (3) Slots into their segments from the chunk's starts (chunk_starts[b][e]);
 * nothing after a bad slot of a synchronous forward. */
__global__ void __launch_bounds__(CHUNK_THREADS)
    scatter_chunks(mi4_slot_check check, int64_t num_slots, int64_t chunk, int num_local,
                   const int *chunk_starts, const int *status, int *sorted_slot)
{
    extern __shared__ int cursor[]; /* [num_local] */
    if (status[0] != 0 && !check.sticky)
        return; /* the same word for every thread: the whole block leaves */
    const int tid = (int)threadIdx.x;
    const int *starts = chunk_starts + (size_t)blockIdx.x * (size_t)num_local;
    for (int e = tid; e < num_local; e += CHUNK_THREADS)
        cursor[e] = starts[e];
    __syncthreads();
    const int64_t begin = (int64_t)blockIdx.x * chunk;
    const int64_t end = begin + chunk < num_slots ? begin + chunk : num_slots;
    place_slots<CHUNK_THREADS>(check, begin, end, cursor, sorted_slot);
}

/* MOEINT4_HIP_ROUTE=one|multi forces a path (tests, tuning); auto, unset or
 * anything else (as MOEINT4_HIP_TILE) chooses by the number of slots. */
bool use_multi_block(int64_t num_slots)
{
    const char *forced = getenv("MOEINT4_HIP_ROUTE");
    if (forced != nullptr && strcmp(forced, "one") == 0)
        return false;
    if (forced != nullptr && strcmp(forced, "multi") == 0)
        return true;
    return num_slots > MULTI_ROUTE_SLOTS;
}

hipError_t launch_multi_block(const mi4_slot_check &check, int64_t num_slots, int num_local,
                              const mi4_hip_routing *r, hipStream_t stream)
{
    const chunk_plan plan = plan_chunks(num_slots, num_local);
    int *chunk_counts = r->route_scratch;
    int *chunk_bad = chunk_counts + (size_t)plan.chunks * (size_t)num_local;
    const size_t per_expert = (size_t)num_local * sizeof(int);
    hipError_t e = mi4_launch(count_chunks, dim3(plan.chunks), dim3(CHUNK_THREADS), per_expert,
                              stream, check, num_slots, plan.chunk, num_local, chunk_counts,
                              chunk_bad);
    if (e == hipSuccess)
        e = mi4_launch(route_offsets, dim3(1), dim3(ROUTE_THREADS), 2 * per_expert, stream,
                       check, plan.chunks, num_local, r->tile_rows, chunk_counts, chunk_bad,
                       r->status, r->sorted_slot, r->tile_expert);
    if (e == hipSuccess)
        e = mi4_launch(scatter_chunks, dim3(plan.chunks), dim3(CHUNK_THREADS), per_expert,
                       stream, check, num_slots, plan.chunk, num_local, chunk_counts, r->status,
                       r->sorted_slot);
    return e;
}

__device__ float load_as_f32(const void *x, moeint4_dtype dtype, size_t i)
{
    if (dtype == MOEINT4_DTYPE_F32)
        return ((const float *)x)[i];
    uint16_t h = ((const uint16_t *)x)[i];
    return dtype == MOEINT4_DTYPE_F16 ? mi4_dev_f16_to_f32(h) : mi4_dev_bf16_to_f32(h);
}

__global__ void convert(const void *x, moeint4_dtype dtype, int64_t rows, int hidden, int topk,
                        const float *topk_weights, mi4_hip_convert_rows how, uint16_t *x_bf16)
{
    int64_t total = rows * hidden;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = i / hidden;
        int64_t token = how.per_slot ? row / topk : row;
        int column = (int)(i % hidden);
        if (how.input_perm != nullptr) { /* act-order: the slot's expert's sort order */
            int local = mi4_slot_local(how.check, row);
            if (local >= 0)
                column = how.input_perm[(size_t)local * hidden + column];
        }
        float v = load_as_f32(x, dtype, (size_t)(token * hidden + column));
        if (how.weight_on_input)
            v *= topk_weights[row];
        x_bf16[i] = mi4_dev_f32_to_bf16(v);
    }
}

__global__ void combine(mi4_combine_params c)
{
    if (mi4_combine_allowed(c))
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

size_t mi4_hip_route_scratch_bytes(int64_t num_slots, int num_local_experts)
{
    const chunk_plan plan = plan_chunks(num_slots, num_local_experts);
    return ((size_t)plan.chunks * (size_t)num_local_experts + (size_t)plan.chunks) * sizeof(int);
}

hipError_t mi4_hip_launch_route(const mi4_slot_check *check, int64_t num_slots, int num_local,
                                const mi4_hip_routing *r, hipStream_t stream)
{
    if (r->route_scratch != nullptr && use_multi_block(num_slots))
        return launch_multi_block(*check, num_slots, num_local, r, stream);
    size_t smem = 2 * (size_t)num_local * sizeof(int);
    return mi4_launch(route, dim3(1), dim3(ROUTE_THREADS), smem, stream, *check, num_slots,
                      num_local, r->tile_rows, r->status, r->sorted_slot, r->tile_expert);
}

hipError_t mi4_hip_launch_convert(const void *x, moeint4_dtype dtype, int64_t num_tokens,
                                  int hidden, int topk, const float *topk_weights,
                                  const mi4_hip_convert_rows *how, uint16_t *x_bf16,
                                  hipStream_t stream)
{
    int64_t rows = how->per_slot ? num_tokens * topk : num_tokens;
    return mi4_launch(convert, dim3(grid_for(rows * hidden, 256)), dim3(256), 0, stream, x, dtype,
                      rows, hidden, topk, topk_weights, *how, x_bf16);
}

hipError_t mi4_hip_launch_combine(const mi4_combine_params *c, hipStream_t stream)
{
    return mi4_launch(combine, dim3(grid_for(c->num_tokens * (c->hidden / 4), 256)), dim3(256), 0,
                      stream, *c);
}
