/* Prefill GEMMs on Hopper (sm_90a): warpgroup MMA (wgmma) from 128-byte
 * swizzled shared tiles (hip_wgmma_tile.h), 8 warps that all copy, issue
 * and meet at a barrier each k tile; BF16 GEMMs that the warp-specialized
 * kernel serves go there (hip_wgmma_ws.hip). Other builds keep only stubs;
 * the dispatcher then uses the mma.sync tile of the same rows. With int4
 * weights (INT4) the weight tiles arrive as codes and are dequantized into
 * the same BF16 shared tiles, with the bits the BF16 mode holds
 * (int4_word_to_bf16), so no BF16 copy of the experts is made. */
#include "backends/hip/hip_int4_mma_ops.h"
#include "backends/hip/hip_wgmma_tile.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
/* INT4: the codes of k tile `k_tile` of this thread's rows (row numbers
 * `rows`, -1: none) into `stage`, half a row's 32 bytes a copy. */
template <int BN>
MI4_DEVICE void load_codes(uint8_t *stage, const int64_t (&rows)[BN * 2 / WG_THREADS], int k_tile,
                           const mi4_hip_int4_matrix &q)
{
    const int tid = (int)threadIdx.x, half = tid % 2;
#pragma unroll
    for (int i = 0; i < BN * 2 / WG_THREADS; i++) {
        const int r = tid / 2 + i * (WG_THREADS / 2);
        const bool valid = rows[i] >= 0;
        const uint8_t *src =
            q.codes + (valid ? mi4_int4_row_offset(q.inner_padded, (size_t)rows[i]) +
                                   mi4_int4_input_offset(k_tile * WG_BK + 32 * half)
                             : 0);
        mi4_copy16(stage + r * (WG_BK / 2) + 16 * half, src, valid);
    }
}

/* INT4: a k tile's group parameters of this thread's rows (raw bits),
 * loaded a step before the dequantization that needs them so the global
 * loads' latency hides behind a step of wgmmas. valid: a row and inputs
 * there (group sizes are multiples of 32: one group a thread). */
template <int BN> struct code_params {
    uint16_t scale[BN * 2 / WG_THREADS];
    uint8_t zero[BN * 2 / WG_THREADS];
    bool valid[BN * 2 / WG_THREADS];
};

template <int BN>
MI4_DEVICE void load_params(code_params<BN> &c, const int64_t (&rows)[BN * 2 / WG_THREADS],
                            int k_tile, const mi4_hip_int4_matrix &q)
{
    const int k0 = k_tile * WG_BK + 32 * ((int)threadIdx.x % 2);
#pragma unroll
    for (int i = 0; i < BN * 2 / WG_THREADS; i++) {
        c.valid[i] = rows[i] >= 0 && k0 < q.inner;
        const size_t at = c.valid[i] ? (size_t)rows[i] * q.groups + k0 / q.group_size : 0;
        c.scale[i] = c.valid[i] ? q.scales[at] : (uint16_t)0;
        c.zero[i] = c.valid[i] && q.zeros ? q.zeros[at] : (uint8_t)8;
    }
}

/* INT4: this thread's codes of k tile `k_tile` (in `codes`, landed) as
 * BF16 into the 128B-swizzled weight stage `dst`: row r's chunks 4 half ..
 * 4 half + 3, (q - zero) * scale rounded once (the BF16 mode's bits);
 * zeros for no row and for inputs past q.inner (a multiple of 8). */
template <int BN>
MI4_DEVICE void dequant_codes(uint16_t *dst, const uint8_t *codes, const code_params<BN> &c,
                              int k_tile, const mi4_hip_int4_matrix &q)
{
    const int tid = (int)threadIdx.x, half = tid % 2;
    const int k0 = k_tile * WG_BK + 32 * half;
#pragma unroll
    for (int i = 0; i < BN * 2 / WG_THREADS; i++) {
        const int r = tid / 2 + i * (WG_THREADS / 2);
        const uint4 v = *(const uint4 *)(codes + r * (WG_BK / 2) + 16 * half);
        const float scale = int4_scale_of(q, c.scale[i]);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int chunk = 4 * half + j;
            const uint4 w = c.valid[i] && k0 + 8 * j < q.inner
                                ? int4_word_to_bf16(int4_word_of(v, j), c.zero[i], scale)
                                : make_uint4(0u, 0u, 0u, 0u);
            *(uint4 *)(dst + r * 64 + ((chunk ^ (r & 7)) * 8)) = w;
        }
    }
}

