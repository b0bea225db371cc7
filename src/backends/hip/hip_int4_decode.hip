/* The direct decode path over int4 weights on the matrix cores (NVIDIA
 * sm_80+, group 128 or per-channel: mi4_hip_int4_mma_serves): gemm13 with
 * the activation fused, then gemm2 with the router weight and the top-k
 * sum fused; two kernels a forward, no routing, no combine.
 *
 * Weights are mma.sync's A operand (16 rows), the token row its B operand
 * (the same row in all 8 columns, so every lane ends with its rows' sums).
 * Lane (g, t) copies 16 bytes of rows g and g + 8 (32 codes each, inputs
 * 32t .. 32t + 31 of a 128-input chunk); a k16 step pairs codes (j, j + 4)
 * and (j + 1, j + 5) of one 8-code word, so a shift and one LOP3 give a
 * bf16x2 of biased codes (0x4300 | q = 128 + q) and one bf16x2 FMA
 * q - zero exactly. gemm13's token row is staged once per block in shared
 * memory in that pair order, so a lane's B fragment is one 16-byte shared
 * read; gemm2's token rows (top-k of them, up to 57 KB for Mixtral) ride
 * in the ring with the codes instead (X_RING), reordered as they are read.
 * The group scale (and gemm2's router weight) multiplies each chunk's f32
 * result: weights exact, as in the FMA GEMVs. gemm2 is launched early
 * (programmatic dependent launch): its first chunks' codes load while
 * gemm13 ends, and it waits for gemm13 only before reading act.
 *
 * Bytes in flight: each warp streams its chunks (16 rows x 128 inputs,
 * 1 KB) through a ring of STAGES chunks in shared memory with cp.async,
 * STAGES - 1 chunks ahead of the one it multiplies, so the loads hold no
 * registers; a chunk's scales and zero points ride in registers. An item
 * is an output block of 16 of one slot (gemm13: 32 where each block
 * still walks two or more) or token (gemm2); the block's warps split its
 * input (gemm13: 4 warps per 8 outputs, two output blocks an item, or 2
 * warps for each of four; gemm2: the token's slots, 8 / top-k warps each)
 * and their partial sums meet in shared memory in warp order
 * (deterministic). The grid is what the SMs hold; each block walks
 * several items of its slot or token with the ring running on across
 * them, so gemm13's token row is staged once. */
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_gemv_units.h"
#include "backends/hip/hip_int4_decode_parts.h"

