/* int4 GEMVs on the matrix cores (NVIDIA sm_80+: mma.sync m16n8k16 bf16
 * -> f32), for weights whose groups span 128 inputs or the whole row
 * (mi4_hip_int4_mma_serves). The weights are the MMA's B operand (8 output
 * rows per n8 block), the token rows its A operand (8 or 16 per tile):
 *   routed (MI4_TILE_GEMV: 8 rows, MI4_TILE_16: 16 rows per tile, one
 *     expert): units (tile, outputs); gemm13 writes act, gemm2 the f32 y rows
 *     the combine sums (the direct path: hip_int4_decode.hip).
 *
 * Each lane loads 16 bytes of one weight row (32 codes, inputs 32t..32t+31
 * of a 128-input chunk; t = lane % 4) straight from the row-major int4
 * layout. A k16 step of the MMA pairs positions (2t, 2t+1, 2t+8, 2t+9) of
 * lane t; they are mapped to inputs (32t + 8w + j, +4) of the lane's own
 * chunk, the same map for the weights and the token rows, so the dot
 * product is unchanged and every 16-byte load feeds 8 steps without
 * shuffles. A code becomes bf16 by one LOP3 per pair (0x4300 | q = 128 + q)
 * and one bf16x2 FMA subtracting 128 + zero (exact: q - zero); the group's
 * scale multiplies the f32 result of each 128-input chunk, so the weights
 * are exact, as in the FMA GEMVs. */
#include "backends/hip/hip_gemm_common.h"
#include "backends/hip/hip_gemv_units.h"
#include "backends/hip/hip_int4_mma_ops.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_MMA_NVIDIA)

constexpr int CHUNK_K = 128; /* inputs per 16-byte load of the 4 lanes of a row */

/* One 128-input chunk of NB blocks of 8 weight rows and two token rows, as
 * one lane loads it: its 16 bytes of codes per block, the blocks' zero
 * (as a bf16x2 -(128 + zero)) and scales, its 32 inputs of each token row. */
template <int NB> struct mma_chunk {
    uint4 b[NB], xl[4], xh[4];
    uint32_t bias[NB];
    float s[NB][2];
};

template <int NB> struct mma_rows {
    const uint8_t *codes[NB];
    const uint8_t *zeros[NB];
    const uint16_t *scales[NB]; /* row 2t; row 2t + 1 follows after `groups` */
    const uint16_t *x_lo, *x_hi;
    float factor;
};

template <int NB>
MI4_DEVICE void load_chunk(const mi4_hip_int4_matrix &q, const mma_rows<NB> &r, int k0,
                           mma_chunk<NB> &c)
{
    /* (k0 < inner: IN is a multiple of 128 for group 128; per-channel rows
     * have one group) */
    const int t = mi4_lane() & 3, group = k0 / q.group_size, k = k0 + 32 * t;
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        const bool valid = r.codes[nb] != nullptr;
        c.b[nb] = valid ? mi4_load_stream((const uint4 *)(r.codes[nb] + mi4_int4_input_offset(k0)))
                        : make_uint4(0u, 0u, 0u, 0u);
        const int zero = valid && r.zeros[nb] ? (int)r.zeros[nb][group] : 8;
        c.bias[nb] = int4_bias_pair(zero);
        c.s[nb][0] = valid ? int4_scale_of(q, r.scales[nb][group]) * r.factor : 0.0f;
        c.s[nb][1] = valid ? int4_scale_of(q, r.scales[nb][q.groups + group]) * r.factor : 0.0f;
    }
#pragma unroll
    for (int w = 0; w < 4; w++) {
        const bool in = k + 8 * w < q.inner; /* row padding reads as zero inputs */
        c.xl[w] = r.x_lo && in ? *(const uint4 *)(r.x_lo + k + 8 * w) : make_uint4(0u, 0u, 0u, 0u);
        c.xh[w] = r.x_hi && in ? *(const uint4 *)(r.x_hi + k + 8 * w) : make_uint4(0u, 0u, 0u, 0u);
    }
}

