/* The warp-specialized int4 grouped GEMMs for 5 rows an expert and more
 * (sm_90a; other builds keep a stub): persistent, the weights dequantized
 * into registers, no BF16 copy of them anywhere. One kernel, four tile
 * heights: qw32 (MI4_TILE_QW32, 5-24 rows an expert, two blocks an SM),
 * qw64 (25 to 95), qw128 (96-128) and q256 (129-1023, or more where the
 * prepare keeps it; mi4_hip_int4_gemm_tile in hip_tiles.hip).
 *
 * A block computes 128 weight rows x up to T token rows of one expert,
 * transposed as the q tiles (hip_int4_grouped_gemm.hip) are: wgmma
 * m64nNk16 with the weights as the register-sourced A operand and the
 * tile's token rows as B from 128B-swizzled shared memory. Unlike the q
 * tiles, whose 8 warps all copy, dequantize and issue and meet at a barrier
 * every chunk (ncu: under half an instruction a cycle a scheduler, 2026-12-03),
 * a producer warpgroup only copies (token rows and codes of 64 inputs a
 * stage, cp.async) and two consumer warpgroups only dequantize their 64
 * rows' codes two k steps ahead of the wgmma that reads them. N is the
 * tile's valid rows rounded up (q256: to 64; the qw tiles: to 16), so an
 * expert's last, partly filled tile costs what it holds. The producer hands
 * each tile's table (slots, input rows, router weights) and valid rows to
 * the consumers through a two-entry ring. Numerics (qw_config): q256 has
 * the q tiles' rounded mode (weights rounded once to BF16, the BF16 mode's
 * bits; one f32 accumulator), the qw tiles their exact mode (each
 * chunk's product in fresh accumulators, scaled in f32).
 * q256's first version (bench/results/hip-2026-12-04-q256.md) ran at half
 * the BF16 wgmma GEMM's rate; ncu's stall samples showed a producer that
 * read the table and multiplied 64-bit addresses before every copy (the
 * consumers waited for it), and an epilogue whose code (every activation,
 * unrolled) missed the instruction cache: fixed, 33-42% faster
 * (bench/results/hip-2026-12-04-q256-v2.md). Weights dequantized into
 * shared-memory A tiles for wgmma from shared memory (a stage's wgmmas in
 * flight) measured slower there. gemm2's token rows (contiguous in tile
 * order) come as one TMA box a stage (4-6% faster; MOEINT4_HIP_WGMMA_TMA=0:
 * cp.async). The exact tiles: bench/results/hip-2026-12-04-queued.md. */
#include <stdlib.h>
#include <string.h>

#include "backends/hip/hip_int4_ws_loops.h"
#include "backends/hip/hip_tma.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
using namespace mi4_int4_ws;

#if defined(MI4_HAVE_WGMMA)

/* 8 bytes global -> shared (cp.async.ca: .cg takes 16 only); zeros when !valid. */
MI4_DEVICE void qw_copy8(void *smem_dst, const void *global_src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(smem_dst)),
                 "l"(global_src), "r"(valid ? 8 : 0));
}

/* Warp 0 of the producer: tile `tile`'s table into buffer buf (once the
 * consumers are done with its previous tile). */
template <int T, bool GATED>
MI4_DEVICE void qw_fill_table(const gemm_params &p, const qw_shared<T> &sh, int tile, int buf,
                              unsigned empty_parity)
{
    const int lane = (int)threadIdx.x % 32;
    mi4_mbar_wait(&sh.table_empty[buf], empty_parity);
    const qw_table tb = sh.table(buf);
    int valid = 0;
#pragma unroll
    for (int i = 0; i < T / 32; i++) {
        const int r = lane + 32 * i;
        const int slot = p.sorted_slot[(size_t)tile * T + r];
        tb.slot[r] = slot;
        tb.row[r] = GATED ? (p.a_by_slot ? slot : slot / p.topk) : tile * T + r;
        tb.weight[r] = !GATED && p.weight_on_output && slot >= 0 ? p.topk_weights[slot] : 1.0f;
        valid += slot >= 0;
    }
    valid = mi4_warp_sum(valid);
    if (lane == 0) {
        sh.rows[buf] = valid; /* padding only ends a tile */
        mi4_mbar_arrive(&sh.table_full[buf]);
    }
}

/* TOKEN_TMA (gemm2, whose token rows are the tile's rows of the
 * intermediate, contiguous): a stage's token rows are one TMA box (T rows
 * x 64 inputs) of token_map, issued by thread 0, instead of T / 16
 * cp.async a thread. */