namespace {

using namespace mi4_gemm;

constexpr int DECODE_WARPS = 8;
/* gemm13's output blocks of 8 (16 rows: gate, up) an item: 2 (4 warps
 * split each block's input) or 4 (2 warps each: longer runs a warp, fewer
 * items a block; mi4_hip_launch_int4_decode chooses) */
constexpr int GEMM13_ITEM_NARROW = 2, GEMM13_ITEM_WIDE = 4;
constexpr int CHUNK_BYTES = 1024; /* 16 rows x 128 inputs of codes */
/* gemm2 with its token rows in the ring (X_RING): a slot also holds the
 * chunk's 128 inputs of the run's row, 256 bytes, after its codes. */
constexpr int X_CHUNK_BYTES = 256;

/* uint4 of one ring slot. */
MI4_HOST_DEVICE constexpr int slot_uint4(bool x_ring)
{
    return (CHUNK_BYTES + (x_ring ? X_CHUNK_BYTES : 0)) / 16;
}
/* Within every sm_80+ part's opt-in limit (sm_86 / sm_89: 99 KB). */
constexpr size_t DECODE_MAX_SHARED = 96 * 1024;

/* Shared memory of one block: the warps' rings, the staged token rows
 * (bf16, pair order; none with x_ring, whose slots carry the inputs), the
 * warps' partial sums (two items' worth) and (gemm2) the token's router
 * weights and the slot table. */
size_t decode_shared_bytes(bool gated, const mi4_gemm::gemm_params &p,
                           const mi4_hip_int4_matrix &q, int stages, bool x_ring = false)
{
    const size_t rows = gated ? 1 : (size_t)p.topk;
    const size_t tables = gated ? 0 : rows * sizeof(float) + (size_t)p.num_slots * sizeof(int);
    return (size_t)DECODE_WARPS * stages * slot_uint4(x_ring) * 16 +
           (x_ring ? 0 : rows * (size_t)q.inner_padded * 2) + 2 * DECODE_WARPS * 16 * sizeof(float) + tables;
}

/* Whether the shallowest ring fits every sm_80+ part's shared memory. */
bool decode_fits(bool gated, const mi4_gemm::gemm_params &p, const mi4_hip_int4_matrix &q,
                 bool x_ring)
{
    return decode_shared_bytes(gated, p, q, 4, x_ring) <= DECODE_MAX_SHARED;
}

#if defined(MI4_MMA_NVIDIA)

constexpr int CHUNK = 128; /* inputs of one chunk */
/* X_RING: where a slot's inputs start (uint4), and the lanes that copy them */
constexpr int X_AT = CHUNK_BYTES / 16, X_LANES = X_CHUNK_BYTES / 16;

/* (row g, row g + 8) . token over one chunk (codes lo, hi; zero: the two
 * rows' zero points); x: the lane's 32 staged inputs (4 x 16 bytes in
 * pair order, or in input order with PAIR_ORDER_X: reordered here). */
template <bool PAIR_ORDER_X>
MI4_DEVICE void chunk_dot(const uint4 &code_lo, const uint4 &code_hi, const uint32_t (&zero)[2],
                          const uint4 *x, float &lo, float &hi)
{
    const uint32_t bias_lo = int4_bias_pair((int)zero[0]), bias_hi = int4_bias_pair((int)zero[1]);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const uint4 xv = PAIR_ORDER_X ? pair_order(x[w]) : x[w];
        uint32_t pl[4], ph[4];
        dequant_word(int4_word_of(code_lo, w), bias_lo, pl);
        dequant_word(int4_word_of(code_hi, w), bias_hi, ph);
        mma_16816(c, pl[0], ph[0], pl[1], ph[1], xv.x, xv.y);
        mma_16816(c, pl[2], ph[2], pl[3], ph[3], xv.z, xv.w);
    }
    lo = c[0];
    hi = c[2];
}

/* A warp's stream: `items` items, each plan.runs runs of the warp's
 * chunks [run.first, run.first + run.per) (a run: one slot's rows; chunks
 * past run.end and runs plan.start_run finds empty are steps with nothing
 * to load). The chunks flow through the warp's ring of STAGES slots
 * (2 x 32 uint4 each), STAGES - 1 steps ahead of the one multiplied,
 * across run and item boundaries. A run's rows are looked up once, at its
 * first load; its router weight and staged input row once, at its first
 * multiply. `stage` (called once, by every thread of the block, with the
 * first chunks in flight) stages the token rows and synchronizes the
 * block; plan.done(k, lo, hi) ends item k (every warp calls it at the same
 * step: it synchronizes the block). Each lane reads back only the codes it
 * copied itself: cp.async.wait_group alone orders them. With X_RING a slot
 * also carries the chunk's 128 inputs of the run's token row (rows.x_row,
 * copied by 16 lanes, in input order), so no row is staged: a warp barrier
 * after the wait lets every lane read them. The first STAGES - 1 slots'
 * inputs are plain loads after stage() (where gemm2 waits for gemm13, which
 * writes them): their codes are in flight before it. */
