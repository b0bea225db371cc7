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
 * q - zero exactly. The token rows are staged once per block in shared
 * memory in that pair order, so a lane's B fragment is one 16-byte shared
 * read. The group scale (and gemm2's router weight) multiplies each
 * chunk's f32 result: weights exact, as in the FMA GEMVs.
 *
 * Bytes in flight: each warp streams its run of chunks (16 rows x 128
 * inputs, 1 KB) through a ring of STAGES chunks in shared memory with
 * cp.async, STAGES - 1 chunks ahead of the one it multiplies, so the loads
 * hold no registers; a chunk's scales and zero points ride in registers.
 * The block's warps split the input (gemm13: 4 warps per 8 outputs, two
 * output blocks a block; gemm2: the token's slots, 8 / top-k warps each)
 * and their partial sums meet in shared memory in warp order
 * (deterministic). */
#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_gemv_units.h"
#include "backends/hip/hip_int4_mma_ops.h"

namespace {

using namespace mi4_gemm;

constexpr int DECODE_WARPS = 8;
constexpr int GEMM13_BLOCKS = 2; /* output blocks of 8 (16 rows: gate, up) a block */
constexpr int CHUNK_BYTES = 1024; /* 16 rows x 128 inputs of codes */
/* Within every sm_80+ part's opt-in limit (sm_86 / sm_89: 99 KB). */
constexpr size_t DECODE_MAX_SHARED = 96 * 1024;

/* Shared memory of one block: the warps' rings, the staged token rows
 * (bf16, pair order), the warps' partial sums and (gemm2) the slot table. */
size_t decode_shared_bytes(bool gated, const mi4_gemm::gemm_params &p,
                           const mi4_hip_int4_matrix &q, int stages)
{
    const size_t rows = gated ? 1 : (size_t)p.topk;
    const size_t table = gated ? 0 : (size_t)p.num_slots * sizeof(int);
    return (size_t)DECODE_WARPS * stages * CHUNK_BYTES + rows * (size_t)q.inner_padded * 2 +
           DECODE_WARPS * 16 * sizeof(float) + table;
}

/* The ring depth that fits (8 or 4 chunks a warp); 0: none does. */
int decode_stages(bool gated, const mi4_gemm::gemm_params &p, const mi4_hip_int4_matrix &q)
{
    return decode_shared_bytes(gated, p, q, 8) <= DECODE_MAX_SHARED   ? 8
           : decode_shared_bytes(gated, p, q, 4) <= DECODE_MAX_SHARED ? 4
                                                                       : 0;
}

#if defined(MI4_MMA_NVIDIA)

constexpr int CHUNK = 128; /* inputs of one chunk */
constexpr int GEMM13_SPLIT = DECODE_WARPS / GEMM13_BLOCKS;

/* Where this lane's two rows of one expert start (nullptr: no row). */
struct item_rows {
    const uint8_t *codes[2];
    const uint16_t *scales[2];
    const uint8_t *zeros[2];
};

MI4_DEVICE item_rows rows_of(const mi4_hip_int4_matrix &q, int expert, int row_lo, int row_hi)
{
    const int t = mi4_lane() & 3;
    const int rows[2] = {row_lo, row_hi};
    item_rows r;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const bool valid = expert >= 0 && rows[h] >= 0;
        const size_t row = (size_t)(valid ? expert : 0) * q.rows + (size_t)(valid ? rows[h] : 0);
        r.codes[h] = valid ? q.codes + row * (size_t)(q.inner_padded / 2) + 16 * t : nullptr;
        r.scales[h] = q.scales + row * q.groups;
        r.zeros[h] = q.zeros ? q.zeros + row * q.groups : nullptr;
    }
    return r;
}

/* Starts chunk c of this lane's rows: codes into `slot` (row g at lane,
 * row g + 8 at 32 + lane; zeros for no row) by cp.async, the scale bits and
 * zero points (row g | row g + 8 << 16) into registers. A chunk is its group
 * for group 128; per-channel rows have one group. */
MI4_DEVICE void issue_chunk(const mi4_hip_int4_matrix &q, const item_rows &r, int c, uint4 *slot,
                            uint32_t &scales, uint32_t &zeros)
{
    const int lane = mi4_lane(), group = min(c, q.groups - 1);
    uint32_t scale[2], zero[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const bool valid = r.codes[h] != nullptr;
        mi4_copy16(slot + 32 * h + lane,
                   valid ? (const void *)(r.codes[h] + c * (CHUNK / 2)) : (const void *)q.codes,
                   valid);
        scale[h] = valid ? r.scales[h][group] : 0u;
        zero[h] = valid && r.zeros[h] ? r.zeros[h][group] : 8u;
    }
    scales = scale[0] | scale[1] << 16;
    zeros = zero[0] | zero[1] << 16;
}

/* A scale's bits as f32 (hardware conversion of f16: exact). */
MI4_DEVICE float decode_scale(const mi4_hip_int4_matrix &q, uint32_t bits)
{
    if (q.scales_bf16)
        return mi4_dev_bits_to_f32(bits << 16);
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"((unsigned short)bits));
    return f;
}

/* The 8 codes of `word` (code j at bits 4j) as q - zero in bf16x2 pairs
 * (c0, c4), (c1, c5), (c2, c6), (c3, c7): each nibble pair moved to bits
 * 0-3 of both halves (bf16 keeps 7 mantissa bits), ORed into 128.0,
 * then one FMA subtracting 128 + zero. */
MI4_DEVICE void dequant_word(uint32_t word, uint32_t bias, uint32_t (&pair)[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++)
        pair[i] = int4_pair_minus_zero(word, 4 * i, bias);
}

/* (row g, row g + 8) . token over one chunk (codes lo, hi; zero points
 * packed); x: the lane's 32 staged inputs (4 x 16 bytes in pair order). */
MI4_DEVICE void chunk_dot(const uint4 &code_lo, const uint4 &code_hi, uint32_t zeros,
                          const uint4 *x, float &lo, float &hi)
{
    const uint32_t z_lo = zeros & 0xffffu, z_hi = zeros >> 16;
    const uint32_t bias_lo = int4_bias_pair((int)z_lo), bias_hi = int4_bias_pair((int)z_hi);
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const uint4 xv = x[w];
        uint32_t pl[4], ph[4];
        dequant_word(int4_word_of(code_lo, w), bias_lo, pl);
        dequant_word(int4_word_of(code_hi, w), bias_hi, ph);
        mma_16816(c, pl[0], ph[0], pl[1], ph[1], xv.x, xv.y);
        mma_16816(c, pl[2], ph[2], pl[3], ph[3], xv.z, xv.w);
    }
    lo = c[0];
    hi = c[2];
}