template <int T, bool GATED, bool TOKEN_TMA, bool STAGED_SCALES>
MI4_DEVICE void qw_produce(const gemm_params &p, const mi4_hip_int4_matrix &q,
                           const qw_shared<T> &sh, const CUtensorMap *token_map, int row_tiles,
                           int out_tiles, int64_t my_tiles, int steps)
{
    typedef qw_config<T> C;
    const int ptid = (int)threadIdx.x - QW_CONSUMERS;
    /* token copies: 16-byte piece `piece` of rows first_row + 16 i (a warp
     * copies four whole 128-byte rows a copy; rows 8 apart share the swizzle) */
    const int piece = ptid % 8, first_row = ptid / 8;
    const int token_at = first_row * 64 + ((piece ^ (first_row & 7)) * 8);
    /* code copies: piece `code_piece` (16 bytes of a chunk; q256: their 8
     * bytes of its half) of block rows code_row + 32 i */
    const int code_piece = ptid % 4, code_row = ptid / 4;
    constexpr int code_row_bytes = C::k_inputs / 2;
    qw_step step = 0; /* steps issued */
    for (int64_t j = 0; j < my_tiles; j++) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int buf = (int)(j & 1);
        if (ptid < 32)
            qw_fill_table<T, GATED>(p, sh, tile, buf, (unsigned)((j >> 1) & 1) ^ 1u);
        mi4_mbar_wait(&sh.table_full[buf], (unsigned)((j >> 1) & 1));
        const int valid = sh.rows[buf];
        /* this thread's token rows of the tile, as pointers to its piece,
         * read once a tile (a table read and a 64-bit multiply before every
         * copy made the producer a serial chain that the consumers waited
         * for: ncu, 2026-12-04; the BF16 warp-specialized GEMM keeps row
         * pointers too); a step adds its constant offset */
        const int *table_rows = sh.table(buf).row;
        const uint16_t *row_src[T / 16];
#pragma unroll
        for (int i = 0; i < T / 16; i++)
            row_src[i] = p.a + (!TOKEN_TMA && first_row + 16 * i < valid
                                    ? (size_t)table_rows[first_row + 16 * i] * (size_t)p.inner
                                    : 0) +
                         piece * 8;
        const int expert = p.tile_expert[tile];
        const uint8_t *code_src[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int wr = q_weight_row<GATED>(p, out_tile, code_row + 32 * i);
            code_src[i] = wr < 0 ? nullptr
                                 : q.codes +
                                       mi4_int4_row_offset(q.inner_padded,
                                                           (size_t)expert * q.rows + wr) +
                                       16 * code_piece;
        }
        /* STAGED_SCALES: this thread's row of the block (its weight row,
         * or -1), whose scales it copies every 8 chunks */
        const int scale_row = STAGED_SCALES ? q_weight_row<GATED>(p, out_tile, ptid) : -1;
        for (int k = 0; k < steps; k++, step++) {
            const int stage = (int)qw_slot<T>(step);
            mi4_mbar_wait(&sh.empty[stage], qw_parity<T>(step) ^ 1u);
            if (STAGED_SCALES && k % QW_SCALE_CHUNKS == 0) {
                /* chunks k .. k + 7 (groups of one chunk, 8 | groups): the
                 * consumers have left this buffer 8 x (QW_SCALE_BUFS - 1)
                 * chunks ago, more than the ring holds; this stage's
                 * barrier covers the copies */
                char *buf = sh.scale_buffer(step);
                const size_t at =
                    ((size_t)expert * q.rows + (scale_row < 0 ? 0 : scale_row)) * q.groups + k;
                mi4_copy16(buf + ptid * QW_SCALE_ROW_BYTES, q.scales + at, scale_row >= 0);
                if (q.zeros != nullptr)
                    qw_copy8(buf + QW_ZEROS_AT + ptid * QW_ZERO_ROW_BYTES, q.zeros + at,
                             scale_row >= 0);
            }
            char *base = sh.stage(step);
            uint16_t *tokens = (uint16_t *)base;
            if (TOKEN_TMA) {
                /* rows past `valid` (or zeros past the intermediate) reach
                 * only dropped columns */
                if (ptid == 0) {
                    mi4_mbar_expect_bytes(&sh.full[stage], C::token_bytes);
#pragma unroll
                    for (int h = 0; h < C::halves; h++)
                        mi4_tma_load_box(tokens + h * (C::half_bytes / 2), token_map,
                                         k * C::k_inputs + h * QW_HALF, tile * T,
                                         &sh.full[stage]);
                }
            } else {
                /* rows past `valid` are not copied: only dropped columns read them */
#pragma unroll
                for (int h = 0; h < C::halves; h++) {
                    const int at_k = k * C::k_inputs + h * QW_HALF;
#pragma unroll
                    for (int i = 0; i < T / 16; i++)
                        if (first_row + 16 * i < valid)
                            mi4_copy16(tokens + h * (C::half_bytes / 2) + token_at + i * 16 * 64,
                                       row_src[i] + at_k, true);
                }
            }
            uint8_t *codes = (uint8_t *)(base + C::token_bytes);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                uint8_t *dst = codes + (code_row + 32 * i) * code_row_bytes;
                if constexpr (C::k_inputs == Q_CHUNK) /* chunk k, 16 bytes a piece */
                    mi4_copy16(dst + 16 * code_piece,
                               code_src[i] ? code_src[i] + (size_t)k * MI4_INT4_CHUNK_BYTES
                                           : q.codes,
                               code_src[i] != nullptr);
                else /* half k % 2 of chunk k / 2: bytes 8 (k % 2) .. + 7 of each 16 */
                    qw_copy8(dst + 8 * code_piece,
                             code_src[i] ? code_src[i] + (size_t)(k / 2) * MI4_INT4_CHUNK_BYTES +
                                               8 * (k % 2)
                                         : q.codes,
                             code_src[i] != nullptr);
            }
            /* the stage is full once every producer thread's copies have
             * landed: each thread's arrival is made as its copies land, so
             * the producer never waits for its own copies (a stage signalled
             * some steps later, after a wait for its copies, held the
             * consumers up: bench/results/hip-2026-12-06-s35.md) */
            mi4_mbar_arrive_on_copies(&sh.full[stage]);
        }
    }
    mi4_copy_commit(); /* none in flight once the producer returns */
    mi4_copy_wait<0>();
}

