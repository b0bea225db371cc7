/* The routed decode GEMVs over int4 weights on the matrix cores (NVIDIA
 * sm_80+, group 128 or per-channel: MI4_TILE_D8): routed tiles of up to 8
 * token rows of one expert, every weight byte read once a tile. They
 * stream the weights as the direct decode does (hip_int4_decode.hip), but
 * the 8 columns of mma.sync's B operand carry the tile's 8 token rows
 * instead of one row 8 times, so a tile of 8 rows costs the arithmetic of
 * one (memory-bound batches: a few rows per expert).
 *
 * Lane (g, t) copies 16 bytes of codes of rows g and g + 8 (inputs 32t ..
 * 32t + 31 of a 128-input chunk) and gives the MMA the same inputs of
 * token row g; it ends with rows g and g + 8 for token rows 2t and 2t + 1.
 * A warp streams its chunks through a cp.async ring of STAGES slots,
 * STAGES - 1 steps ahead; the token rows are either staged once per block
 * in shared memory (8 rows x the input, pair order) or, where that would
 * not fit (X_RING: Mixtral's 14336-input gemm2), ride in each ring slot
 * with its codes (8 rows x 128 inputs). Both layouts swizzle a row's
 * 16-byte pieces (token_piece_at) so that a quarter-warp's reads hit
 * distinct banks.
 *
 * An item is OBS output blocks (8 outputs: gate and up rows for gemm13; 16
 * outputs for gemm2); the block's warps are OBS x splits, a warp taking one
 * output block and one run of the input's chunks; their partial sums meet
 * in shared memory in warp order (deterministic). gemm13 writes the
 * activated intermediate of each tile row, in pair order within each
 * 8-input piece where the intermediate is whole pieces (act_paired: gemm2
 * then takes it as the MMA's operand as it is), gemm2 the f32 rows y of
 * each slot with the router weight; the combine sums them (hip_combine.h).
 * gemm2 is launched early (programmatic dependent launch, sm_90+) and
 * waits for gemm13 only before it reads act. The group scale multiplies
 * each chunk's f32 product: weights exact, as in the other int4 GEMVs. */
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_int4_decode_parts.h"

namespace
{

using namespace mi4_gemm;

constexpr int ROUTED_WARPS = 8;
constexpr int ROUTED_TOKENS = 8; /* token rows of a tile: the MMA's n */
constexpr int ROUTED_STAGES = 4;
constexpr int CODE_UINT4 = 64;                     /* 16 rows x 128 inputs: 1 KB */
constexpr int X_UINT4 = ROUTED_TOKENS * 16;        /* 8 rows x 128 inputs: 2 KB */
constexpr int PARTIAL_FLOATS = 16 * ROUTED_TOKENS; /* a warp's 16 rows x 8 tokens */
/* Token rows staged per block up to this many bytes (Mixtral's gemm13: 64
 * KB); longer rows ride in the ring. */
constexpr size_t ROUTED_MAX_STAGED = 64 * 1024;

MI4_HOST_DEVICE constexpr int routed_slot_uint4(bool x_ring)
{
    return CODE_UINT4 + (x_ring ? X_UINT4 : 0);
}

size_t routed_shared_bytes(bool x_ring, const mi4_hip_int4_matrix &q)
{
    return (size_t)ROUTED_WARPS * ROUTED_STAGES * routed_slot_uint4(x_ring) * 16 +
           (x_ring ? 0 : (size_t)ROUTED_TOKENS * q.inner_padded * 2) +
           2 * (size_t)ROUTED_WARPS * PARTIAL_FLOATS * sizeof(float);
}

#if defined(MI4_MMA_NVIDIA)

/* Whether the activated rows (act) gemm13 writes for gemm2 are in pair
 * order within each 8-input piece (pair_position), so that gemm2 takes
 * them as the MMA's B operand without permuting them a chunk: wherever
 * the intermediate size is whole pieces (gemm2's token rows in the ring
 * need that anyway). gemm13's out_cols and gemm2's inner are that size. */
MI4_DEVICE constexpr bool act_paired(int intermediate) { return intermediate % 8 == 0; }

/* Where piece kp (0..15: inputs 8kp .. 8kp + 7 of a chunk) of token row n
 * sits among its chunk's 16 pieces: lane (g, t) reads piece 4t + w of row
 * g, and the 8 lanes of a quarter-warp (g of one parity pair, t 0..3) then
 * land on 8 distinct 16-byte bank groups. */
MI4_DEVICE int token_piece_at(int n, int kp) { return kp ^ (((kp >> 3) & 1) << 1) ^ (n & 1); }

/* The weight rows of output block `ob`: gemm13 (GATED) gate row o and up
 * row out_cols + o of output o = 8 ob + g; gemm2 rows 16 ob + g and + 8
 * (-1 past the end). */
template <bool GATED> MI4_DEVICE void block_rows(const gemm_params &p, int ob, int *lo, int *hi)
{
    const int g = mi4_lane() >> 2;
    if (GATED) {
        const int out = 8 * ob + g;
        *lo = out < p.out_cols ? out : -1;
        *hi = out < p.out_cols ? p.out_cols + out : -1;
    } else {
        *lo = 16 * ob + g < p.out_cols ? 16 * ob + g : -1;
        *hi = 16 * ob + 8 + g < p.out_cols ? 16 * ob + 8 + g : -1;
    }
}

/* Copies the 8 token rows' inputs of chunk c (pieces lane + 32i, i < 4:
 * row (lane + 32i) / 16) into a ring slot's token part; rows of inner a
 * multiple of 8 (X_RING), zeros past it and for missing rows. PLAIN: an
 * ordinary load and store instead of cp.async. */
template <bool PLAIN>
MI4_DEVICE void copy_token_chunk(uint4 *x_part, const uint16_t *const (&x_src)[4], int c,
                                 const mi4_hip_int4_matrix &q)
{
    const int lane = mi4_lane();
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int piece = lane + 32 * i, n = piece / 16, kp = piece % 16;
        const int at = c * DECODE_CHUNK + kp * 8;
        const bool valid = x_src[i] != nullptr && at + 8 <= q.inner;
        uint4 *dst = x_part + n * 16 + token_piece_at(n, kp);
        if (PLAIN)
            *dst = valid ? *(const uint4 *)(x_src[i] + at) : make_uint4(0u, 0u, 0u, 0u);
        else
            mi4_copy16(dst, valid ? x_src[i] + at : (const uint16_t *)q.codes, valid);
    }
}