template <int STAGES, bool ZEROS, bool X_RING = false, typename Plan, typename Stage>
MI4_DEVICE void stream_items(const mi4_hip_int4_matrix &q, const Plan &plan, int items,
                             uint4 *ring, Stage stage)
{
    constexpr int SLOT = slot_uint4(X_RING);
    const int lane = mi4_lane(), t = lane & 3;
    /* The scale bits and zero points of slot s's rows (g, g + 8), kept as
     * loaded: combining them at issue would wait there for the loads. */
    uint32_t scales[STAGES][2], landed = 0u; /* landed: bit s, slot s holds a chunk */
    uint32_t zeros[ZEROS ? STAGES : 1][2] = {}; /* none without zero points: 8 */
    item_rows rows;
    bool run_loads = false; /* the same in every lane: mma.sync needs the whole warp */
    int issue_k = 0, issue_r = 0, issue_c = 0;
    /* X_RING: the first slots' inputs are read after stage() (the previous
     * kernel writes them), their codes before it: where each comes from */
    const uint16_t *first_x[STAGES], *held_x = nullptr; /* held_x: the last issue's, unread */
    bool before_stage = true;
    auto issue = [&](int s) {
        bool has = false;
        if (issue_k < items) {
            if (issue_c == 0)
                run_loads = plan.start_run(issue_k, issue_r, rows);
            const int c = plan.run.first + issue_c;
            has = run_loads && c < plan.run.end;
            if (has) {
                issue_chunk<ZEROS>(q, rows, c, ring + s * SLOT, scales[s], zeros[ZEROS ? s : 0]);
                if (X_RING && lane < X_LANES) {
                    const int at = c * CHUNK + lane * 8; /* inputs past q.inner: zeros */
                    if (before_stage)
                        held_x = at + 8 <= q.inner ? rows.x_row + at : nullptr;
                    else
                        mi4_copy16(ring + s * SLOT + X_AT + lane, rows.x_row + at,
                                   at + 8 <= q.inner);
                }
            }
            if (++issue_c == plan.run.per) {
                issue_c = 0;
                if (++issue_r == plan.runs) {
                    issue_r = 0;
                    issue_k++;
                }
            }
        }
        landed = has ? landed | 1u << s : landed & ~(1u << s);
        mi4_copy_commit();
    };
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        held_x = nullptr;
        issue(s);
        first_x[s] = held_x;
    }
    stage();
    before_stage = false;
    if (X_RING && lane < X_LANES) /* plain loads: seen after the step's warp barrier */
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++)
            ring[s * SLOT + X_AT + lane] =
                first_x[s] != nullptr ? *(const uint4 *)first_x[s] : make_uint4(0u, 0u, 0u, 0u);
    float lo = 0.0f, hi = 0.0f, factor = plan.factor(0);
    const uint4 *x =
        X_RING ? nullptr : plan.xs + plan.input_row(0) + (plan.run.first * CHUNK + 32 * t) / 8;
    int k = 0, r = 0, c = 0;
    while (k < items) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            if (k < items) { /* uniform over the block */
                mi4_copy_wait<STAGES - 2>(); /* step (k, r, c) has landed */
                if (X_RING)
                    __syncwarp(); /* the inputs other lanes copied */
                asm volatile("" ::: "memory"); /* no shared read moves above the wait */
                if (landed >> s & 1u) {
                    const uint4 *slot = ring + s * SLOT;
                    float dot_lo, dot_hi;
                    const uint32_t(&zero)[2] = zeros[ZEROS ? s : 0];
                    const uint32_t eight[2] = { 8u, 8u };
                    chunk_dot<X_RING>(slot[lane], slot[MI4_WARP + lane], ZEROS ? zero : eight,
                                      X_RING ? slot + X_AT + 4 * t : x + c * (CHUNK / 8),
                                      dot_lo, dot_hi);
                    lo = fmaf(dot_lo, int4_scale_of(q, (uint16_t)scales[s][0]) * factor, lo);
                    hi = fmaf(dot_hi, int4_scale_of(q, (uint16_t)scales[s][1]) * factor, hi);
                }
                asm volatile("" ::: "memory"); /* slot s - 1 was read in the step before */
                issue((s + STAGES - 1) % STAGES);
                if (++c == plan.run.per) {
                    c = 0;
                    if (++r == plan.runs) {
                        r = 0;
                        plan.done(k, lo, hi);
                        lo = hi = 0.0f;
                        k++;
                    }
                    factor = plan.factor(r);
                    if (!X_RING)
                        x = plan.xs + plan.input_row(r) + (plan.run.first * CHUNK + 32 * t) / 8;
                }
            }
        }
    }
    mi4_copy_wait<0>();
}

