/* What the GEMM kernels share (hip_grouped_gemm.hip: tiled mma.sync / MFMA /
 * FMA; hip_decode_gemv.hip: register-streaming GEMV; hip_wgmma_gemm.hip: Hopper
 * wgmma): the kernel parameters, the activation, the per-tile row setup and
 * the 16-byte tile loads. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_GEMM_COMMON_H
#define MOEINT4_BACKENDS_HIP_HIP_GEMM_COMMON_H

#include <limits.h>
#include <math.h>

#include "backends/hip/hip_internal.h"
#include "backends/hip/hip_matrix_core.h"

namespace mi4_gemm {

/* Token rows per routed tile of the decode GEMV (MI4_TILE_GEMV). */
constexpr int GEMV_TOKENS = 8;

struct gemm_params {
    const uint16_t *a;
    int a_by_slot;          /* gemm13: 1 = a row per slot, 0 = per token (slot / topk) */
    const uint16_t *b;      /* [E_l][b_rows][inner] */
    int b_rows;
    int inner;              /* reduction length (K for gemm13, N for gemm2) */
    int out_cols;           /* N for gemm13 (activated outputs), K for gemm2 */
    int topk;
    const int *sorted_slot;
    const int *tile_expert;
    const int *status;      /* [2] = number of row tiles */
    int max_tiles;          /* row tiles the grid covers (host bound on status[2]) */
    uint16_t *act;
    float *y;
    const float *topk_weights;
    int weight_on_output;
    int activation;
    float limit, alpha, beta;
    /* direct decode GEMVs (MI4_TILE_DIRECT); their slot checks are combine.check */
    int num_slots;
    mi4_combine_params combine;
};

/* Tile index -> (row tile, output tile) over `row_tiles` row tiles. Tiles
 * go in panels of TILE_PANEL output tiles: a panel walks every row tile
 * before the next panel starts, so the tiles in flight at one time share
 * each weight tile across the row tiles of an expert (one DRAM read, the
 * rest from L2) instead of streaming every output tile of one row tile
 * (which re-reads an expert's weights once per row tile when they exceed
 * L2: Mixtral's w13 is 235 MB). */
constexpr int TILE_PANEL = 16;

__device__ __forceinline__ void tile_coords(int64_t index, int row_tiles, int out_tiles,
                                            int *tile, int *out_tile)
{
    int64_t panel_blocks = (int64_t)TILE_PANEL * row_tiles;
    int panel = (int)(index / panel_blocks);
    int within = (int)(index % panel_blocks);
    int width = min(TILE_PANEL, out_tiles - panel * TILE_PANEL); /* last panel may be narrow */
    *tile = within / width;
    *out_tile = panel * TILE_PANEL + within % width;
}

inline __device__ float activate(int kind, float gate, float up, float limit, float alpha, float beta)
{
    if (kind == MOEINT4_ACTIVATION_GELU)
        return 0.5f * gate * (1.0f + erff(gate * 0.70710678118654752f)) * up;
    if (kind == MOEINT4_ACTIVATION_SWIGLU_CLAMP) {
        float g = fminf(gate, limit);
        float u = fminf(fmaxf(up, -limit), limit);
        return (u + beta) * g / (1.0f + expf(-alpha * g));
    }
    return gate / (1.0f + expf(-gate)) * up;
}

/* f(activation_tag<kind>()): an epilogue with its activation a constant,
 * one instance an activation chosen once a tile (chosen per element, the
 * unrolled epilogue of every activation missed the instruction cache:
 * bench/results/hip-2026-12-04-q256-v2.md). The core passes only these
 * three kinds (forward.c). */
template <int KIND> struct activation_tag {
    static constexpr int kind = KIND;
};
template <typename F> __device__ __forceinline__ void with_activation(int kind, F &&f)
{
    if (kind == MOEINT4_ACTIVATION_SILU)
        f(activation_tag<MOEINT4_ACTIVATION_SILU>());
    else if (kind == MOEINT4_ACTIVATION_GELU)
        f(activation_tag<MOEINT4_ACTIVATION_GELU>());
    else
        f(activation_tag<MOEINT4_ACTIVATION_SWIGLU_CLAMP>());
}

