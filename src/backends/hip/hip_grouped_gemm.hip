/* The grouped BF16 GEMMs of the expert MLP over routed row tiles, and the
 * choice among them (mi4_hip_tile_config).
 *
 * Each block computes a BM x BN output tile of one expert. Rows come from the
 * routing (sorted slots, padded to BM per expert); operands are staged
 * through shared memory in a STAGES-deep pipeline of 16-byte copies; the
 * inner step is hip_matrix_core.h's 16x16x16 tile (matrix cores or plain FMA).
 *
 *   gemm13: A = x rows (gathered by slot), B = w13[e] rows. Each warp's
 *           WN columns are WN/2 gate rows followed by the WN/2 matching up
 *           rows, so a lane holds gate and up of the same output in
 *           fragments j and j + WN/32: the activation is applied in the
 *           epilogue and only act [rows][N] (bf16) is written.
 *   gemm2:  A = act rows, B = w2[e]; the epilogue scales by the router
 *           weight and writes f32 rows per slot for the combine.
 *
 * INT4: B comes from int4 weights (q), dequantized into the shared B tiles
 * with the bits the BF16 mode holds (dequant_rows), so the output is that
 * of the expansion to BF16 without the expansion; the wgmma tiles do the
 * same (hip_wgmma_gemm.hip). */
#include "backends/hip/hip_int4_mma_ops.h"

namespace {

using namespace mi4_gemm;

/* One k16 step of a warp's FM x FN fragments. */
template <int FM, int FN, int LD>
__device__ __forceinline__ void fma_step(mi4_frag_acc (&acc)[FM][FN], const uint16_t *sa,
                                         const uint16_t *sb)
{
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            mi4_fma_tile(acc[i][j], sa + i * 16 * LD, LD, sb + j * 16 * LD, LD);
}

template <int FM, int FN, int LD>
__device__ __forceinline__ void mma_step(mi4_frag_acc (&acc)[FM][FN], const uint16_t *sa,
                                         const uint16_t *sb)
{
#if MI4_HAVE_MATRIX_CORES
    mi4_frag_a fa[FM];
    mi4_frag_b fb[FN];
#pragma unroll
    for (int i = 0; i < FM; i++)
        mi4_load_a(fa[i], sa + i * 16 * LD, LD);
#pragma unroll
    for (int j = 0; j < FN; j++)
        mi4_load_b(fb[j], sb + j * 16 * LD, LD);
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
            mi4_mma(acc[i][j], fa[i], fb[j]);
#else
    fma_step<FM, FN, LD>(acc, sa, sb);
#endif
}

template <int BM, int BN, int BK, int WM, int WN, int STAGES> struct tile_shape {
    static constexpr int warps = (BM / WM) * (BN / WN);
    static constexpr int threads = warps * MI4_WARP;
    static constexpr int ld = BK + 8; /* padding keeps fragment loads off one bank */
    static constexpr int smem_bytes = STAGES * (BM + BN) * ld * 2;
};

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool MMA, bool GATED, bool INT4>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * MI4_WARP)
    grouped_gemm(gemm_params p, mi4_hip_int4_matrix q)
{
    typedef tile_shape<BM, BN, BK, WM, WN, STAGES> shape;
    constexpr int LD = shape::ld;
    constexpr int THREADS = shape::threads;
    constexpr int FM = WM / 16, FN = WN / 16;
    extern __shared__ uint4 smem_raw[];
    uint16_t *smem_a = (uint16_t *)smem_raw;
    uint16_t *smem_b = smem_a + STAGES * BM * LD;
    __shared__ const uint16_t *a_rows[BM];
    __shared__ union {
        const uint16_t *pointers[BN];
        int64_t numbers[BN]; /* INT4: rows of q, -1: none (AMD's 64 KiB of LDS: no room for both) */
    } b_rows;
    __shared__ int row_slot[BM];

    const int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2)
                                : (p.out_cols + BN - 1) / BN;
    int tile, out_tile;
    tile_coords(blockIdx.x, p.max_tiles, out_tiles, &tile, &out_tile);
    if (tile >= p.status[2])
        return;
    const int expert = p.tile_expert[tile];
    const int tid = (int)threadIdx.x;

    setup_rows<BM, BN, WN, THREADS, GATED>(p, tile, out_tile, expert, a_rows, b_rows.pointers,
                                           row_slot);
    if (INT4) /* each entry by the thread that set its pointer above */
        for (int c = tid; c < BN; c += THREADS)
            b_rows.numbers[c] = b_row_number<BN, WN, GATED>(p, expert, out_tile, c);
    __syncthreads();

    const int k_tiles = (p.inner + BK - 1) / BK;
    auto load_stage = [&](int stage, int k_tile) {
        load_rows<BM, BK, THREADS>(smem_a + stage * BM * LD, LD, a_rows, k_tile * BK,
                                          p.inner, p.a);
        if (INT4) /* published by the barrier before the stage is read */
            dequant_rows<BN, BK, THREADS>(smem_b + stage * BN * LD, LD, b_rows.numbers,
                                          k_tile * BK, q);
        else
            load_rows<BN, BK, THREADS>(smem_b + stage * BN * LD, LD, b_rows.pointers,
                                       k_tile * BK, p.inner, p.b);
    };

    mi4_frag_acc acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; i++)