/* Puts this warp's sums of item k (lo: row g, hi: row g + 8) in the
 * item's half of `partial` ([2][DECODE_WARPS][16], by item parity: the
 * half is free again once every warp has passed the next item's barrier)
 * and synchronizes the block; returns that half, [warp][16] in warp order. */
MI4_DEVICE const float *publish_partials(float *partial, int k, float lo, float hi)
{
    const int warp = (int)threadIdx.x / MI4_WARP, lane = mi4_lane(), g = lane >> 2;
    float *buf = partial + (k & 1) * DECODE_WARPS * 16;
    if ((lane & 3) == 0) {
        buf[warp * 16 + g] = lo;
        buf[warp * 16 + 8 + g] = hi;
    }
    __syncthreads();
    return buf;
}

/* gemm13's plan: item k is the output block of BLOCKS x 8 outputs
 * rank + k * blocks of one slot; warp (split s, output block b)
 * takes chunk run s; row g is the gate row, g + 8 the up row of output
 * 8 * block + g. Partial sums meet in shared memory (publish_partials:
 * one barrier an item) and warp 0 applies the activation. */
template <int BLOCKS> struct gemm13_plan {
    static constexpr int SPLIT = DECODE_WARPS / BLOCKS;
    const gemm_params *p;
    const uint4 *xs;
    float *partial; /* [2][DECODE_WARPS][16] */
    const mi4_hip_int4_matrix *q;
    int slot, expert, rank, blocks, runs;
    split_run run;

    MI4_DEVICE int out_of(int k, int b, int g) const
    {
        return ((rank + k * blocks) * BLOCKS + b) * 8 + g;
    }
    MI4_DEVICE bool start_run(int k, int r, item_rows &rows) const
    {
        (void)r;
        const int warp = (int)threadIdx.x / MI4_WARP;
        const int out = out_of(k, warp % BLOCKS, mi4_lane() >> 2);
        const bool valid = out < p->out_cols;
        rows = rows_of(*q, expert, valid ? out : -1, valid ? p->out_cols + out : -1);
        return true;
    }
    MI4_DEVICE float factor(int r) const
    {
        (void)r;
        return 1.0f;
    }
    MI4_DEVICE int input_row(int r) const
    {
        (void)r;
        return 0;
    }
    MI4_DEVICE void done(int k, float gate, float up) const
    {
        const float *buf = publish_partials(partial, k, gate, up);
        const int tid = (int)threadIdx.x;
        if (tid < 8 * BLOCKS) {
            const int b = tid / 8, row = tid % 8, o = out_of(k, b, row);
            float sum_gate = 0.0f, sum_up = 0.0f;
            for (int s = 0; s < SPLIT; s++) {
                sum_gate += buf[(s * BLOCKS + b) * 16 + row];
                sum_up += buf[(s * BLOCKS + b) * 16 + 8 + row];
            }
            if (o < p->out_cols)
                p->act[(size_t)slot * p->out_cols + o] = mi4_dev_f32_to_bf16(
                    activate(p->activation, sum_gate, sum_up, p->limit, p->alpha, p->beta));
        }
    }
};

/* gemm13: blocks (slot, rank): the slot's output blocks rank, rank +
 * blocks, ... A bad or non-local slot skips the block (gemm2 reports a bad
 * one). */