/* 8 bf16 inputs in pair order: (x0, x4), (x1, x5), (x2, x6), (x3, x7). */
MI4_DEVICE uint4 pair_order(const uint4 &v)
{
    return make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632),
                      __byte_perm(v.y, v.w, 0x5410), __byte_perm(v.y, v.w, 0x7632));
}

/* Stages `rows` token rows (row(r): bf16 [inner]) into xs, inner_padded
 * inputs each (zeros past inner), in pair order; every thread takes part. */
template <typename RowOf>
MI4_DEVICE void stage_rows(uint4 *xs, int rows, const mi4_hip_int4_matrix &q, RowOf row)
{
    const int per_row = q.inner_padded / 8;
    for (int i = (int)threadIdx.x; i < rows * per_row; i += (int)blockDim.x) {
        const int r = i / per_row, k = (i % per_row) * 8;
        const uint16_t *src = row(r); /* nullptr: a row of zeros */
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (src == nullptr) {
        } else if (k + 8 <= q.inner && ((uintptr_t)(src + k) & 15u) == 0) {
            v = *(const uint4 *)(src + k);
        } else if (k < q.inner) {
            uint16_t e[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                e[j] = k + j < q.inner ? src[k + j] : (uint16_t)0;
            v = make_uint4(e[0] | (uint32_t)e[1] << 16, e[2] | (uint32_t)e[3] << 16,
                           e[4] | (uint32_t)e[5] << 16, e[6] | (uint32_t)e[7] << 16);
        }
        xs[i] = pair_order(v);
    }
}

/* This warp's chunks [c0, c1) of rows r: adds factor * scale * (rows .
 * staged inputs x_row) to lo / hi, streaming the chunks through the
 * warp's ring of STAGES slots (2 x 32 uint4 each). `stage` (called once,
 * by every thread of the block, with the first chunks in flight) stages
 * the token rows and synchronizes the block. Each lane reads back only
 * what it copied itself: cp.async.wait_group alone orders it. */
template <int STAGES, typename Stage>
MI4_DEVICE void run_chunks(const mi4_hip_int4_matrix &q, const item_rows &r, int c0, int c1,
                           const uint4 *x_row, float factor, uint4 *ring, Stage stage, float &lo,
                           float &hi)
{
    const int lane = mi4_lane(), t = lane & 3;
    uint32_t scales[STAGES], zeros[STAGES];
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (c0 + s < c1)
            issue_chunk(q, r, c0 + s, ring + s * 2 * MI4_WARP, scales[s], zeros[s]);
        mi4_copy_commit();
    }
    stage();
    for (int base = c0; base < c1; base += STAGES) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            const int c = base + s;
            mi4_copy_wait<STAGES - 2>(); /* chunk c has landed */
            asm volatile("" ::: "memory"); /* no shared read moves above the wait */
            if (c < c1) {
                const uint4 *slot = ring + s * 2 * MI4_WARP;
                float dot_lo, dot_hi;
                chunk_dot(slot[lane], slot[MI4_WARP + lane], zeros[s],
                          x_row + (c * CHUNK + 32 * t) / 8, dot_lo, dot_hi);
                lo = fmaf(dot_lo, decode_scale(q, scales[s] & 0xffffu) * factor, lo);
                hi = fmaf(dot_hi, decode_scale(q, scales[s] >> 16) * factor, hi);
            }
            /* the slot of chunk c - 1, read in the step before */
            const int next_slot = (s + STAGES - 1) % STAGES;
            asm volatile("" ::: "memory");
            if (c + STAGES - 1 < c1)
                issue_chunk(q, r, c + STAGES - 1, ring + next_slot * 2 * MI4_WARP,
                            scales[next_slot], zeros[next_slot]);
            mi4_copy_commit();
        }
    }
    mi4_copy_wait<0>();
}