#pragma unroll
        for (int j = 0; j < FN; j++)
#pragma unroll
            for (int e = 0; e < MI4_ACC_PER_LANE; e++)
                acc[i][j].v[e] = 0.0f;

    const int warp = tid / MI4_WARP;
    const int warp_row = (warp / (BN / WN)) * WM;
    const int warp_col = (warp % (BN / WN)) * WN;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < k_tiles)
            load_stage(s, s);
        mi4_copy_commit();
    }
    for (int kt = 0; kt < k_tiles; kt++) {
        mi4_copy_wait<STAGES - 2>();
        __syncthreads();
        int next = kt + STAGES - 1;
        if (next < k_tiles)
            load_stage(next % STAGES, next);
        mi4_copy_commit();

        const uint16_t *sa = smem_a + (kt % STAGES) * BM * LD + warp_row * LD;
        const uint16_t *sb = smem_b + (kt % STAGES) * BN * LD + warp_col * LD;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            if (MMA && MI4_HAVE_MATRIX_CORES)
                mma_step<FM, FN, LD>(acc, sa + kk, sb + kk);
            else
                fma_step<FM, FN, LD>(acc, sa + kk, sb + kk);
        }
    }
    mi4_copy_wait<0>();

    /* NVIDIA lanes hold column pairs: one 4- or 8-byte store per pair. */
    constexpr int STEP = MI4_ACC_PAIRS ? 2 : 1;
    if (GATED) {
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
            for (int j = 0; j < FN / 2; j++)
#pragma unroll
                for (int e = 0; e < MI4_ACC_PER_LANE; e += STEP) {
                    int r = warp_row + i * 16 + mi4_acc_row(e);
                    int n = out_tile * (BN / 2) + (warp_col / 2) + j * 16 + mi4_acc_col(e);
                    if (row_slot[r] < 0 || n >= p.out_cols)
                        continue;
                    uint16_t *dst = p.act + ((size_t)tile * BM + r) * (size_t)p.out_cols + n;
                    uint32_t v0 = mi4_dev_f32_to_bf16(activate(p.activation, acc[i][j].v[e],
                                                               acc[i][j + FN / 2].v[e], p.limit,
                                                               p.alpha, p.beta));
                    if (STEP == 2) {
                        /* out_cols is a multiple of 8, so n + 1 is in range too */
                        uint32_t v1 = mi4_dev_f32_to_bf16(
                            activate(p.activation, acc[i][j].v[e + STEP - 1],
                                     acc[i][j + FN / 2].v[e + STEP - 1], p.limit, p.alpha, p.beta));
                        *(uint32_t *)dst = v0 | (v1 << 16);
                    } else {
                        *dst = (uint16_t)v0;
                    }
                }
    } else {
#pragma unroll
        for (int i = 0; i < FM; i++)
#pragma unroll
            for (int j = 0; j < FN; j++)
#pragma unroll
                for (int e = 0; e < MI4_ACC_PER_LANE; e += STEP) {
                    int r = warp_row + i * 16 + mi4_acc_row(e);
                    int c = out_tile * BN + warp_col + j * 16 + mi4_acc_col(e);
                    int slot = row_slot[r];
                    if (slot < 0 || c >= p.out_cols)
                        continue;
                    float w = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
                    float *dst = p.y + (size_t)slot * (size_t)p.out_cols + c;
                    if (STEP == 2)
                        *(float2 *)dst = make_float2(acc[i][j].v[e] * w,
                                                     acc[i][j].v[e + STEP - 1] * w);
                    else
                        *dst = acc[i][j].v[e] * w;
                }
    }
}

/* Pipeline depth: AMD copies complete at once, two stages suffice there
 * (and keep every tile within gfx90a's 64 KiB of LDS). */
#if defined(MI4_PLATFORM_NVIDIA)
#define DEEP 4
#else
#define DEEP 2
#endif

/* Deeper k steps where shared memory allows (AMD: 64 KiB of LDS). */
#if defined(MI4_PLATFORM_NVIDIA)
#define WIDE_K 64
#else
#define WIDE_K 32
#endif