/* acc += (rows g, g + 8) x (token rows 2t, 2t + 1) over one chunk: codes
 * lo, hi; x: row g's 16 pieces of the chunk (swizzled), in pair order
 * (staged rows; gemm2's act rows, which gemm13 wrote paired) or, REORDER,
 * in input order (gemm13's token rows in the ring: the caller's rows). */
template <bool REORDER>
MI4_DEVICE void chunk_mma(const uint4 &code_lo, const uint4 &code_hi, uint32_t bias_lo,
                          uint32_t bias_hi, const uint4 *x, float scale_lo, float scale_hi,
                          float (&acc)[4])
{
    const int lane = mi4_lane(), g = lane >> 2, t = lane & 3;
    /* two chains of 4 dependent MMAs, not one of 8: 0.5-2% faster at
     * Mixtral M = 4-16 (bench/results/hip-2026-12-06-s37.md) */
    float d[4] = { 0.0f, 0.0f, 0.0f, 0.0f }, e[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const uint4 raw = x[token_piece_at(g, 4 * t + w)];
        const uint4 xv = REORDER ? pair_order(raw) : raw;
        uint32_t pl[4], ph[4];
        dequant_word(int4_word_of(code_lo, w), bias_lo, pl);
        dequant_word(int4_word_of(code_hi, w), bias_hi, ph);
        mma_16816(d, pl[0], ph[0], pl[1], ph[1], xv.x, xv.y);
        mma_16816(e, pl[2], ph[2], pl[3], ph[3], xv.z, xv.w);
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
        d[i] += e[i];
    acc[0] = fmaf(d[0], scale_lo, acc[0]);
    acc[1] = fmaf(d[1], scale_lo, acc[1]);
    acc[2] = fmaf(d[2], scale_hi, acc[2]);
    acc[3] = fmaf(d[3], scale_hi, acc[3]);
}

/* Blocks (tile, rank): the grid's blocks shared out evenly over the tiles
 * the routing made (p.status[2], known only on the device; shared by its
 * host bound max_tiles instead, Mixtral M = 8 ran in 1.8 waves with a
 * ninth of the blocks empty: 14% slower), each tile's items rank, rank +
 * per_tile, ...; item u covers output blocks u * OBS .. u * OBS + OBS - 1,
 * OBS = 8 / splits. */
template <bool GATED, bool X_RING>
__global__ void __launch_bounds__(ROUTED_WARPS *MI4_WARP, 2)
    int4_routed_decode(gemm_params p, mi4_hip_int4_matrix q, int splits)
{
    extern __shared__ uint4 routed_shared[];
    constexpr int SLOT = routed_slot_uint4(X_RING), STAGES = ROUTED_STAGES;
    __shared__ int tile_slot[ROUTED_TOKENS];
    __shared__ float tile_factor[ROUTED_TOKENS];
    if (GATED) {
        mi4_grid_wait_previous(); /* the routing (gemm13 is launched early after it) */
        mi4_grid_allow_next();    /* gemm2's blocks may start loading weights as these end */
    }
    const int tiles = p.status[2]; /* gemm2: the routing ended before gemm13's blocks passed
                                      the wait above, so before gemm2 could start */
    const int obs = ROUTED_WARPS / splits;
    const int outs = GATED ? 8 : 16;
    const int units = ((p.out_cols + outs - 1) / outs + obs - 1) / obs; /* items a tile */
    const int per_tile = tiles > 0 ? max(1, min((int)gridDim.x / tiles, units)) : 1;
    const int tile = (int)blockIdx.x / per_tile, rank = (int)blockIdx.x % per_tile;
    if (tile >= tiles)
        return;
    const int expert = p.tile_expert[tile];
    const int warp = (int)threadIdx.x / MI4_WARP, lane = mi4_lane(), g = lane >> 2, t = lane & 3;
    const int warp_ob = warp % obs;
    const int items = items_of(units, rank, per_tile);
    if (items == 0)
        return;
    const split_run run = split_chunks(q, warp / obs, splits);
    uint4 *ring = routed_shared + warp * STAGES * SLOT;
    uint4 *xs = routed_shared + ROUTED_WARPS * STAGES * SLOT; /* staged rows (not X_RING) */
    const int row_uint4 = X_RING ? 0 : q.inner_padded / 8;
    float *partial = (float *)(xs + ROUTED_TOKENS * row_uint4);
    /* X_RING: the token rows of the pieces this lane copies */
    const uint16_t *x_src[4] = { nullptr, nullptr, nullptr, nullptr };
    if (X_RING)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int slot;
            x_src[i] = a_row<ROUTED_TOKENS, GATED>(p, tile, (lane + 32 * i) / 16, &slot);
        }

    uint32_t scales[STAGES][2], zeros[STAGES][2], landed = 0u;
    item_rows rows;
    int issue_k = 0, issue_c = 0;
    auto issue = [&](int s, bool with_x) {
        bool has = false;
        if (issue_k < items) {
            if (issue_c == 0) {
                int lo, hi;
                block_rows<GATED>(p, (rank + issue_k * per_tile) * obs + warp_ob, &lo, &hi);
                rows = rows_of(q, expert, lo, hi);
            }
            const int c = run.first + issue_c;
            has = c < run.end;
            if (has) {
                issue_chunk(q, rows, c, ring + s * SLOT, scales[s], zeros[s]);
                if (X_RING && with_x)
                    copy_token_chunk<false>(ring + s * SLOT + CODE_UINT4, x_src, c, q);
            }
            if (++issue_c == run.per) {
                issue_c = 0;
                issue_k++;
            }
        }
        landed = has ? landed | 1u << s : landed & ~(1u << s);
        mi4_copy_commit();
    };
    /* the first slots' codes before the wait for gemm13; their token
     * inputs (X_RING) after it, as plain loads */
#pragma unroll
    for (int s = 0; s < STAGES - 1; s++)
        issue(s, false);
    if (!GATED)
        mi4_grid_wait_previous(); /* act is gemm13's (launched early) */
    if (threadIdx.x < ROUTED_TOKENS) {
        int slot;
        a_row<ROUTED_TOKENS, GATED>(p, tile, (int)threadIdx.x, &slot);
        tile_slot[threadIdx.x] = slot;
        tile_factor[threadIdx.x] =
            !GATED && slot >= 0 && p.weight_on_output ? p.topk_weights[slot] : 1.0f;
    }
    if (!X_RING)
        stage_rows(
            xs, ROUTED_TOKENS, q,
            [&](int n) {
                int slot;
                return a_row<ROUTED_TOKENS, GATED>(p, tile, n, &slot);
            },
            [row_uint4](int n, int u) {
                return n * row_uint4 + (u & ~15) + token_piece_at(n, u & 15);
            },
            !GATED && act_paired(q.inner));
    if (X_RING)
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            const int k = s / run.per, c = run.first + s % run.per;
            if (k < items && c < run.end)
                copy_token_chunk<true>(ring + s * SLOT + CODE_UINT4, x_src, c, q);
        }
    __syncthreads();

    float acc[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
    int k = 0, c = 0;
    while (k < items) {
#pragma unroll
        for (int s = 0; s < STAGES; s++) {
            if (k < items) {                 /* uniform over the block */
                mi4_copy_wait<STAGES - 2>(); /* step (k, c) has landed */
                if (X_RING)
                    __syncwarp();              /* the inputs other lanes copied */
                asm volatile("" ::: "memory"); /* no shared read moves above the wait */
                if (landed >> s & 1u) {
                    const uint4 *slot = ring + s * SLOT;
                    const int chunk = run.first + c;
                    chunk_mma<X_RING && GATED>(
                        slot[lane], slot[MI4_WARP + lane], int4_bias_pair((int)zeros[s][0]),
                        int4_bias_pair((int)zeros[s][1]),
                        X_RING ? slot + CODE_UINT4 + 16 * g : xs + g * row_uint4 + chunk * 16,
                        int4_scale_of(q, (uint16_t)scales[s][0]),
                        int4_scale_of(q, (uint16_t)scales[s][1]), acc);
                }
                asm volatile("" ::: "memory"); /* slot s - 1 was read in the step before */
                issue((s + STAGES - 1) % STAGES, true);
                if (++c == run.per) {
                    c = 0;
                    /* item k's sums: [2][warp][16 rows][8 tokens] by parity */
                    float *buf = partial + (k & 1) * ROUTED_WARPS * PARTIAL_FLOATS;
                    float *mine = buf + warp * PARTIAL_FLOATS;
#pragma unroll
                    for (int j = 0; j < 2; j++) {
                        mine[g * ROUTED_TOKENS + 2 * t + j] = acc[j];
                        mine[(8 + g) * ROUTED_TOKENS + 2 * t + j] = acc[2 + j];
                        acc[j] = acc[2 + j] = 0.0f;
                    }
                    __syncthreads();
                    const int ob0 = (rank + k * per_tile) * obs;
                    const int per_ob = GATED ? 8 * ROUTED_TOKENS : PARTIAL_FLOATS;
                    for (int i = (int)threadIdx.x; i < obs * per_ob; i += (int)blockDim.x) {
                        const int b = i / per_ob, r = i % per_ob / ROUTED_TOKENS,
                                  n = i % ROUTED_TOKENS;
                        const int out = (ob0 + b) * outs + r, slot = tile_slot[n];
                        if (slot < 0 || out >= p.out_cols)
                            continue;
                        float sum = 0.0f, up = 0.0f;
                        for (int sp = 0; sp < splits; sp++) {
                            const float *from = buf + (sp * obs + b) * PARTIAL_FLOATS;
                            sum += from[r * ROUTED_TOKENS + n];
                            if (GATED)
                                up += from[(8 + r) * ROUTED_TOKENS + n];
                        }
                        if (GATED)
                            p.act[((size_t)tile * ROUTED_TOKENS + n) * p.out_cols +
                                  (act_paired(p.out_cols) ? (out & ~7) + pair_position(out & 7)
                                                          : out)] =
                                mi4_dev_f32_to_bf16(
                                    activate(p.activation, sum, up, p.limit, p.alpha, p.beta));
                        else
                            p.y[(size_t)slot * p.out_cols + out] = sum * tile_factor[n];
                    }
                    k++;
                }
            }
        }
    }
    mi4_copy_wait<0>();
}