/* gemm13: block (slot, GEMM13_BLOCKS x 8 outputs); warp (split s, output
 * block r) takes chunk run s; row g is the gate row, g + 8 the up row of
 * output 8 * block + g. A bad or non-local slot skips the block (gemm2
 * reports a bad one). */
template <int STAGES>
__global__ void __launch_bounds__(DECODE_WARPS *MI4_WARP)
    int4_decode_gemm13(gemm_params p, mi4_hip_int4_matrix q)
{
    extern __shared__ uint4 decode_shared[];
    const int per_slot = (p.out_cols + 8 * GEMM13_BLOCKS - 1) / (8 * GEMM13_BLOCKS);
    const int slot = (int)blockIdx.x / per_slot;
    const int expert = mi4_slot_local(p.combine.check, slot);
    if (expert < 0)
        return;
    const int warp = (int)threadIdx.x / MI4_WARP, lane = mi4_lane(), g = lane >> 2;
    uint4 *ring = decode_shared + warp * STAGES * 2 * MI4_WARP;
    uint4 *xs = decode_shared + DECODE_WARPS * STAGES * 2 * MI4_WARP;
    float *partial = (float *)(xs + q.inner_padded / 8);
    const int block = warp % GEMM13_BLOCKS, split = warp / GEMM13_BLOCKS;
    const int out = ((int)blockIdx.x % per_slot * GEMM13_BLOCKS + block) * 8 + g;
    const bool valid = out < p.out_cols;
    const item_rows rows = rows_of(q, expert, valid ? out : -1, valid ? p.out_cols + out : -1);
    const int chunks = q.inner_padded / CHUNK, per_split = (chunks + GEMM13_SPLIT - 1) / GEMM13_SPLIT;
    const int first = min(chunks, split * per_split), end = min(chunks, first + per_split);
    const uint16_t *x = p.a + (size_t)(p.a_by_slot ? slot : slot / p.topk) * p.inner;
    float gate = 0.0f, up = 0.0f;
    run_chunks<STAGES>(q, rows, first, end, xs, 1.0f, ring,
                       [&]() {
                           stage_rows(xs, 1, q, [&](int) { return x; });
                           __syncthreads();
                       },
                       gate, up);
    if ((lane & 3) == 0) {
        partial[warp * 16 + g] = gate;
        partial[warp * 16 + 8 + g] = up;
    }
    __syncthreads();
    const int tid = (int)threadIdx.x;
    if (tid < 8 * GEMM13_BLOCKS) {
        const int b = tid / 8, row = tid % 8;
        const int o = ((int)blockIdx.x % per_slot * GEMM13_BLOCKS + b) * 8 + row;
        float sum_gate = 0.0f, sum_up = 0.0f;
        for (int s = 0; s < GEMM13_SPLIT; s++) {
            sum_gate += partial[(s * GEMM13_BLOCKS + b) * 16 + row];
            sum_up += partial[(s * GEMM13_BLOCKS + b) * 16 + 8 + row];
        }
        if (o < p.out_cols)
            p.act[(size_t)slot * p.out_cols + o] = mi4_dev_f32_to_bf16(
                activate(p.activation, sum_gate, sum_up, p.limit, p.alpha, p.beta));
    }
}

