/* What the two int4 decode paths on the matrix cores share (hip_int4_decode.hip:
 * the direct GEMVs, one token row per slot; hip_int4_routed.hip: routed tiles
 * of up to 8 token rows): codes to bf16x2 pairs, token inputs in the pair
 * order the MMA takes them in, staging token rows into shared memory, the
 * split of a row's chunks over warps, a block's items, a lane's two weight
 * rows and the cp.async of their chunks, and the opt-in shared-memory
 * limit. What touches the MMA's operands is NVIDIA sm_80+ only
 * (MI4_MMA_NVIDIA). */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INT4_DECODE_PARTS_H
#define MOEINT4_BACKENDS_HIP_HIP_INT4_DECODE_PARTS_H

#include "backends/hip/hip_int4_mma_ops.h"

namespace mi4_gemm
{

constexpr int DECODE_CHUNK = 128; /* inputs of one chunk: 16 bytes of codes a lane */

/* Items of block `rank` of `blocks` that share one slot, token or tile, out
 * of `units` output blocks: units rank, rank + blocks, ... (block-strided,
 * so neighbouring blocks read neighbouring rows). */
MI4_DEVICE int items_of(int units, int rank, int blocks)
{
    return rank < units ? (units - rank + blocks - 1) / blocks : 0;
}

/* Chunks [first, end) of the input that warp split `split` of `splits`
 * takes: an even run each (the last ones may be short or empty). */
struct split_run {
    int first, end, per;
};

MI4_DEVICE split_run split_chunks(const mi4_hip_int4_matrix &q, int split, int splits)
{
    const int chunks = q.inner_padded / DECODE_CHUNK, per = (chunks + splits - 1) / splits;
    const int first = min(chunks, split * per);
    return { first, min(chunks, first + per), per };
}

/* Where input j (0..7) of an 8-input piece sits in pair order. */
MI4_HOST_DEVICE constexpr int pair_position(int j) { return j < 4 ? 2 * j : 2 * j - 7; }

/* 8 bf16 inputs in pair order: (x0, x4), (x1, x5), (x2, x6), (x3, x7). */
MI4_DEVICE uint4 pair_order(const uint4 &v)
{
    return make_uint4(__byte_perm(v.x, v.z, 0x5410), __byte_perm(v.x, v.z, 0x7632),
                      __byte_perm(v.y, v.w, 0x5410), __byte_perm(v.y, v.w, 0x7632));
}

/* Stages `rows` token rows (row(r): bf16 [inner]) into shared memory,
 * inner_padded inputs each (zeros past inner), in pair order: 8 inputs
 * (piece u of row r) at xs[at(r, u)]; every thread takes part. `paired`:
 * the rows are in pair order already (pair_position). */
template <typename RowOf, typename At>
MI4_DEVICE void stage_rows(uint4 *xs, int rows, const mi4_hip_int4_matrix &q, RowOf row, At at,
                           bool paired = false)
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
        xs[at(r, i % per_row)] = paired ? v : pair_order(v);
    }
}

/* The same, row after row (row r at xs + r * inner_padded / 8). */
template <typename RowOf>
MI4_DEVICE void stage_rows(uint4 *xs, int rows, const mi4_hip_int4_matrix &q, RowOf row)
{
    const int per_row = q.inner_padded / 8;
    stage_rows(xs, rows, q, row, [per_row](int r, int u) { return r * per_row + u; });
}

#if defined(MI4_MMA_NVIDIA)

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

/* Where this lane's two rows of one expert start. A missing row (valid[h]
 * false) points at row 0 of expert 0, so every address stays inside the
 * matrix and the chunks test no pointer: its codes copy as zeros and its
 * scale is 0. */
struct item_rows {
    const uint8_t *codes[2];
    const uint16_t *scales[2];
    const uint8_t *zeros[2]; /* unused when the matrix has no zero points */
    bool valid[2];
    const uint16_t *x_row; /* direct gemm2, X_RING: the run's token row (act of its slot) */
};

MI4_DEVICE item_rows rows_of(const mi4_hip_int4_matrix &q, int expert, int row_lo, int row_hi)
{
    const int t = mi4_lane() & 3;
    const int rows[2] = { row_lo, row_hi };
    item_rows r;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const bool valid = expert >= 0 && rows[h] >= 0;
        const size_t row = (size_t)(valid ? expert : 0) * q.rows + (size_t)(valid ? rows[h] : 0);
        r.codes[h] = q.codes + mi4_int4_row_offset(q.inner_padded, row) + 16 * t;
        r.scales[h] = q.scales + row * q.groups;
        r.zeros[h] = q.zeros ? q.zeros + row * q.groups : nullptr;
        r.valid[h] = valid;
    }
    r.x_row = nullptr;
    return r;
}

/* Starts chunk c of this lane's rows: codes into `slot` (row g at lane,
 * row g + 8 at 32 + lane; zeros for no row) by cp.async, the scale bits and
 * zero points (row g, row g + 8) into registers. A chunk is its group
 * for group 128; per-channel rows have one group. ZEROS false (a matrix
 * without zero points): `zero` is left alone, so a ring keeps no registers
 * for them. */
template <bool ZEROS = true>
MI4_DEVICE void issue_chunk(const mi4_hip_int4_matrix &q, const item_rows &r, int c, uint4 *slot,
                            uint32_t (&scale)[2], uint32_t (&zero)[2])
{
    const int lane = mi4_lane(), group = min(c, q.groups - 1);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mi4_copy16(slot + 32 * h + lane, r.codes[h] + c * MI4_INT4_CHUNK_BYTES, r.valid[h]);
        scale[h] = r.valid[h] ? r.scales[h][group] : 0u;
        if (ZEROS)
            zero[h] = q.zeros != nullptr ? r.zeros[h][group] : 8u;
    }
}

#endif

/* Lets `kernel` take up to the device's opt-in shared memory per block
 * (H100 / H200: 227 KB), so deeper rings can run where they fit. */
template <typename Kernel> hipError_t allow_decode_shared(Kernel kernel, int limit)
{
    hipFuncAttributes attributes;
    const hipError_t e = hipFuncGetAttributes(&attributes, (const void *)kernel);
    if (e != hipSuccess)
        return e;
    /* the limit covers the kernel's static shared memory too */
    return hipFuncSetAttribute((const void *)kernel, hipFuncAttributeMaxDynamicSharedMemorySize,
                               limit - (int)attributes.sharedSizeBytes);
}

} // namespace mi4_gemm

#endif