/* BM, BN, BK, WM, WN, STAGES of each configuration (mi4_hip_tile_config). */
#define CONFIG_16 16, 64, 128, 16, 32, DEEP
#define CONFIG_16_NARROW 16, 32, 128, 16, 32, DEEP
#define CONFIG_64 64, 128, 32, 32, 64, DEEP
#define CONFIG_128 128, 128, 32, 64, 32, DEEP
#define CONFIG_128_DEEP 128, 128, WIDE_K, 64, 64, (DEEP > 3 ? 3 : DEEP)
#define CONFIG_256 128, 256, 32, 64, 64, DEEP

template <int BM, int BN, int BK, int WM, int WN, int STAGES, bool GATED, bool INT4 = false>
hipError_t launch(const mi4_hip_gemm_args *a, bool set_attributes_only)
{
    typedef tile_shape<BM, BN, BK, WM, WN, STAGES> shape;
    if (set_attributes_only) {
#if defined(MI4_PLATFORM_NVIDIA)
        if (shape::smem_bytes > 48 * 1024) {
            hipError_t e = hipFuncSetAttribute(
                (const void *)grouped_gemm<BM, BN, BK, WM, WN, STAGES, true, GATED, INT4>,
                hipFuncAttributeMaxDynamicSharedMemorySize, shape::smem_bytes);
            if (e == hipSuccess)
                e = hipFuncSetAttribute(
                    (const void *)grouped_gemm<BM, BN, BK, WM, WN, STAGES, false, GATED, INT4>,
                    hipFuncAttributeMaxDynamicSharedMemorySize, shape::smem_bytes);
            return e;
        }
#endif
        return hipSuccess;
    }
    gemm_params p = make_params(a, GATED);
    const mi4_hip_int4_matrix q = INT4 ? (GATED ? a->weights->q13 : a->weights->q2)
                                       : mi4_hip_int4_matrix{};
    int out_tiles = GATED ? (p.out_cols + BN / 2 - 1) / (BN / 2) : (p.out_cols + BN - 1) / BN;
    size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    if (blocks == 0)
        return hipSuccess;
    dim3 grid((unsigned)blocks), block(shape::threads);
    if (a->use_mma)
        return mi4_launch(grouped_gemm<BM, BN, BK, WM, WN, STAGES, true, GATED, INT4>, grid,
                          block, shape::smem_bytes, a->stream, p, q);
    return mi4_launch(grouped_gemm<BM, BN, BK, WM, WN, STAGES, false, GATED, INT4>, grid, block,
                      shape::smem_bytes, a->stream, p, q);
}

template <int BM, int BN, bool GATED, bool INT4>
hipError_t launch_wgmma(const mi4_hip_gemm_args *a, bool init)
{
    if (init && mi4_hip_wgmma_built()) {
        hipError_t e = INT4 ? mi4_hip_launch_wgmma_dequant(BM, BN, GATED, a, init)
                            : mi4_hip_launch_wgmma(BM, BN, GATED, a, init);
        if (e != hipSuccess)
            return e;
    } else if (mi4_hip_wgmma_built() && a->use_mma) {
        return INT4 ? mi4_hip_launch_wgmma_dequant(BM, BN, GATED, a, init)
                    : mi4_hip_launch_wgmma(BM, BN, GATED, a, init);
    }
    /* no sm_90a code in this build, or the plain-FMA variant asked for: the
     * tiled GEMM of the same rows */
    return BM == 64 ? launch<CONFIG_64, GATED, INT4>(a, init)
                    : launch<CONFIG_128, GATED, INT4>(a, init);
}

/* INT4: the tiles over int4 weights dequantized in the tiles (only the
 * tiles that otherwise read BF16: mi4_hip_int4_tile_reads_bf16). */