/* gemm2 + combine: block (token, 16 outputs); the token's slots go to
 * groups of 8 / top-k warps (one slot each; with more than 8 slots each
 * warp takes every 8th), a slot's chunks split over its group; the output
 * is the sum over the slots with the router weight (bad or non-local
 * slots: none). Block 0 reports the smallest bad slot; a synchronous
 * forward then writes no output, an asynchronous one leaves the bad slots
 * out. */
template <int STAGES>
__global__ void __launch_bounds__(DECODE_WARPS *MI4_WARP)
    int4_decode_gemm2(gemm_params p, mi4_hip_int4_matrix q)
{
    extern __shared__ uint4 decode_shared[];
    const int per_token = (p.out_cols + 15) / 16;
    const int token = (int)blockIdx.x / per_token, out0 = (int)blockIdx.x % per_token * 16;
    const int row_uint4 = q.inner_padded / 8;
    const int warp = (int)threadIdx.x / MI4_WARP, lane = mi4_lane(), g = lane >> 2;
    uint4 *ring = decode_shared + warp * STAGES * 2 * MI4_WARP;
    uint4 *xs = decode_shared + DECODE_WARPS * STAGES * 2 * MI4_WARP;
    float *partial = (float *)(xs + (size_t)p.topk * row_uint4);
    int *slot_expert = (int *)(partial + DECODE_WARPS * 16);
    const int first_bad = map_slots(p, slot_expert); /* synchronizes the block */
    if (first_bad != INT_MAX) {
        if (blockIdx.x == 0 && threadIdx.x == 0)
            mi4_report_bad_slot(p.combine.check, first_bad);
        if (!p.combine.check.sticky)
            return;
    }
    const size_t slot0 = (size_t)token * p.topk;
    const int splits = p.topk < DECODE_WARPS ? DECODE_WARPS / p.topk : 1;
    const int groups = DECODE_WARPS / splits, split = warp % splits;
    const int chunks = q.inner_padded / CHUNK, per_split = (chunks + splits - 1) / splits;
    const int first = min(chunks, split * per_split), end = min(chunks, first + per_split);
    const int row_lo = out0 + g < p.out_cols ? out0 + g : -1;
    const int row_hi = out0 + 8 + g < p.out_cols ? out0 + 8 + g : -1;
    float lo = 0.0f, hi = 0.0f;
    int j = warp / splits;
    bool staged = false;
    do { /* every warp once at least: the first run stages the token rows */
        const bool has = j < p.topk;
        const int expert = has ? slot_expert[slot0 + j] : -1;
        const float factor = has && p.weight_on_output && expert >= 0 ? p.topk_weights[slot0 + j]
                                                                      : 1.0f;
        run_chunks<STAGES>(
            q, rows_of(q, expert, row_lo, row_hi), first, expert >= 0 ? end : first,
            xs + (size_t)(has ? j : 0) * row_uint4, factor, ring,
            [&]() {
                if (staged)
                    return;
                /* a skipped slot's act row was never written: zeros */
                stage_rows(xs, p.topk, q, [&](int r) {
                    return slot_expert[slot0 + r] >= 0 ? p.a + (slot0 + r) * (size_t)p.inner
                                                       : nullptr;
                });
                __syncthreads();
            },
            lo, hi);
        staged = true;
        j += groups;
    } while (j < p.topk);
    if ((lane & 3) == 0) {
        partial[warp * 16 + g] = lo;
        partial[warp * 16 + 8 + g] = hi;
    }
    __syncthreads();
    const int tid = (int)threadIdx.x;
    if (tid < 16 && out0 + tid < p.out_cols) {
        float sum = 0.0f;
        for (int w = 0; w < DECODE_WARPS; w++)
            sum += partial[w * 16 + tid];
        mi4_combine_store(p.combine, (size_t)token * p.out_cols + out0 + tid, sum);
    }
}