/* A tile's epilogue from the consumers' accumulators: acc[4 jj + i] is
 * weight row lo (i < 2) or hi, token 8 jj + 2 t + (i & 1). One instance an
 * activation (with_activation). */
template <int T, bool GATED, int ACTIVATION>
MI4_DEVICE void qw_store(const gemm_params &p, const float (&acc)[T / 2], const qw_table &tb,
                         int valid, int tile, int out_tile)
{
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4, row_lo = warp * 16 + g;
#pragma unroll
    for (int jj = 0; jj < T / 8; jj++) {
        if (8 * jj >= valid)
            break;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int n = 8 * jj + 2 * t + i;
            if (n >= valid)
                continue;
            if (GATED) {
                /* the intermediate in the permuted order gemm2 reads */
                const int at = out_tile * (Q_ROWS / 2) + warp * 8 + g;
                p.act[((size_t)tile * T + n) * (size_t)p.out_cols + at] =
                    mi4_dev_f32_to_bf16(activate(ACTIVATION, acc[4 * jj + i],
                                                 acc[4 * jj + 2 + i], p.limit, p.alpha, p.beta));
            } else {
                const float scale = tb.weight[n];
                float *y = p.y + (size_t)tb.slot[n] * (size_t)p.out_cols;
                const int out_lo = out_tile * Q_ROWS + row_lo, out_hi = out_lo + 8;
                if (out_lo < p.out_cols)
                    y[out_lo] = acc[4 * jj + i] * scale;
                if (out_hi < p.out_cols)
                    y[out_hi] = acc[4 * jj + 2 + i] * scale;
            }
        }
    }
}

