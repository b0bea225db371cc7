/* The int4 grouped GEMM on Hopper (sm_90a): routed tiles of 8 to 128 token
 * rows of one expert (MI4_TILE_Q8 .. MI4_TILE_Q128), int4 weights
 * dequantized on the way into the matrix cores, no BF16 copy of the
 * weights anywhere.
 *
 * The GEMM is computed transposed: wgmma m64nNk16 with the weights as the
 * register-sourced A operand (64 weight rows per warpgroup, two
 * warpgroups: 128 weight rows per block) and the tile's N token rows as
 * the B operand from 128B-swizzled shared memory, as the BF16 wgmma GEMM
 * (hip_wgmma_gemm.hip) stages its tiles. Each stage of the cp.async
 * pipeline holds one 128-input chunk: the token rows (N x 256 bytes) and
 * the raw codes of the block's 128 weight rows (8 KB); the group scales
 * and zero points of those rows are read into shared memory once per
 * block.
 *
 * A lane dequantizes the 16 bytes of codes (32 inputs) of its two rows
 * that hip_int4_mma.hip's GEMV loads, with the same map of MMA k positions
 * to inputs, so no shuffle is needed; the token rows are stored in that
 * order instead: mi4_hip_launch_int4_permute writes the input rows so
 * permuted, and gemm13 writes the intermediate so permuted (each warp's 8
 * outputs are the 8 permuted positions that land side by side).
 *
 *   exact (N <= 32): (q - zero) as bf16 (exact), each chunk's product in a
 *     fresh accumulator scaled in f32 by the group scale, as the GEMVs;
 *   rounded (N >= 64): (q - zero) * scale rounded once to bf16 (the bits
 *     of the BF16 mode's weights), one accumulator over the whole input.
 * A warpgroup waits for its chunk's MMAs before it writes the next A
 * fragments (registers an MMA in flight reads must not change; ptxas
 * would serialize every MMA otherwise); the other warpgroup's MMAs keep
 * the matrix cores busy meanwhile. */
#include "backends/hip/hip_int4_wgmma_ops.h"