template <int NB> MI4_DEVICE void mma_chunk_compute(const mma_chunk<NB> &c, float (&acc)[NB][4])
{
    float part[NB][4];
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            part[nb][i] = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; w++) {
        /* steps 2w and 2w + 1: inputs (8w + j, 8w + j + 4) of the lane's 32 */
        uint32_t a[2][4];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const uint32_t lo01 = h ? c.xl[w].y : c.xl[w].x, lo45 = h ? c.xl[w].w : c.xl[w].z;
            const uint32_t hi01 = h ? c.xh[w].y : c.xh[w].x, hi45 = h ? c.xh[w].w : c.xh[w].z;
            a[h][0] = __byte_perm(lo01, lo45, 0x5410);
            a[h][1] = __byte_perm(hi01, hi45, 0x5410);
            a[h][2] = __byte_perm(lo01, lo45, 0x7632);
            a[h][3] = __byte_perm(hi01, hi45, 0x7632);
        }
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const uint32_t word = int4_word_of(c.b[nb], w);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t b0 = int4_pair_minus_zero(word, 8 * h, c.bias[nb]);
                const uint32_t b1 = int4_pair_minus_zero(word, 8 * h + 4, c.bias[nb]);
                mma_16816(part[nb], a[h][0], a[h][1], a[h][2], a[h][3], b0, b1);
            }
        }
    }
#pragma unroll
    for (int nb = 0; nb < NB; nb++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            acc[nb][i] = fmaf(part[nb][i], c.s[nb][i & 1], acc[nb][i]);
}

/* acc[nb][i] += factor * (x_rows . weight rows) over the whole input for NB
 * blocks of 8 weight rows of `expert` starting at row0[nb] (-1: none);
 * this lane's token rows are x_lo (MMA row g) and x_hi (g + 8; NULL: zero).
 * acc layout: mma.sync's C, [0], [1] token g, outputs 2t, 2t+1 of the
 * block; [2], [3] token g + 8. The next chunk's loads fly while a chunk is
 * computed. */
template <int NB>
MI4_DEVICE void int4_mma_dots(const mi4_hip_int4_matrix &q, int expert, const int (&row0)[NB],
                              const uint16_t *x_lo, const uint16_t *x_hi, float factor,
                              float (&acc)[NB][4])
{
    const int lane = mi4_lane(), g = lane >> 2, t = lane & 3;
    mma_rows<NB> r;
#pragma unroll
    for (int nb = 0; nb < NB; nb++) {
        const size_t first = (size_t)expert * q.rows + (size_t)(row0[nb] < 0 ? 0 : row0[nb]);
        r.codes[nb] = row0[nb] < 0 ? nullptr
                                   : q.codes + mi4_int4_row_offset(q.inner_padded, first + g) + 16 * t;
        r.zeros[nb] = q.zeros ? q.zeros + (first + g) * q.groups : nullptr;
        r.scales[nb] = q.scales + (first + 2 * t) * q.groups;
    }
    r.x_lo = x_lo;
    r.x_hi = x_hi;
    r.factor = factor;
    mma_chunk<NB> current, next;
    load_chunk<NB>(q, r, 0, current);
    for (int k0 = 0; k0 < q.inner_padded; k0 += CHUNK_K) {
        if (k0 + CHUNK_K < q.inner_padded)
            load_chunk<NB>(q, r, k0 + CHUNK_K, next);
        mma_chunk_compute<NB>(current, acc);
        current = next;
    }
}

/* Routed tiles of `tile_rows` (8 or 16) token rows of one expert. Units:
 * (tile, OUTS outputs); gemm13 blocks are OUTS/8 gate then OUTS/8 up blocks
 * of the same outputs. */