template <int T, bool GATED, bool STAGED_SCALES>
MI4_DEVICE void qw_consume(const gemm_params &p, const mi4_hip_int4_matrix &q,
                           const qw_shared<T> &sh, int row_tiles, int out_tiles, int64_t my_tiles,
                           int steps)
{
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4, row_lo = warp * 16 + g;
    float acc[T / 2];
    /* tile j's weight rows: where their scales are */
    auto rows_of = [&](int64_t j) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int expert = p.tile_expert[tile];
        const int wr_lo = q_weight_row<GATED>(p, out_tile, row_lo);
        const int wr_hi = q_weight_row<GATED>(p, out_tile, row_lo + 8);
        qw_rows rows;
        rows.valid_lo = wr_lo >= 0;
        rows.valid_hi = wr_hi >= 0;
        rows.at_lo = ((size_t)expert * q.rows + (wr_lo < 0 ? 0 : wr_lo)) * q.groups;
        rows.at_hi = ((size_t)expert * q.rows + (wr_hi < 0 ? 0 : wr_hi)) * q.groups;
        return rows;
    };
    /* a tile's first scales are loaded before the epilogue of the tile
     * before it, so their latency (after the tile's expert number's) hides
     * behind that epilogue (STAGED_SCALES: the producer copies them) */
    qw_rows rows{};
    qw_scale_bits first_bits{};
    if (!STAGED_SCALES) {
        rows = rows_of(0);
        first_bits = qw_load_scales(q, rows, 0);
    }
    qw_step step = 0;
    for (int64_t j = 0; j < my_tiles; j++, step += steps) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int buf = (int)(j & 1);
        qw_codes<T, STAGED_SCALES> codes{q, sh, rows, first_bits, row_lo, t};
        mi4_mbar_wait(&sh.table_full[buf], (unsigned)((j >> 1) & 1));
        const int valid = sh.rows[buf];
        qw_tile_loop<T>(acc, codes, valid, steps, step);
        if (!STAGED_SCALES && j + 1 < my_tiles) {
            rows = rows_of(j + 1);
            first_bits = qw_load_scales(q, rows, 0);
        }

        const qw_table tb = sh.table(buf);
        if (!GATED)
            qw_store<T, false, MOEINT4_ACTIVATION_SILU>(p, acc, tb, valid, tile, out_tile);
        else
            with_activation(p.activation, [&](auto act) {
                qw_store<T, true, decltype(act)::kind>(p, acc, tb, valid, tile, out_tile);
            });
        __syncwarp();
        if (lane == 0)
            mi4_mbar_arrive(&sh.table_empty[buf]);
    }
}

#endif

template <int T, bool GATED, bool TOKEN_TMA, bool STAGED_SCALES>
__global__ void __launch_bounds__(QW_THREADS, qw_config<T>::blocks_per_sm)
    int4_ws_gemm(gemm_params p, mi4_hip_int4_matrix q, const __grid_constant__ CUtensorMap token_map)
{
#if defined(MI4_HAVE_WGMMA)
    typedef qw_config<T> C;
    extern __shared__ uint4 qw_smem_raw[];
    char *base = (char *)(((uintptr_t)qw_smem_raw + 1023) & ~(uintptr_t)1023);
    qw_shared<T> sh;
    sh.stages = base;
    sh.scales = base + C::scales_at;
    sh.tables = base + C::tables_at;
    sh.rows = (int *)(base + C::rows_at);
    sh.full = (uint64_t *)(base + C::bars_at);
    sh.empty = sh.full + C::stages;
    sh.table_full = sh.empty + C::stages;
    sh.table_empty = sh.table_full + 2;

    const int out_tiles = q_out_tiles(p.out_cols, GATED);
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int steps = q.inner_padded / C::k_inputs;
    if (threadIdx.x == 0) {
        for (int s = 0; s < C::stages; s++) {
            mi4_mbar_init(&sh.full[s], QW_PRODUCERS + (TOKEN_TMA ? 1 : 0));
            mi4_mbar_init(&sh.empty[s], QW_CONSUMERS / 32);
        }
        for (int b = 0; b < 2; b++) {
            mi4_mbar_init(&sh.table_full[b], 1);
            mi4_mbar_init(&sh.table_empty[b], QW_CONSUMERS / 32);
        }
        mi4_mbar_init_fence();
    }
    __syncthreads();
    if ((int)threadIdx.x >= QW_CONSUMERS) {
        mi4_regs_lower<C::producer_regs>();
        qw_produce<T, GATED, TOKEN_TMA, STAGED_SCALES>(p, q, sh, &token_map, row_tiles,
                                                       out_tiles, my_tiles, steps);
        return;
    }
    mi4_regs_raise<C::consumer_regs>();
    qw_consume<T, GATED, STAGED_SCALES>(p, q, sh, row_tiles, out_tiles, my_tiles, steps);
#else
    (void)p;
    (void)q;
    (void)token_map;
    __trap(); /* launched only in sm_90a builds */
#endif
}

#endif

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
/* Whether the producer stages the scales (STAGED_SCALES, qw32:
 * qw_config::can_stage_scales): groups of one chunk (a stage each, so that
 * every tile's steps start a buffer), 8 to a 16-byte copy of a row's scales
 * (8 bytes of its zero points). Else each consumer thread loads its rows'
 * scales from global memory a chunk ahead. */
template <int T> bool qw_stages_scales(const mi4_hip_int4_matrix &q)
{
    return qw_config<T>::can_stage_scales && q.group_size == Q_CHUNK &&
           q.groups * Q_CHUNK == q.inner_padded && q.groups % QW_SCALE_CHUNKS == 0 &&
           (uintptr_t)q.scales % 16 == 0 &&
           (q.zeros == nullptr || (uintptr_t)q.zeros % 8 == 0);
}