template <int STAGES, int BLOCKS, bool ZEROS>
__global__ void __launch_bounds__(DECODE_WARPS *MI4_WARP, 3)
    int4_decode_gemm13(gemm_params p, mi4_hip_int4_matrix q, int blocks)
{
    extern __shared__ uint4 decode_shared[];
    mi4_grid_allow_next(); /* gemm2's blocks may start loading weights as these end */
    const int slot = (int)blockIdx.x / blocks, rank = (int)blockIdx.x % blocks;
    const int expert = mi4_slot_local(p.combine.check, slot);
    const int units = (p.out_cols + 8 * BLOCKS - 1) / (8 * BLOCKS);
    const int items = items_of(units, rank, blocks);
    if (expert < 0 || items == 0)
        return;
    const int warp = (int)threadIdx.x / MI4_WARP;
    uint4 *xs = decode_shared + DECODE_WARPS * STAGES * slot_uint4(false);
    gemm13_plan<BLOCKS> plan;
    plan.p = &p;
    plan.q = &q;
    plan.xs = xs;
    plan.partial = (float *)(xs + q.inner_padded / 8);
    plan.slot = slot;
    plan.expert = expert;
    plan.rank = rank;
    plan.blocks = blocks;
    plan.run = split_chunks(q, warp / BLOCKS, plan.SPLIT);
    plan.runs = 1;
    const uint16_t *x = p.a + (size_t)(p.a_by_slot ? slot : slot / p.topk) * p.inner;
    stream_items<STAGES, ZEROS>(q, plan, items, decode_shared + warp * STAGES * slot_uint4(false), [&]() {
        stage_rows(xs, 1, q, [&](int) { return x; });
        __syncthreads();
    });
}

/* gemm2's plan: item k is the output block of 16 rank + k * blocks of one
 * token; the token's slots go to groups of 8 / top-k warps (one slot each;
 * with more than 8 slots each warp takes every 8th in turn), a slot's
 * chunks split over its group; the output is the sum over the slots with
 * the router weight (bad or non-local slots: none). */
struct gemm2_plan {
    const gemm_params *p;
    const uint4 *xs;
    float *partial; /* [2][DECODE_WARPS][16] */
    const mi4_hip_int4_matrix *q;
    const int *slot_expert;
    const float *weights; /* the token's factors, staged: router weight or 1 */
    int token, rank, blocks, runs, first_slot, groups;
    split_run run;

    /* run r: the warp's r-th slot of the token (j past top-k: none) */
    MI4_DEVICE int slot_of(int r) const { return first_slot + r * groups; }
    MI4_DEVICE bool start_run(int k, int r, item_rows &rows) const
    {
        const int j = slot_of(r), g = mi4_lane() >> 2, out0 = (rank + k * blocks) * 16;
        const int expert = j < p->topk ? slot_expert[(size_t)token * p->topk + j] : -1;
        rows = rows_of(*q, expert, out0 + g < p->out_cols ? out0 + g : -1,
                       out0 + 8 + g < p->out_cols ? out0 + 8 + g : -1);
        rows.x_row = p->a + ((size_t)token * p->topk + (j < p->topk ? j : 0)) * (size_t)p->inner;
        return expert >= 0;
    }
    MI4_DEVICE float factor(int r) const
    {
        const int j = slot_of(r);
        return j < p->topk ? weights[j] : 1.0f;
    }
    MI4_DEVICE int input_row(int r) const
    {
        const int j = slot_of(r);
        return (j < p->topk ? j : 0) * (q->inner_padded / 8);
    }
    MI4_DEVICE void done(int k, float lo, float hi) const
    {
        const float *buf = publish_partials(partial, k, lo, hi);
        const int tid = (int)threadIdx.x, out0 = (rank + k * blocks) * 16;
        if (tid < 16 && out0 + tid < p->out_cols) {
            float sum = 0.0f;
            for (int w = 0; w < DECODE_WARPS; w++)
                sum += buf[w * 16 + tid];
            mi4_combine_store(p->combine, (size_t)token * p->out_cols + out0 + tid, sum);
        }
    }
};

/* gemm2 + combine: blocks (token, rank): the token's output blocks rank,
 * rank + blocks, ... Block 0 reports the smallest bad slot; a synchronous
 * forward then writes no output, an asynchronous one leaves the bad slots
 * out. X_RING: the token rows ride in the ring with the codes (no staged
 * rows: less shared memory, deeper rings); the first slots' rows are read
 * after the wait for gemm13, their codes before it. */