/* Persistent: each block walks tiles blockIdx.x, + gridDim.x, ... (panel
 * order, tile_coords) as one flattened sequence of k tiles, so the next
 * tile's loads are in flight while this one's epilogue runs; the grid is one
 * block per SM. Loads run two k tiles ahead and one wgmma group stays in
 * flight, so the stage being refilled was read two groups ago. INT4: the
 * codes run three k tiles ahead (in the group of the token rows two ahead),
 * and each step dequantizes the next k tile's codes into its weight stage
 * while its own and the previous step's wgmmas run (that stage was read
 * three steps ago); q is unused otherwise. */
template <int BM, int BN, bool GATED, bool INT4>
__global__ void __launch_bounds__(WG_THREADS, 1) wgmma_gemm(gemm_params p, mi4_hip_int4_matrix q)
{
#if defined(MI4_HAVE_WGMMA)
    typedef wgmma_shape<BM, BN, INT4> shape;
    constexpr int WGC = shape::wg_cols, AHEAD = WG_STAGES - 2;
    extern __shared__ uint4 wg_smem_raw[];
    uint16_t *smem_a = (uint16_t *)(((uintptr_t)wg_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *smem_b = smem_a + WG_STAGES * BM * WG_BK;
    uint8_t *smem_codes = (uint8_t *)(smem_b + WG_STAGES * BN * WG_BK); /* INT4 */

    const int out_tiles = wgmma_out_tiles(p.out_cols, BN, GATED);
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int k_tiles = (p.inner + WG_BK - 1) / WG_BK;
    const int tid = (int)threadIdx.x;

    const uint16_t *a_ptr[shape::a_rows], *b_ptr[INT4 ? 1 : shape::b_rows];
    int64_t loader_tile = -1; /* the my_tiles index whose row pointers are held */
    /* INT4: the weight rows (row numbers) of the tiles whose codes are being
     * loaded and dequantized: three and one k tiles ahead, maybe other tiles */
    int64_t code_rows[shape::code_rows], dequant_rows[shape::code_rows];
    int64_t code_tile = -1, dequant_tile = -1;
    auto rows_of_tile = [&](int64_t j, int64_t (&rows)[shape::code_rows]) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int expert = p.tile_expert[tile];
#pragma unroll
        for (int i = 0; i < shape::code_rows; i++)
            rows[i] = b_row_number<BN, WGC, GATED>(p, expert, out_tile,
                                                   tid / 2 + i * (WG_THREADS / 2));
    };
    /* Steps are named by (my_tiles index j, k tile k): no 64-bit division
     * in the loop (ncu: it was most of the INT4 kernel's instructions). */
    auto after = [&](int64_t j, int k, int d, int64_t *j_out, int *k_out) {
        k += d;
        while (k >= k_tiles) {
            k -= k_tiles;
            j++;
        }
        *j_out = j;
        *k_out = k;
    };
    auto issue = [&](int64_t j, int k_tile, int stage) {
        if (j < my_tiles) {
            if (j != loader_tile) {
                int tile, out_tile, slot;
                tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
                int expert = p.tile_expert[tile];
#pragma unroll
                for (int i = 0; i < shape::a_rows; i++)
                    a_ptr[i] = a_row<BM, GATED>(p, tile, tid / 8 + i * (WG_THREADS / 8), &slot);
                if (!INT4)
#pragma unroll
                    for (int i = 0; i < shape::b_rows; i++)
                        b_ptr[i] = b_row<BN, WGC, GATED>(p, expert, out_tile,
                                                         tid / 8 + i * (WG_THREADS / 8));
                loader_tile = j;
            }
            load_swizzled<WG_THREADS / 8>(smem_a + stage * BM * WG_BK, a_ptr, tid, k_tile,
                                          p.inner, p.a);
            if (!INT4)
                load_swizzled<WG_THREADS / 8>(smem_b + stage * BN * WG_BK, b_ptr, tid, k_tile,
                                              p.inner, p.b);
        }
    };
    auto issue_codes = [&](int64_t j, int k_tile, int stage) { /* INT4 */
        if (j < my_tiles) {
            if (j != code_tile) {
                rows_of_tile(j, code_rows);
                code_tile = j;
            }
            load_codes<BN>(smem_codes + stage * shape::code_stage, code_rows, k_tile, q);
        }
    };
    code_params<BN> params; /* INT4: of the next step to dequantize */
    auto fetch_params = [&](int64_t j, int k_tile) {
        if (j < my_tiles) {
            if (j != dequant_tile) {
                rows_of_tile(j, dequant_rows);
                dequant_tile = j;
            }
            load_params<BN>(params, dequant_rows, k_tile, q);
        }
    };
    /* INT4: codes of step (j, k_tile) landed, its parameters fetched; then
     * fetches the next step's parameters */
    auto dequant = [&](int64_t j, int k_tile, int stage) {
        if (j < my_tiles) {
            dequant_codes<BN>(smem_b + stage * BN * WG_BK, smem_codes + stage * shape::code_stage,
                              params, k_tile, q);
            int64_t next_j;
            int next_k;
            after(j, k_tile, 1, &next_j, &next_k);
            fetch_params(next_j, next_k);
        }
    };

    float acc[shape::acc];
#pragma unroll
    for (int i = 0; i < shape::acc; i++)
        acc[i] = 0.0f;
    /* groups: {A 0, codes 0, 1}, {A 1, codes 2}, then {A s + 2, codes s + 3}
     * at step s: group s holds step s's token rows and step s + 1's codes */
    int64_t j1;
    int k1;
    after(0, 0, 1, &j1, &k1);
    issue(0, 0, 0);
    if (INT4) {
        issue_codes(0, 0, 0);
        issue_codes(j1, k1, 1);
    }
    mi4_copy_commit();
    issue(j1, k1, 1);
    if (INT4) {
        int64_t j2;
        int k2;
        after(0, 0, 2, &j2, &k2);
        issue_codes(j2, k2, 2);
    }
    mi4_copy_commit();
    if (INT4) {
        fetch_params(0, 0);
        mi4_copy_wait<1>();
        dequant(0, 0, 0); /* seen by step 0's wgmma after its fence and barrier */
    }
    const int warpgroup = tid / 128;
    const int wg_row = BM == 128 ? warpgroup * 64 : 0, wg_col = BM == 128 ? 0 : warpgroup * WGC;
    /* The k loop nested in the tile loop: the flattened loop of one
     * sequence with the epilogue behind a branch made ptxas serialize every
     * wgmma (C7518: accumulators touched in a path it took for divergent). */
    int64_t step = 0;
    for (int64_t my_tile = 0; my_tile < my_tiles; my_tile++) {
        for (int k_tile = 0; k_tile < k_tiles; k_tile++, step++) {
            mi4_copy_wait<AHEAD - 1>();
            mi4_fence_proxy_async(); /* INT4: the dequantized stores, for wgmma */
            __syncthreads();
            int64_t j_ahead;
            int k_ahead;
            after(my_tile, k_tile, AHEAD, &j_ahead, &k_ahead);
            issue(j_ahead, k_ahead, (int)((step + AHEAD) & (WG_STAGES - 1)));
            if (INT4) {
                after(my_tile, k_tile, AHEAD + 1, &j_ahead, &k_ahead);
                issue_codes(j_ahead, k_ahead, (int)((step + AHEAD + 1) & (WG_STAGES - 1)));
            }
            mi4_copy_commit();
            const int stage = (int)(step & (WG_STAGES - 1));
            uint64_t desc_a = mi4_wgmma_desc(smem_a + stage * BM * WG_BK + wg_row * WG_BK);
            uint64_t desc_b = mi4_wgmma_desc(smem_b + stage * BN * WG_BK + wg_col * WG_BK);
            mi4_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++) /* +32 bytes of k: the address counts 16 B */
                wgmma_step(acc, desc_a + 2 * kk, desc_b + 2 * kk);
            mi4_wgmma_commit();
            if (INT4) { /* while this step's and the last step's wgmmas run */
                int64_t j_next;
                int k_next;
                after(my_tile, k_tile, 1, &j_next, &k_next);
                /* its codes came in the group waited for above */
                dequant(j_next, k_next, (int)((step + 1) & (WG_STAGES - 1)));
            }
            mi4_wgmma_wait_one();
        }

        /* The tile's epilogue (the next tile's loads fly on). */
        mi4_wgmma_wait_all();
        mi4_fence_registers(acc);
        store_tile<BM, BN, GATED>(p, acc, my_tile, row_tiles, out_tiles);
#pragma unroll
        for (int i = 0; i < shape::acc; i++)
            acc[i] = 0.0f;
    }
    mi4_copy_wait<0>();
#else
    (void)p;
    (void)q;
    __trap(); /* launched only when MOEINT4_HIP_WGMMA is defined */
#endif
}