#else /* no mma.sync: mi4_hip_int4_mma_serves is 0, these never launch */

template <bool GATED, bool X_RING>
__global__ void int4_routed_decode(gemm_params p, mi4_hip_int4_matrix q, int splits)
{
    (void)p;
    (void)q;
    (void)splits;
}

#endif

/* Splits of a row's chunks over the block's warps: 8 for long rows
 * (Mixtral's gemm2: 112 chunks), 4 from 16 chunks, 2 from 4; each warp then
 * has at least two chunks an item. */
int routed_splits(const mi4_hip_int4_matrix &q)
{
    const int chunks = q.inner_padded / DECODE_CHUNK;
    return chunks >= 64 ? 8 : chunks >= 16 ? 4 : chunks >= 4 ? 2 : 1;
}

/* MOEINT4_HIP_ROUTED_X=ring|staged forces where the token rows go (a test
 * and tuning knob); by default staged while they fit ROUTED_MAX_STAGED. */
bool routed_x_ring(const mi4_hip_int4_matrix &q)
{
    const char *mode = getenv("MOEINT4_HIP_ROUTED_X");
    if (q.inner % 8 != 0)
        return false; /* ring pieces are whole 8-input pieces */
    if (mode != nullptr && strcmp(mode, "ring") == 0)
        return true;
    if (mode != nullptr && strcmp(mode, "staged") == 0)
        return false;
    return (size_t)ROUTED_TOKENS * q.inner_padded * 2 > ROUTED_MAX_STAGED;
}

} // namespace