template <int STAGES, bool X_RING, bool ZEROS>
__global__ void __launch_bounds__(DECODE_WARPS *MI4_WARP, X_RING ? 2 : 3) /* X_RING: no spills */
    int4_decode_gemm2(gemm_params p, mi4_hip_int4_matrix q, int blocks)
{
    extern __shared__ uint4 decode_shared[];
    constexpr int SLOT = slot_uint4(X_RING);
    const int token = (int)blockIdx.x / blocks, rank = (int)blockIdx.x % blocks;
    const int row_uint4 = X_RING ? 0 : q.inner_padded / 8;
    const int warp = (int)threadIdx.x / MI4_WARP;
    uint4 *xs = decode_shared + DECODE_WARPS * STAGES * SLOT;
    float *partial = (float *)(xs + (size_t)p.topk * row_uint4);
    float *weights = partial + 2 * DECODE_WARPS * 16;
    int *slot_expert = (int *)(weights + p.topk);
    const int first_bad = map_slots(p, slot_expert); /* synchronizes the block */
    if (first_bad != INT_MAX) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            mi4_report_bad_slot(p.combine.check, first_bad);
        if (!p.combine.check.sticky)
            return;
    }
    const int items = items_of((p.out_cols + 15) / 16, rank, blocks);
    if (items == 0)
        return;
    const size_t slot0 = (size_t)token * p.topk;
    const int splits = p.topk < DECODE_WARPS ? DECODE_WARPS / p.topk : 1;
    gemm2_plan plan;
    plan.p = &p;
    plan.q = &q;
    plan.xs = xs;
    plan.partial = partial;
    plan.slot_expert = slot_expert;
    plan.weights = weights;
    plan.token = token;
    plan.rank = rank;
    plan.blocks = blocks;
    plan.groups = DECODE_WARPS / splits;
    plan.first_slot = warp / splits;
    plan.run = split_chunks(q, warp % splits, splits);
    plan.runs = (p.topk + plan.groups - 1) / plan.groups;
    stream_items<STAGES, ZEROS, X_RING>(q, plan, items, decode_shared + warp * STAGES * SLOT, [&]() {
        mi4_grid_wait_previous(); /* the act rows are gemm13's (launched early) */
        /* a skipped slot's act row was never written: zeros */
        if (!X_RING)
            stage_rows(xs, p.topk, q, [&](int r) {
                return slot_expert[slot0 + r] >= 0 ? p.a + (slot0 + r) * (size_t)p.inner
                                                   : nullptr;
            });
        for (int j = (int)threadIdx.x; j < p.topk; j += (int)blockDim.x)
            weights[j] = p.weight_on_output && slot_expert[slot0 + j] >= 0
                             ? p.topk_weights[slot0 + j]
                             : 1.0f;
        __syncthreads();
    });
}

#else /* no mma.sync: int4_mma is never set (mi4_hip_int4_mma_serves), these never launch */

template <int STAGES, int BLOCKS, bool ZEROS>
__global__ void int4_decode_gemm13(gemm_params p, mi4_hip_int4_matrix q, int blocks)
{
    (void)p;
    (void)q;
    (void)blocks;
}

template <int STAGES, bool X_RING, bool ZEROS>
__global__ void int4_decode_gemm2(gemm_params p, mi4_hip_int4_matrix q, int blocks)
{
    (void)p;
    (void)q;
    (void)blocks;
}

#endif

/* A ring depth's kernel, its shared bytes and how many of its blocks an SM
 * holds (0: it does not fit). */
struct decode_choice {
    void (*kernel)(gemm_params, mi4_hip_int4_matrix, int);
    size_t shared;
    int per_sm;
};