/* int4_ws_gemm's instance and its shared bytes. */
template <int T, bool GATED, bool TOKEN_TMA, bool STAGED_SCALES> struct qw_instance {
    static constexpr auto kernel = int4_ws_gemm<T, GATED, TOKEN_TMA, STAGED_SCALES>;
    static constexpr int smem =
        STAGED_SCALES ? qw_config<T>::smem_staged : qw_config<T>::smem;
    static hipError_t init()
    {
        return hipFuncSetAttribute((const void *)kernel,
                                   hipFuncAttributeMaxDynamicSharedMemorySize, smem);
    }
};

/* The shared bytes of the instances launch_qw_kernel may take. */
template <int T, bool GATED, bool TOKEN_TMA> hipError_t init_qw_kernels()
{
    hipError_t e = qw_instance<T, GATED, TOKEN_TMA, false>::init();
    if constexpr (qw_config<T>::can_stage_scales)
        if (e == hipSuccess)
            e = qw_instance<T, GATED, TOKEN_TMA, true>::init();
    return e;
}

template <int T, bool GATED, bool TOKEN_TMA>
hipError_t launch_qw_kernel(bool staged, unsigned blocks, hipStream_t stream,
                            const gemm_params &p, const mi4_hip_int4_matrix &q,
                            const CUtensorMap &token_map)
{
    typedef qw_instance<T, GATED, TOKEN_TMA, false> plain;
    if constexpr (qw_config<T>::can_stage_scales) {
        typedef qw_instance<T, GATED, TOKEN_TMA, true> staged_scales;
        if (staged)
            return mi4_launch(staged_scales::kernel, dim3(blocks), dim3(QW_THREADS),
                              staged_scales::smem, stream, p, q, token_map);
    }
    (void)staged;
    return mi4_launch(plain::kernel, dim3(blocks), dim3(QW_THREADS), plain::smem, stream, p, q,
                      token_map);
}
#endif

template <int T, bool GATED> hipError_t launch_qw(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    if (init) { /* `a` holds nothing else then */
        const hipError_t e = init_qw_kernels<T, GATED, false>();
        return e == hipSuccess && !GATED ? init_qw_kernels<T, false, true>() : e;
    }
    gemm_params p = make_params(a, GATED);
    p.b = nullptr; /* the weights are q */
    const mi4_hip_int4_matrix q = GATED ? a->weights->q13 : a->weights->q2;
    typedef qw_config<T> C;
    const size_t tiles = (size_t)a->routing->max_tiles * (size_t)q_out_tiles(p.out_cols, GATED);
    const size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    const size_t resident = sms * (size_t)C::blocks_per_sm; /* persistent */
    size_t blocks = tiles < resident ? tiles : resident;
    /* MOEINT4_HIP_Q256_BLOCKS=N caps the grid (tests: many tiles a block
     * on small layers, through every ring phase and both tile tables) */
    const char *cap = getenv("MOEINT4_HIP_Q256_BLOCKS");
    if (cap != nullptr && atoi(cap) > 0 && (size_t)atoi(cap) < blocks)
        blocks = (size_t)atoi(cap);
    if (blocks == 0)
        return hipSuccess;
    const bool staged = qw_stages_scales<T>(q);
    /* gemm2's token rows (the intermediate, max_tiles x T rows) by TMA */
    CUtensorMap token_map;
    memset(&token_map, 0, sizeof token_map);
    const bool token_tma = !GATED && mi4_tma_wanted() &&
                           mi4_tma_map_bf16(&token_map, p.a, (uint64_t)p.inner,
                                            (uint64_t)a->routing->max_tiles * T, QW_HALF, T);
    if (token_tma)
        return launch_qw_kernel<T, false, true>(staged, (unsigned)blocks, a->stream, p, q,
                                                token_map);
    return launch_qw_kernel<T, GATED, false>(staged, (unsigned)blocks, a->stream, p, q,
                                             token_map);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never launched: mi4_hip_int4_wgmma_serves is 0 */
#endif
}

} // namespace

hipError_t mi4_hip_launch_int4_ws(int tile_rows, bool gated, const mi4_hip_gemm_args *a, bool init)
{
    if (tile_rows == 32) /* gemm13 6% faster than q32's at Mixtral M = 64 (hip-2026-12-05-s25.md) */
        return gated ? launch_qw<32, true>(a, init) : launch_qw<32, false>(a, init);
    if (tile_rows == 64)
        return gated ? launch_qw<64, true>(a, init) : launch_qw<64, false>(a, init);
    if (tile_rows == 128)
        return gated ? launch_qw<128, true>(a, init) : launch_qw<128, false>(a, init);
    return gated ? launch_qw<256, true>(a, init) : launch_qw<256, false>(a, init);
}