hipError_t mi4_hip_int4_routed_init(void)
{
#if defined(MI4_PLATFORM_NVIDIA)
    int device = 0, limit = 0;
    hipError_t e = hipGetDevice(&device);
    if (e == hipSuccess)
        e = hipDeviceGetAttribute(&limit, hipDeviceAttributeSharedMemPerBlockOptin, device);
    if (e != hipSuccess)
        return e;
    const hipError_t results[] = { allow_decode_shared(int4_routed_decode<true, false>, limit),
                                   allow_decode_shared(int4_routed_decode<true, true>, limit),
                                   allow_decode_shared(int4_routed_decode<false, false>, limit),
                                   allow_decode_shared(int4_routed_decode<false, true>, limit) };
    for (hipError_t r : results)
        if (r != hipSuccess)
            return r;
#endif
    return hipSuccess;
}

namespace
{

typedef void (*routed_kernel)(gemm_params, mi4_hip_int4_matrix, int);

/* The kernel for one GEMM over q, its shared bytes and how many of its
 * blocks an SM of the current device holds (0: it does not fit). */
struct routed_choice {
    routed_kernel kernel;
    size_t shared;
    int per_sm;
};

routed_choice routed_choice_of(bool gated, const mi4_hip_int4_matrix &q)
{
    const bool x_ring = routed_x_ring(q);
    routed_choice c;
    c.kernel = gated
                   ? (x_ring ? int4_routed_decode<true, true> : int4_routed_decode<true, false>)
                   : (x_ring ? int4_routed_decode<false, true> : int4_routed_decode<false, false>);
    c.shared = routed_shared_bytes(x_ring, q);
    if (hipOccupancyMaxActiveBlocksPerMultiprocessor(&c.per_sm, c.kernel, ROUTED_WARPS * MI4_WARP,
                                                     c.shared) != hipSuccess)
        c.per_sm = 0;
    return c;
}

} // namespace