namespace {

using namespace mi4_gemm;

template <int N> struct q_shape {
    static constexpr int stages = N >= 128 ? 4 : N >= 64 ? 5 : 6;
    static constexpr bool exact = N <= 32;
    static constexpr int tokens_bytes = N * Q_CHUNK * 2;
    static constexpr int stage_bytes = tokens_bytes + Q_CODE_BYTES;
    static constexpr int pipeline_bytes = stages * stage_bytes + 1024; /* + alignment */
};

/* Shared bytes of a block: the pipeline, then scales (and zero points) of
 * its 128 rows for every group. */
template <int N> size_t q_smem_bytes(const mi4_hip_int4_matrix &q)
{
    return (size_t)q_shape<N>::pipeline_bytes + (size_t)Q_ROWS * q.groups * (q.zeros ? 3 : 2);
}

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
constexpr int Q_THREADS = 256;
/* scale loads a thread has in flight (fewer in narrow tiles: their
 * registers decide how many blocks an SM holds) */
template <int N> constexpr int q_loads = N >= 64 ? 8 : 4;
/* Dynamic shared memory a block may take: the device's 227 KiB less the
 * static token-row tables. */
constexpr size_t Q_SMEM_LIMIT = 225 * 1024;

template <int N, bool GATED>
__global__ void __launch_bounds__(Q_THREADS, N >= 64 ? 1 : 2)
    int4_wgmma_gemm(gemm_params p, mi4_hip_int4_matrix q)
{
#if defined(MI4_HAVE_WGMMA)
    typedef q_shape<N> shape;
    constexpr int STAGES = shape::stages, AHEAD = STAGES - 1, ACC = N / 2;
    constexpr bool EXACT = shape::exact;
    extern __shared__ uint4 q_smem_raw[];
    char *pipeline = (char *)(((uintptr_t)q_smem_raw + 1023) & ~(uintptr_t)1023);
    uint16_t *s_scale = (uint16_t *)(pipeline + STAGES * shape::stage_bytes);
    uint8_t *s_zero = (uint8_t *)(s_scale + Q_ROWS * q.groups);
    __shared__ const uint16_t *token_row[N];
    __shared__ int token_slot[N];

    const int out_tiles = q_out_tiles(p.out_cols, GATED);
    int tile, out_tile;
    tile_coords(blockIdx.x, p.max_tiles, out_tiles, &tile, &out_tile);
    if (tile >= p.status[2])
        return;
    const int expert = p.tile_expert[tile];
    const int tid = (int)threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const size_t expert_row0 = (size_t)expert * q.rows;

    for (int n = tid; n < N; n += Q_THREADS)
        token_row[n] = a_row<N, GATED>(p, tile, n, &token_slot[n]);
    /* this thread's two code rows of each stage: rows tid / 4 and + 64 */
    const uint8_t *code_src[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int wr = q_weight_row<GATED>(p, out_tile, tid / 4 + 64 * i);
        code_src[i] = wr < 0 ? nullptr
                             : q.codes + mi4_int4_row_offset(q.inner_padded, expert_row0 + wr) +
                                   16 * (tid % 4);
    }
    __syncthreads();

    /* This thread's token copies: 16 bytes (piece) of token rows
     * first_row + ROWS_PER_PASS k. Rows a multiple of 8 apart share their
     * swizzle, so every copy lands at a fixed offset from the first (the
     * general index arithmetic cost about 33 instructions a copy). */
    constexpr int ROWS_PER_PASS = Q_THREADS / 16;
    static_assert(ROWS_PER_PASS % 8 == 0, "the swizzle repeats every 8 rows");
    const int piece = tid % 16, first_row = tid / 16;
    const int token_at =
        piece / 8 * N * 64 + first_row * 64 + (((piece % 8) ^ (first_row & 7)) * 8);
    const int chunks = q.inner_padded / Q_CHUNK;
    auto issue = [&](int c) {
        if (c < chunks) {
            char *stage = pipeline + (c % STAGES) * shape::stage_bytes;
            uint16_t *tokens = (uint16_t *)stage;
#pragma unroll
            for (int k = 0; k < (N + ROWS_PER_PASS - 1) / ROWS_PER_PASS; k++) {
                const int n = first_row + k * ROWS_PER_PASS;
                if (N % ROWS_PER_PASS != 0 && n >= N)
                    break;
                const uint16_t *src = token_row[n];
                mi4_copy16(tokens + token_at + k * ROWS_PER_PASS * 64,
                           src ? src + c * Q_CHUNK + piece * 8 : p.a, src != nullptr);
            }
            uint8_t *codes = (uint8_t *)(stage + shape::tokens_bytes);
#pragma unroll
            for (int i = 0; i < 2; i++)
                mi4_copy16(codes + (tid / 4 + 64 * i) * 64 + 16 * (tid % 4),
                           code_src[i] ? code_src[i] + c * MI4_INT4_CHUNK_BYTES : q.codes,
                           code_src[i] != nullptr);
        }
        mi4_copy_commit();
    };
#pragma unroll
    for (int s = 0; s < AHEAD; s++)
        issue(s);

    /* Scales and zero points of the block's rows, while the first stages
     * fly: q_loads<N> loads in flight a thread before any store (a store
     * after each load waited for each, 16 round trips a block at
     * Mixtral's gemm13, 56 at its gemm2). */
    const int entries = Q_ROWS * q.groups;
    for (int first = tid; first < entries; first += q_loads<N> * Q_THREADS) {
        uint16_t scale[q_loads<N>];
        uint8_t zero[q_loads<N>];
#pragma unroll
        for (int j = 0; j < q_loads<N>; j++) {
            const int i = first + j * Q_THREADS, r = i / q.groups;
            const int wr = i < entries ? q_weight_row<GATED>(p, out_tile, r) : -1;
            const size_t at = (expert_row0 + (wr < 0 ? 0 : wr)) * q.groups + (i - r * q.groups);
            scale[j] = wr < 0 ? 0 : q.scales[at];
            zero[j] = wr < 0 || !q.zeros ? 8 : q.zeros[at];
        }
#pragma unroll
        for (int j = 0; j < q_loads<N>; j++) {
            const int i = first + j * Q_THREADS;
            if (i < entries) {
                s_scale[i] = scale[j];
                if (q.zeros)
                    s_zero[i] = zero[j];
            }
        }
    }

    float acc[ACC], part[ACC];
#pragma unroll
    for (int i = 0; i < ACC; i++)
        acc[i] = 0.0f;
    const int row_lo = warp * 16 + g, row_hi = row_lo + 8;

    /* The A fragments of the 8 k steps of chunk c into `a` (and the
     * chunk's two group scales into `scale`), from its landed stage. */
    auto dequant_chunk = [&](int c, uint32_t(&a)[8][4], float(&scale)[2]) {
        const char *stage = pipeline + (c % STAGES) * shape::stage_bytes;
        const uint8_t *codes = (const uint8_t *)(stage + shape::tokens_bytes);
        const uint4 lo = *(const uint4 *)(codes + row_lo * 64 + 16 * t);
        const uint4 hi = *(const uint4 *)(codes + row_hi * 64 + 16 * t);
        const int group = c * Q_CHUNK / q.group_size;
        scale[0] = int4_scale_of(q, s_scale[row_lo * q.groups + group]);
        scale[1] = int4_scale_of(q, s_scale[row_hi * q.groups + group]);
        const int zero_lo = q.zeros ? s_zero[row_lo * q.groups + group] : 8;
        const int zero_hi = q.zeros ? s_zero[row_hi * q.groups + group] : 8;
        const uint32_t bias_lo = int4_bias_pair(zero_lo), bias_hi = int4_bias_pair(zero_hi);
        /* unused (and dropped) in the exact mode */
        const q_split_scale split_lo = q_split(scale[0]), split_hi = q_split(scale[1]);
#pragma unroll
        for (int s = 0; s < 8; s++)
            q_fragment<!EXACT>(a[s], lo, hi, s, bias_lo, bias_hi, split_lo, split_hi);
    };
    /* The chunk waited for has landed for every thread (and every thread
     * is past the MMAs of the chunks before the one in flight). */
    auto chunk_landed = [&]() {
        mi4_fence_proxy_async();
        __syncthreads();
    };

    /* From 64 tokens on, two sets of A fragments: chunk c + 1's are
     * dequantized while chunk c's MMAs run (so the dequantization and the
     * matrix cores overlap in each warpgroup, not only across the two),
     * then chunk c's MMAs are waited for. One step: MMAs of chunk c from
     * `now`, dequantization of chunk c + 1 into `next`. Narrower tiles
     * dequantize a chunk, then run its MMAs: the H200 measured no gain at
     * 32 tokens and a loss at 8 (the second set spills or halves the
     * blocks an SM holds). */
    constexpr bool PIPELINED = N >= 64;
    static_assert(!PIPELINED || AHEAD >= 2, "the pipelined loop waits for the chunk after next");
    uint32_t frag[2][8][4];
    float frag_scale[2][2];
    auto step = [&](int c, uint32_t(&now)[8][4], const float(&now_scale)[2], uint32_t(&next)[8][4],
                    float(&next_scale)[2]) {
        const char *stage = pipeline + (c % STAGES) * shape::stage_bytes;
        const uint16_t *tokens = (const uint16_t *)stage;
        const uint64_t desc0 = mi4_wgmma_desc(tokens), desc1 = mi4_wgmma_desc(tokens + N * 64);
        mi4_wgmma_fence();
#pragma unroll
        for (int s = 0; s < 8; s++) {
            const uint64_t desc = (s < 4 ? desc0 : desc1) + 2 * (s % 4);
            if constexpr (EXACT)
                wgmma_rs(part, now[s], desc, s > 0);
            else
                wgmma_rs(acc, now[s], desc, 1);
        }
        mi4_wgmma_commit();
        if (PIPELINED && c + 1 < chunks) { /* uniform over the block */
            mi4_copy_wait<AHEAD - 2>();    /* chunk c + 1 */
            chunk_landed();
            issue(c + AHEAD); /* into chunk c - 1's stage, whose MMAs are done */
            dequant_chunk(c + 1, next, next_scale);
        }
        mi4_wgmma_wait_all();
        q_keep(now);
        if constexpr (EXACT) {
            mi4_fence_registers(part);
#pragma unroll
            for (int i = 0; i < ACC; i++)
                acc[i] = fmaf(part[i], (i & 2) ? now_scale[1] : now_scale[0], acc[i]);
        }
    };
    if constexpr (PIPELINED) {
        mi4_copy_wait<AHEAD - 1>(); /* chunk 0 */
        chunk_landed();
        dequant_chunk(0, frag[0], frag_scale[0]);
        for (int c = 0; c < chunks; c += 2) {
            step(c, frag[0], frag_scale[0], frag[1], frag_scale[1]);
            if (c + 1 < chunks)
                step(c + 1, frag[1], frag_scale[1], frag[0], frag_scale[0]);
        }
    } else {
        for (int c = 0; c < chunks; c++) {
            mi4_copy_wait<AHEAD - 1>(); /* chunk c */
            chunk_landed();
            issue(c + AHEAD); /* into chunk c - 1's stage, whose MMAs are done */
            dequant_chunk(c, frag[0], frag_scale[0]);
            step(c, frag[0], frag_scale[0], frag[1], frag_scale[1]);
        }
    }
    mi4_fence_registers(acc);
    mi4_copy_wait<0>();

    /* Epilogue. acc[4j + i]: weight row row_lo (i < 2) or row_hi, token 8j + 2t + (i & 1). */
#pragma unroll
    for (int j = 0; j < N / 8; j++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int n = 8 * j + 2 * t + i, slot = token_slot[n];
            if (slot < 0)
                continue;
            if (GATED) {
                /* the intermediate in the permuted order gemm2 reads */
                const int at = out_tile * (Q_ROWS / 2) + warp * 8 + g;
                p.act[((size_t)tile * N + n) * (size_t)p.out_cols + at] = mi4_dev_f32_to_bf16(
                    activate(p.activation, acc[4 * j + i], acc[4 * j + 2 + i], p.limit, p.alpha,
                             p.beta));
            } else {
                const float scale = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
                float *y = p.y + (size_t)slot * (size_t)p.out_cols;
                const int out_lo = out_tile * Q_ROWS + row_lo, out_hi = out_lo + 8;
                if (out_lo < p.out_cols)
                    y[out_lo] = acc[4 * j + i] * scale;
                if (out_hi < p.out_cols)
                    y[out_hi] = acc[4 * j + 2 + i] * scale;
            }
        }
#else
    (void)p;
    (void)q;
    __trap(); /* launched only in sm_90a builds */
#endif
}
#endif

/* Input rows (bf16, `rows` x `inner`, inner a multiple of 128) into the
 * permuted order, out of place: thread = (row, chunk, step), 16 outputs. */
__global__ void int4_permute_rows(const uint16_t *src, uint16_t *dst, int64_t rows, int inner)
{
    const int chunks = inner / Q_CHUNK;
    const int64_t total = rows * chunks * 8;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int s = (int)(i % 8);
        const size_t base = (size_t)(i / 8) * Q_CHUNK; /* row * inner + chunk * 128 */
        uint32_t out[8];
#pragma unroll
        for (int k = 0; k < 16; k += 2) {
            const uint32_t a = src[base + q_input_of(16 * s + k)];
            const uint32_t b = src[base + q_input_of(16 * s + k + 1)];
            out[k / 2] = a | b << 16;
        }
        *(uint4 *)(dst + base + 16 * s) = make_uint4(out[0], out[1], out[2], out[3]);
        *(uint4 *)(dst + base + 16 * s + 8) = make_uint4(out[4], out[5], out[6], out[7]);
    }
}