/* Row r of row tile `tile`: its A row (NULL for padding) and slot (-1). */
template <int BM, bool GATED>
__device__ __forceinline__ const uint16_t *a_row(const gemm_params &p, int tile, int r,
                                                 int *slot_out)
{
    int slot = p.sorted_slot[(size_t)tile * BM + r];
    *slot_out = slot;
    if (slot < 0)
        return nullptr;
    size_t index = GATED ? (size_t)(p.a_by_slot ? slot : slot / p.topk) : (size_t)tile * BM + r;
    return p.a + index * (size_t)p.inner;
}

/* Column c of output tile `out_tile`: its B row of expert `expert` as a row
 * of all experts' rows (-1 past the end). gemm13 columns come in groups of
 * WN: WN/2 gate rows, then the WN/2 up rows of the same outputs. */
template <int BN, int WN, bool GATED>
__device__ __forceinline__ int64_t b_row_number(const gemm_params &p, int expert, int out_tile,
                                                int c)
{
    int out_col, row;
    if (GATED) {
        int warp_col = c / WN, within = c % WN;
        out_col = out_tile * (BN / 2) + warp_col * (WN / 2) + within % (WN / 2);
        row = within < WN / 2 ? out_col : p.out_cols + out_col;
    } else {
        out_col = out_tile * BN + c;
        row = out_col;
    }
    return out_col < p.out_cols ? (int64_t)expert * p.b_rows + row : -1;
}

/* The same row as a pointer into p.b (NULL past the end). */
template <int BN, int WN, bool GATED>
__device__ __forceinline__ const uint16_t *b_row(const gemm_params &p, int expert, int out_tile,
                                                 int c)
{
    const int64_t row = b_row_number<BN, WN, GATED>(p, expert, out_tile, c);
    return row >= 0 ? p.b + (size_t)row * (size_t)p.inner : nullptr;
}

/* Row pointers of one output tile in shared memory. */
template <int BM, int BN, int WN, int THREADS, bool GATED>
__device__ __forceinline__ void setup_rows(const gemm_params &p, int tile, int out_tile,
                                           int expert, const uint16_t **a_rows,
                                           const uint16_t **b_rows, int *row_slot)
{
    const int tid = (int)threadIdx.x;
    for (int r = tid; r < BM; r += THREADS)
        a_rows[r] = a_row<BM, GATED>(p, tile, r, &row_slot[r]);
    for (int c = tid; c < BN; c += THREADS)
        b_rows[c] = b_row<BN, WN, GATED>(p, expert, out_tile, c);
}

/* Copies k [k0, k0 + BK) of ROWS rows into shared memory (row stride ld
 * elements), 16 bytes per copy, zero-filling padding rows and k past
 * `inner`. (The wgmma kernels write their swizzled layout themselves.) */
template <int ROWS, int BK, int THREADS>
__device__ __forceinline__ void load_rows(uint16_t *dst, int ld, const uint16_t *const *rows,
                                          int k0, int inner, const uint16_t *fallback)
{
    constexpr int CHUNKS_PER_ROW = BK / 8;
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int i = 0; i < (ROWS * CHUNKS_PER_ROW + THREADS - 1) / THREADS; i++) {
        int chunk = tid + i * THREADS;
        if (chunk < ROWS * CHUNKS_PER_ROW) {
            int r = chunk / CHUNKS_PER_ROW, c = chunk % CHUNKS_PER_ROW, k = k0 + c * 8;
            const uint16_t *src = rows[r];
            bool valid = src != nullptr && k < inner;
            mi4_copy16(dst + r * ld + c * 8, valid ? src + k : fallback, valid);
        }
    }
}

inline gemm_params make_params(const mi4_hip_gemm_args *a, bool gated)
{
    const mi4_hip_weights *w = a->weights;
    gemm_params p;
    p.a = gated ? a->x_bf16 : a->act;
    p.a_by_slot = a->x_per_slot;
    p.b = gated ? w->w13 : w->w2;
    p.b_rows = gated ? 2 * w->intermediate_size : w->hidden_size;
    p.inner = gated ? w->hidden_size : w->intermediate_size;
    p.out_cols = gated ? w->intermediate_size : w->hidden_size;
    p.topk = a->topk;
    p.sorted_slot = a->routing->sorted_slot;
    p.tile_expert = a->routing->tile_expert;
    p.status = a->routing->status;
    p.max_tiles = a->routing->max_tiles;
    p.act = a->act;
    p.y = a->y;
    p.topk_weights = a->topk_weights;
    p.weight_on_output = a->weight_on_output;
    p.activation = a->activation;
    p.limit = a->limit;
    p.alpha = a->alpha;
    p.beta = a->beta;
    p.num_slots = (int)a->num_slots;
    p.combine = a->combine;
    return p;
}

} // namespace mi4_gemm