int mi4_hip_int4_routed_fits(int hidden, int intermediate)
{
#if defined(MI4_PLATFORM_NVIDIA)
    mi4_hip_int4_matrix q13 = {}, q2 = {};
    q13.inner = hidden;
    q2.inner = intermediate;
    q13.inner_padded = (hidden + DECODE_CHUNK - 1) / DECODE_CHUNK * DECODE_CHUNK;
    q2.inner_padded = (intermediate + DECODE_CHUNK - 1) / DECODE_CHUNK * DECODE_CHUNK;
    return routed_choice_of(true, q13).per_sm > 0 && routed_choice_of(false, q2).per_sm > 0;
#else
    (void)hidden;
    (void)intermediate;
    return 0; /* no mma.sync */
#endif
}

/* The grid: the blocks the SMs hold, one wave (at least one a tile of the
 * routing's bound max_tiles); each block finds its tile and rank from the
 * tiles the routing made (int4_routed_decode). */
hipError_t mi4_hip_launch_int4_routed(bool gated, const mi4_hip_gemm_args *a, bool *served)
{
    gemm_params p = make_params(a, gated);
    p.b = nullptr; /* the weights are q below */
    const mi4_hip_int4_matrix q = gated ? a->weights->q13 : a->weights->q2;
    *served = false;
    if (!a->weights->int4_mma || a->routing->tile_rows != ROUTED_TOKENS)
        return hipSuccess;
    const routed_choice use = routed_choice_of(gated, q);
    /* both GEMMs or neither (int4_routed: both fit, checked at prepare):
     * only this gemm2 reads act in the pair order this gemm13 writes
     * (act_paired), also where MOEINT4_HIP_TILE forces d8 */
    if (!a->weights->int4_routed || use.per_sm < 1)
        return hipSuccess; /* does not fit this device: the 8-row GEMV serves */
    *served = true;
    const int splits = routed_splits(q);
    const int64_t tiles = a->routing->max_tiles;
    if (tiles == 0 || p.out_cols == 0)
        return hipSuccess;
    const int64_t resident =
        (int64_t)(a->multiprocessors > 0 ? a->multiprocessors : 1) * use.per_sm;
    const dim3 grid((unsigned)(resident > tiles ? resident : tiles)),
        block(ROUTED_WARPS * MI4_WARP);
    /* both early: gemm13's blocks wait on the SMs for the routing's end,
     * gemm2's load weights while gemm13 ends */
    return mi4_launch_early(use.kernel, grid, block, use.shared, a->stream, p, q, splits);
}