#else /* no mma.sync: mi4_hip_int4_decode_serves is false, these never launch */

template <int STAGES> __global__ void int4_decode_gemm13(gemm_params p, mi4_hip_int4_matrix q)
{
    (void)p;
    (void)q;
}

template <int STAGES> __global__ void int4_decode_gemm2(gemm_params p, mi4_hip_int4_matrix q)
{
    (void)p;
    (void)q;
}

#endif

template <typename Kernel> hipError_t allow_decode_shared(Kernel kernel)
{
    return hipFuncSetAttribute((const void *)kernel, hipFuncAttributeMaxDynamicSharedMemorySize,
                               (int)DECODE_MAX_SHARED);
}

} // namespace

bool mi4_hip_int4_decode_serves(bool gated, const mi4_hip_gemm_args *a)
{
    if (!a->weights->int4_mma)
        return false;
    return decode_stages(gated, make_params(a, gated),
                         gated ? a->weights->q13 : a->weights->q2) > 0;
}

hipError_t mi4_hip_int4_decode_init(void)
{
#if defined(MI4_PLATFORM_NVIDIA)
    const hipError_t results[] = {
        allow_decode_shared(int4_decode_gemm13<8>), allow_decode_shared(int4_decode_gemm13<4>),
        allow_decode_shared(int4_decode_gemm2<8>), allow_decode_shared(int4_decode_gemm2<4>)};
    for (hipError_t e : results)
        if (e != hipSuccess)
            return e;
#endif
    return hipSuccess;
}

hipError_t mi4_hip_launch_int4_decode(bool gated, const mi4_hip_gemm_args *a)
{
    gemm_params p = make_params(a, gated);
    p.b = nullptr; /* the weights are q below */
    const mi4_hip_int4_matrix q = gated ? a->weights->q13 : a->weights->q2;
    const int stages = decode_stages(gated, p, q);
    const size_t shared = decode_shared_bytes(gated, p, q, stages);
    const dim3 block(DECODE_WARPS * MI4_WARP);
    if (gated) {
        const int64_t blocks =
            (int64_t)p.num_slots * ((p.out_cols + 8 * GEMM13_BLOCKS - 1) / (8 * GEMM13_BLOCKS));
        if (blocks == 0)
            return hipSuccess;
        return mi4_launch(stages == 8 ? int4_decode_gemm13<8> : int4_decode_gemm13<4>,
                          dim3((unsigned)blocks), block, shared, a->stream, p, q);
    }
    const int64_t blocks = p.combine.num_tokens * ((p.out_cols + 15) / 16);
    if (blocks == 0)
        return hipSuccess;
    return mi4_launch(stages == 8 ? int4_decode_gemm2<8> : int4_decode_gemm2<4>,
                      dim3((unsigned)blocks), block, shared, a->stream, p, q);
}