template <int N, bool GATED> hipError_t launch_q(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    if (init)
        return hipFuncSetAttribute((const void *)int4_wgmma_gemm<N, GATED>,
                                   hipFuncAttributeMaxDynamicSharedMemorySize, (int)Q_SMEM_LIMIT);
    gemm_params p = make_params(a, GATED);
    p.b = nullptr; /* the weights are q */
    const mi4_hip_int4_matrix q = GATED ? a->weights->q13 : a->weights->q2;
    const int out_tiles = q_out_tiles(p.out_cols, GATED);
    const size_t blocks = (size_t)a->routing->max_tiles * (size_t)out_tiles;
    if (blocks == 0)
        return hipSuccess;
    return mi4_launch(int4_wgmma_gemm<N, GATED>, dim3((unsigned)blocks), dim3(Q_THREADS),
                      q_smem_bytes<N>(q), a->stream, p, q);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never launched: mi4_hip_int4_wgmma_serves is 0 */
#endif
}

template <bool GATED>
hipError_t launch_tile(mi4_hip_tile_config config, const mi4_hip_gemm_args *a, bool init)
{
    switch (config) {
    case MI4_TILE_Q8: return launch_q<8, GATED>(a, init);
    case MI4_TILE_Q16: return launch_q<16, GATED>(a, init);
    case MI4_TILE_Q32: return launch_q<32, GATED>(a, init);
    case MI4_TILE_Q64: return launch_q<64, GATED>(a, init);
    case MI4_TILE_QW32:
    case MI4_TILE_QW64:
    case MI4_TILE_QW128:
    case MI4_TILE_Q256: return mi4_hip_launch_int4_ws(mi4_hip_tile_rows(config), GATED, a, init);
    default: return launch_q<128, GATED>(a, init);
    }
}

} // namespace

int mi4_hip_int4_wgmma_serves(const mi4_hip_weights *w)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    if (!w->int4 || !w->int4_mma || w->hidden_size % Q_CHUNK != 0 ||
        w->intermediate_size % Q_CHUNK != 0)
        return 0;
    return q_smem_bytes<128>(w->q13) <= Q_SMEM_LIMIT && q_smem_bytes<128>(w->q2) <= Q_SMEM_LIMIT;
#else
    (void)w;
    return 0;
#endif
}

hipError_t mi4_hip_launch_int4_wgmma(mi4_hip_tile_config config, bool gated,
                                     const mi4_hip_gemm_args *a, bool init)
{
    return gated ? launch_tile<true>(config, a, init) : launch_tile<false>(config, a, init);
}

hipError_t mi4_hip_launch_int4_permute(const uint16_t *src, uint16_t *dst, int64_t rows,
                                       int inner, hipStream_t stream)
{
    return mi4_launch(int4_permute_rows, dim3(mi4_hip_stride_grid(rows * (inner / Q_CHUNK) * 8)),
                      dim3(256), 0, stream, src, dst, rows, inner);
}