/* The kernel for a ring depth, zero points or none */
template <int STAGES, bool ZEROS>
void (*decode_kernel(bool gated, bool x_ring, int item))(gemm_params, mi4_hip_int4_matrix, int)
{
    return gated    ? (item == GEMM13_ITEM_WIDE ? int4_decode_gemm13<STAGES, GEMM13_ITEM_WIDE, ZEROS>
                                                : int4_decode_gemm13<STAGES, GEMM13_ITEM_NARROW, ZEROS>)
           : x_ring ? int4_decode_gemm2<STAGES, true, ZEROS>
                    : int4_decode_gemm2<STAGES, false, ZEROS>;
}

/* The same for a matrix with zero points (`zeros`) or without */
template <int STAGES>
void (*decode_kernel_for(bool zeros, bool gated, bool x_ring,
                         int item))(gemm_params, mi4_hip_int4_matrix, int)
{
    return zeros ? decode_kernel<STAGES, true>(gated, x_ring, item)
                 : decode_kernel<STAGES, false>(gated, x_ring, item);
}

template <int STAGES>
decode_choice decode_choice_of(bool gated, const gemm_params &p, const mi4_hip_int4_matrix &q,
                               bool x_ring, int item)
{
    decode_choice c;
    c.kernel = decode_kernel_for<STAGES>(q.zeros != nullptr, gated, x_ring, item);
    c.shared = decode_shared_bytes(gated, p, q, STAGES, x_ring);
    if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&c.per_sm, c.kernel, DECODE_WARPS * MI4_WARP,
                                                     c.shared) != hipSuccess)
        c.per_sm = 0;
    return c;
}

/* Tuning and test knobs: MOEINT4_HIP_DECODE_RING=6|8 asks for a deeper
 * ring where it fits (MOEINT4_HIP_DECODE_RING2: gemm2's alone, where set),
 * MOEINT4_HIP_DECODE_BLOCKS=n the blocks per slot
 * (gemm13) or token (gemm2), so that 1 makes every block walk all output
 * blocks. 0: unset or not a positive number (the choice by occupancy).
 * MOEINT4_HIP_DECODE_X=staged keeps gemm2's token rows staged in shared
 * memory where they would ride in the ring; MOEINT4_HIP_DECODE_ITEM
 * gemm13's output blocks an item (gemm13_item). */
int decode_knob(const char *name)
{
    const char *v = getenv(name);
    const int n = v != nullptr ? atoi(v) : 0;
    return n > 0 ? n : 0;
}

/* gemm13's output blocks an item for `share` blocks a slot: 4 where every
 * block still walks two items or more (each warp's run of a row is twice
 * as long and a block meets its warps half as often), else 2.
 * MOEINT4_HIP_DECODE_ITEM=2|4 forces one. */
int gemm13_item(int out_cols, int64_t share)
{
    const int forced = decode_knob("MOEINT4_HIP_DECODE_ITEM");
    if (forced == GEMM13_ITEM_NARROW || forced == GEMM13_ITEM_WIDE)
        return forced;
    const int64_t wide_units = (out_cols + 8 * GEMM13_ITEM_WIDE - 1) / (8 * GEMM13_ITEM_WIDE);
    return wide_units >= 2 * share ? GEMM13_ITEM_WIDE : GEMM13_ITEM_NARROW;
}

} // namespace

hipError_t mi4_hip_int4_decode_init(void)
{
#if defined(MI4_PLATFORM_NVIDIA)
    int device = 0, limit = 0;
    hipError_t e = hipGetDevice(&device);
    if (e == hipSuccess)
        e = hipDeviceGetAttribute(&limit, hipDeviceAttributeSharedMemPerBlockOptin, device);
    if (e != hipSuccess)
        return e;
    for (int zeros = 0; zeros < 2; zeros++)
        for (int gated = 0; gated < 2; gated++)
            for (int variant = 0; variant < 2; variant++) { /* item width, or x_ring */
                const int item = variant ? GEMM13_ITEM_WIDE : GEMM13_ITEM_NARROW;
                const bool x_ring = variant != 0;
                const hipError_t results[] = {
                    allow_decode_shared(decode_kernel_for<8>(zeros, gated, x_ring, item), limit),
                    allow_decode_shared(decode_kernel_for<6>(zeros, gated, x_ring, item), limit),
                    allow_decode_shared(decode_kernel_for<4>(zeros, gated, x_ring, item), limit)};
                for (hipError_t r : results)
                    if (r != hipSuccess)
                        return r;
            }
#endif
    return hipSuccess;
}