/* hip_decode_gemv.hip: the GEMV for gemm13 (gated) or gemm2, over routed tiles
 * (MI4_TILE_GEMV) or straight from the ids (direct, MI4_TILE_DIRECT). */
hipError_t mi4_hip_launch_gemv(bool gated, bool direct, const mi4_hip_gemm_args *a);
/* hip_int4_gemv.hip: the kernels over int4 weights (a->weights->int4 and
 * a tile that reads int4: mi4_hip_int4_expand_bytes == 0), dequantized in
 * registers: the int4 grouped GEMM for the q tiles, the FMA GEMVs and,
 * where a->weights->int4_mma, the matrix-core ones (hip_int4_mma.hip,
 * hip_int4_decode.hip); with int4_tile_dequant, the GEMM tiles
 * dequantizing into shared memory (mi4_hip_launch_gemm_dequant). */
hipError_t mi4_hip_launch_int4(mi4_hip_tile_config config, bool gated,
                               const mi4_hip_gemm_args *a);
hipError_t mi4_hip_launch_int4_mma(bool gated, const mi4_hip_gemm_args *a);
/* hip_int4_decode.hip: the direct decode path (MI4_TILE_DIRECT) on the
 * matrix cores; *served false (nothing launched) where it does not serve
 * (weights the matrix cores do not take, staged token rows too large for
 * shared memory); _init raises the kernels' shared memory limit (once per
 * context creation). */
hipError_t mi4_hip_launch_int4_decode(bool gated, const mi4_hip_gemm_args *a, bool *served);
hipError_t mi4_hip_int4_decode_init(void);
/* hip_int4_routed.hip: the routed decode GEMVs (MI4_TILE_D8: 8-row tiles) on
 * the matrix cores; *served false (nothing launched) where they do not serve
 * (weights the matrix cores do not take, a device without the shared memory
 * they need); _init as above. */
hipError_t mi4_hip_launch_int4_routed(bool gated, const mi4_hip_gemm_args *a, bool *served);
hipError_t mi4_hip_int4_routed_init(void);
/* hip_wgmma_gemm.hip: launch (or, with init, set up) the bm x bn kernel (64 x 256,
 * 128 x 128, 128 x 256); _dequant: the same over int4 weights
 * (int4_tile_dequant), dequantized into its shared weight tiles. */
hipError_t mi4_hip_launch_wgmma(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                bool init);
hipError_t mi4_hip_launch_wgmma_dequant(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                        bool init);
/* hip_wgmma_ws.hip: the warp-specialized BF16 kernel of the same tiles:
 * launches it where it serves this GEMM (*launched; MOEINT4_HIP_WGMMA_PIPE
 * and _TMA, read at each launch), or with init sets it up. */
hipError_t mi4_hip_launch_wgmma_ws(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                   bool init, bool *launched);
/* hip_grouped_gemm.hip: tile `config` (one that reads BF16:
 * mi4_hip_int4_tile_reads_bf16) over int4 weights with int4_tile_dequant,
 * dequantized into its shared weight tiles. */
hipError_t mi4_hip_launch_gemm_dequant(mi4_hip_tile_config config, bool gated,
                                       const mi4_hip_gemm_args *a);
/* hip_int4_grouped_gemm.hip: launch (or, with init, set up) the int4 grouped
 * GEMM of tile `config` (MI4_TILE_Q8 .. MI4_TILE_Q128; MI4_TILE_QW64,
 * MI4_TILE_QW128 and MI4_TILE_Q256: the warp-specialized one of
 * hip_int4_ws.hip, mi4_hip_launch_int4_ws, with tiles of 64, 128 or 256
 * token rows; MI4_TILE_QW32: the same with 32). */
hipError_t mi4_hip_launch_int4_wgmma(mi4_hip_tile_config config, bool gated,
                                     const mi4_hip_gemm_args *a, bool init);
hipError_t mi4_hip_launch_int4_ws(int tile_rows, bool gated, const mi4_hip_gemm_args *a,
                                  bool init);

#endif