#endif

template <int BM, int BN, bool GATED, bool INT4>
hipError_t launch_wgmma(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    constexpr int smem = wgmma_shape<BM, BN, INT4>::smem;
    if (init) {
        hipError_t e = hipFuncSetAttribute((const void *)wgmma_gemm<BM, BN, GATED, INT4>,
                                           hipFuncAttributeMaxDynamicSharedMemorySize, smem);
        bool unused;
        return e == hipSuccess && !INT4 ? mi4_hip_launch_wgmma_ws(BM, BN, GATED, a, true, &unused)
                                        : e;
    }
    if (!INT4) {
        bool launched;
        const hipError_t e = mi4_hip_launch_wgmma_ws(BM, BN, GATED, a, false, &launched);
        if (e != hipSuccess || launched)
            return e;
    }
    gemm_params p = make_params(a, GATED);
    const mi4_hip_int4_matrix q = INT4 ? (GATED ? a->weights->q13 : a->weights->q2)
                                       : mi4_hip_int4_matrix{};
    const unsigned blocks = wgmma_grid(a, wgmma_out_tiles(p.out_cols, BN, GATED));
    if (blocks == 0)
        return hipSuccess;
    return mi4_launch(wgmma_gemm<BM, BN, GATED, INT4>, dim3(blocks), dim3(WG_THREADS), smem,
                      a->stream, p, q);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never called: mi4_hip_wgmma_built() is 0 */
#endif
}

template <bool INT4>
hipError_t launch_wgmma_of(int bm, int bn, bool gated, const mi4_hip_gemm_args *a, bool init)
{
    if (bm == 64)
        return gated ? launch_wgmma<64, 256, true, INT4>(a, init)
                     : launch_wgmma<64, 256, false, INT4>(a, init);
    if (bn == 128)
        return gated ? launch_wgmma<128, 128, true, INT4>(a, init)
                     : launch_wgmma<128, 128, false, INT4>(a, init);
    return gated ? launch_wgmma<128, 256, true, INT4>(a, init)
                 : launch_wgmma<128, 256, false, INT4>(a, init);
}

} // namespace

int mi4_hip_wgmma_built(void)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    return 1;
#else
    return 0;
#endif
}

hipError_t mi4_hip_launch_wgmma(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                bool init)
{
    return launch_wgmma_of<false>(bm, bn, gated, a, init);
}

hipError_t mi4_hip_launch_wgmma_dequant(int bm, int bn, bool gated, const mi4_hip_gemm_args *a,
                                        bool init)
{
    return launch_wgmma_of<true>(bm, bn, gated, a, init);
}