/* The ring depth: 4 chunks a warp unless MOEINT4_HIP_DECODE_RING asks for
 * 6 or 8 (where they fit): on the H200 deeper rings were slower at every
 * decode point (bench/results/hip-int4-decode-stream-2026-12-01.md). The
 * grid: as many blocks as the SMs hold, spread over the slots (gemm13) or
 * tokens (gemm2), each walking its share of their output blocks with its
 * ring running across them. */
hipError_t mi4_hip_launch_int4_decode(bool gated, const mi4_hip_gemm_args *a, bool *served)
{
    gemm_params p = make_params(a, gated);
    p.b = nullptr; /* the weights are q below */
    const mi4_hip_int4_matrix q = gated ? a->weights->q13 : a->weights->q2;
    /* gemm2's token rows (act, 16-byte aligned rows of whole 8-input pieces)
     * ride in the ring unless asked otherwise */
    const char *x_mode = getenv("MOEINT4_HIP_DECODE_X");
    const bool x_ring = !gated && q.inner % 8 == 0 &&
                        !(x_mode != nullptr && strcmp(x_mode, "staged") == 0);
    *served = a->weights->int4_mma && decode_fits(gated, p, q, x_ring);
    if (!*served)
        return hipSuccess;
    const int ring2 = gated ? 0 : decode_knob("MOEINT4_HIP_DECODE_RING2");
    const int ring = ring2 > 0 ? ring2 : decode_knob("MOEINT4_HIP_DECODE_RING");
    auto choose = [&](int item) {
        decode_choice c = ring == 8   ? decode_choice_of<8>(gated, p, q, x_ring, item)
                          : ring == 6 ? decode_choice_of<6>(gated, p, q, x_ring, item)
                                      : decode_choice{};
        return c.per_sm >= 1 ? c : decode_choice_of<4>(gated, p, q, x_ring, item);
    };
    const int64_t owners = gated ? p.num_slots : p.combine.num_tokens;
    const int forced_blocks = decode_knob("MOEINT4_HIP_DECODE_BLOCKS");
    auto share_of = [&](const decode_choice &c) { /* blocks per slot or token */
        const int64_t resident = (int64_t)(a->multiprocessors > 0 ? a->multiprocessors : 1) * c.per_sm;
        return forced_blocks > 0 ? (int64_t)forced_blocks
                                 : resident / owners > 1 ? resident / owners : (int64_t)1;
    };
    decode_choice use = choose(GEMM13_ITEM_NARROW);
    if (use.per_sm < 1 || owners == 0)
        return use.per_sm < 1 ? hipErrorInvalidValue : hipSuccess; /* decode_fits said it fits */
    int64_t share = share_of(use);
    const int item = gated ? gemm13_item(p.out_cols, share) : GEMM13_ITEM_NARROW;
    if (item != GEMM13_ITEM_NARROW) {
        const decode_choice wide = choose(item);
        if (wide.per_sm < 1)
            return hipErrorInvalidValue;
        use = wide;
        share = share_of(use);
    }
    const int64_t units = gated ? (p.out_cols + 8 * item - 1) / (8 * item) : (p.out_cols + 15) / 16;
    if (units == 0)
        return hipSuccess;
    const int64_t per_owner = share < units ? share : units;
    /* gemm2 starts streaming its weights while gemm13's last blocks run */
    const dim3 grid((unsigned)(owners * per_owner)), block(DECODE_WARPS * MI4_WARP);
    return gated ? mi4_launch(use.kernel, grid, block, use.shared, a->stream, p, q, (int)per_owner)
                 : mi4_launch_early(use.kernel, grid, block, use.shared, a->stream, p, q,
                                    (int)per_owner);
}