template <bool GATED, int NB>
__global__ void __launch_bounds__(GEMV_WARPS *MI4_WARP, GEMV_BLOCKS_PER_SM)
    int4_mma_routed(gemm_params p, mi4_hip_int4_matrix q, int tile_rows)
{
    constexpr int OUTS = GATED ? NB / 2 * 8 : NB * 8;
    const int per_tile = (p.out_cols + OUTS - 1) / OUTS;
    const int lane = mi4_lane(), g = lane >> 2, t = lane & 3;
    int64_t unit, end;
    warp_units((int64_t)p.status[2] * per_tile, &unit, &end);
    for (; unit < end; unit++) {
        const int tile = (int)(unit / per_tile), out0 = (int)(unit % per_tile) * OUTS;
        const int expert = p.tile_expert[tile];
        int slot[2], row_in_tile[2];
        const uint16_t *x[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            row_in_tile[h] = g + 8 * h;
            slot[h] = h == 0 || tile_rows == 16
                          ? p.sorted_slot[(size_t)tile * tile_rows + row_in_tile[h]]
                          : -1;
            const size_t index = GATED ? (size_t)(p.a_by_slot ? slot[h] : slot[h] / p.topk)
                                       : (size_t)tile * tile_rows + row_in_tile[h];
            x[h] = slot[h] >= 0 ? p.a + index * (size_t)p.inner : nullptr;
        }
        int row0[NB];
#pragma unroll
        for (int nb = 0; nb < NB; nb++) {
            const int i = GATED ? nb % (NB / 2) : nb;
            const int out = out0 + 8 * i;
            row0[nb] = out >= p.out_cols ? -1 : GATED && nb >= NB / 2 ? p.out_cols + out : out;
        }
        float acc[NB][4];
#pragma unroll
        for (int nb = 0; nb < NB; nb++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[nb][i] = 0.0f;
        int4_mma_dots<NB>(q, expert, row0, x[0], x[1], 1.0f, acc);
#pragma unroll
        for (int nb = 0; nb < (GATED ? NB / 2 : NB); nb++) {
            if (row0[nb] < 0)
                continue;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (slot[h] < 0)
                    continue;
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const int out = out0 + 8 * nb + 2 * t + j;
                    const float v = acc[nb][2 * h + j];
                    if (GATED) {
                        p.act[((size_t)tile * tile_rows + row_in_tile[h]) * (size_t)p.out_cols +
                              out] =
                            mi4_dev_f32_to_bf16(activate(p.activation, v, acc[NB / 2 + nb][2 * h + j],
                                                         p.limit, p.alpha, p.beta));
                    } else {
                        const float scale = p.weight_on_output ? p.topk_weights[slot[h]] : 1.0f;
                        p.y[(size_t)slot[h] * (size_t)p.out_cols + out] = v * scale;
                    }
                }
            }
        }
    }
}

#else /* no mma.sync: mi4_hip_int4_mma_serves is 0, these never launch */

template <bool GATED, int NB>
__global__ void int4_mma_routed(gemm_params p, mi4_hip_int4_matrix q, int tile_rows)
{
    (void)p;
    (void)q;
    (void)tile_rows;
}

#endif

} // namespace

/* Matrix-core int4 GEMVs over routed tiles (the direct path:
 * hip_int4_decode.hip). */
hipError_t mi4_hip_launch_int4_mma(bool gated, const mi4_hip_gemm_args *a)
{
    gemm_params p = make_params(a, gated);
    p.b = nullptr; /* the weights are q below */
    const mi4_hip_int4_matrix q = gated ? a->weights->q13 : a->weights->q2;
    const int resident = a->multiprocessors * GEMV_BLOCKS_PER_SM;
    const dim3 block(GEMV_WARPS * MI4_WARP);
    const int tile_rows = a->routing->tile_rows;
    if (gated) {
        const int64_t units = (int64_t)a->routing->max_tiles * ((p.out_cols + 7) / 8);
        return mi4_launch(int4_mma_routed<true, 2>, dim3(persistent_grid(units, resident)), block,
                          0, a->stream, p, q, tile_rows);
    }
    const int64_t units = (int64_t)a->routing->max_tiles * ((p.out_cols + 15) / 16);
    return mi4_launch(int4_mma_routed<false, 2>, dim3(persistent_grid(units, resident)), block, 0,
                      a->stream, p, q, tile_rows);
}