template <bool GATED, bool INT4 = false>
hipError_t launch_config(mi4_hip_tile_config config, const mi4_hip_gemm_args *a, bool init)
{
    switch (config) {
    case MI4_TILE_16: return launch<CONFIG_16, GATED, INT4>(a, init);
    case MI4_TILE_16_NARROW: return launch<CONFIG_16_NARROW, GATED, INT4>(a, init);
    case MI4_TILE_64: return launch<CONFIG_64, GATED, INT4>(a, init);
    case MI4_TILE_128: return launch<CONFIG_128, GATED, INT4>(a, init);
    case MI4_TILE_128_DEEP: return launch<CONFIG_128_DEEP, GATED, INT4>(a, init);
    case MI4_TILE_GEMV:
    case MI4_TILE_D8: /* BF16 weights: the routed 8-row GEMV */
    case MI4_TILE_DIRECT:
        if (init)
            return hipSuccess;
        return INT4 ? hipErrorInvalidValue /* these read int4 themselves */
                    : mi4_hip_launch_gemv(GATED, config == MI4_TILE_DIRECT, a);
    case MI4_TILE_WGMMA_128: return launch_wgmma<128, 128, GATED, INT4>(a, init);
    case MI4_TILE_WGMMA_256: return launch_wgmma<128, 256, GATED, INT4>(a, init);
    case MI4_TILE_WGMMA_64: return launch_wgmma<64, 256, GATED, INT4>(a, init);
    case MI4_TILE_Q8:
    case MI4_TILE_Q16:
    case MI4_TILE_Q32:
    case MI4_TILE_Q64:
    case MI4_TILE_Q128:
    case MI4_TILE_QW32:
    case MI4_TILE_QW64:
    case MI4_TILE_QW128:
    case MI4_TILE_Q256: /* int4 weights only (mi4_hip_launch_gemm13 below) */
        if (INT4)
            return init ? hipSuccess : hipErrorInvalidValue;
        return init ? mi4_hip_launch_int4_wgmma(config, GATED, a, true)
                    : hipErrorInvalidValue;
    default: return launch<CONFIG_256, GATED, INT4>(a, init);
    }
}

} // namespace

int mi4_hip_tile_rows(mi4_hip_tile_config config)
{
    switch (config) {
    case MI4_TILE_16:
    case MI4_TILE_16_NARROW: return 16;
    case MI4_TILE_GEMV: return GEMV_TOKENS;
    case MI4_TILE_D8: return 8;
    case MI4_TILE_DIRECT: return 1;
    case MI4_TILE_WGMMA_64: return 64;
    case MI4_TILE_64: return 64;
    case MI4_TILE_Q8: return 8;
    case MI4_TILE_Q16: return 16;
    case MI4_TILE_Q32:
    case MI4_TILE_QW32: return 32;
    case MI4_TILE_Q64:
    case MI4_TILE_QW64: return 64;
    case MI4_TILE_Q256: return 256;
    case MI4_TILE_QW128: return 128;
    default: return 128;
    }
}

const char *mi4_hip_tile_name(mi4_hip_tile_config config)
{
    static const char *const names[MI4_TILE_COUNT] = {"16", "16n", "64", "128", "128d", "256",
                                                             "8v", "w128", "w256", "direct",
                                                             "w64", "q8", "q16", "q32",
                                                             "q64", "q128", "d8", "q256",
                                                             "qw64", "qw128", "qw32"};
    return (int)config >= 0 && config < MI4_TILE_COUNT ? names[config] : nullptr;
}

int mi4_hip_tile_is_int4_gemm(mi4_hip_tile_config config)
{
    return (config >= MI4_TILE_Q8 && config <= MI4_TILE_Q128) || config == MI4_TILE_Q256 ||
           config == MI4_TILE_QW64 || config == MI4_TILE_QW128 || config == MI4_TILE_QW32;
}

hipError_t mi4_hip_launch_gemm13(mi4_hip_tile_config config, const mi4_hip_gemm_args *a)
{
    if (a->weights->int4) /* int4 kernels (hip_int4_gemv.hip); expanded weights are bf16 */
        return mi4_hip_launch_int4(config, true, a);
    return launch_config<true>(config, a, false);
}

hipError_t mi4_hip_launch_gemm2(mi4_hip_tile_config config, const mi4_hip_gemm_args *a)
{
    if (a->weights->int4)
        return mi4_hip_launch_int4(config, false, a);
    return launch_config<false>(config, a, false);
}

hipError_t mi4_hip_gemm_init(void)
{
    hipError_t decode = mi4_hip_int4_decode_init();
    if (decode == hipSuccess)
        decode = mi4_hip_int4_routed_init();
    if (decode != hipSuccess)
        return decode;
    for (int c = 0; c < MI4_TILE_COUNT; c++) {
        hipError_t e = launch_config<true>((mi4_hip_tile_config)c, nullptr, true);
        if (e == hipSuccess)
            e = launch_config<false>((mi4_hip_tile_config)c, nullptr, true);
        if (e == hipSuccess) /* the same tiles over int4 codes */
            e = launch_config<true, true>((mi4_hip_tile_config)c, nullptr, true);
        if (e == hipSuccess)
            e = launch_config<false, true>((mi4_hip_tile_config)c, nullptr, true);
        if (e != hipSuccess)
            return e;
    }
    return hipSuccess;
}

hipError_t mi4_hip_launch_gemm_dequant(mi4_hip_tile_config config, bool gated,
                                       const mi4_hip_gemm_args *a)
{
    return gated ? launch_config<true, true>(config, a, false)
                 : launch_config<false, true>(config, a, false);
}
