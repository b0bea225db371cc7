/* The int4 grouped GEMM for many rows an expert (MI4_TILE_Q256, sm_90a;
 * other builds keep a stub): persistent, warp-specialized, the weights
 * dequantized into registers, no BF16 copy of them anywhere.
 *
 * A block computes 128 weight rows x up to 256 token rows of one expert,
 * transposed as the q tiles (hip_int4_grouped_gemm.hip) are: wgmma
 * m64nNk16 with the weights as the register-sourced A operand and the
 * tile's token rows as B from 128B-swizzled shared memory. Unlike the q
 * tiles, whose 8 warps all copy, dequantize and issue and meet at a barrier
 * every chunk (ncu: under half an instruction a cycle a scheduler, 2026-12-03),
 * a producer warpgroup only copies (token rows and codes of a 128-input
 * chunk a stage, cp.async) and two consumer warpgroups only dequantize
 * their 64 rows' codes one k step ahead of the wgmma that reads them. N is
 * the tile's valid rows rounded up to 64, so an expert's last, partly
 * filled tile costs what it holds. The producer hands each tile's slot
 * table and valid rows to the consumers through a two-entry ring.
 * Numerics: the q tiles' rounded mode (weights rounded once to BF16, the
 * BF16 mode's bits; one f32 accumulator). */
#include "backends/hip/hip_int4_wgmma_ops.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
constexpr int QW_TOKENS = 256; /* token rows of a routed tile */
constexpr int QW_STAGES = 3;   /* 72 KB each */
constexpr int QW_CONSUMERS = 256, QW_PRODUCERS = 128, QW_THREADS = QW_CONSUMERS + QW_PRODUCERS;
/* setmaxnreg: 128 x 72 + 256 x 216 fits the launch's 384 x 168 (the
 * consumers' raise waits for what the producer gives back) */
constexpr int QW_PRODUCER_REGS = 72, QW_CONSUMER_REGS = 216;
/* a stage is signalled once the copies of the step after it are issued */
constexpr int QW_LAG = 1;
constexpr int QW_TOKEN_BYTES = QW_TOKENS * Q_CHUNK * 2;
constexpr int QW_STAGE_BYTES = QW_TOKEN_BYTES + Q_CODE_BYTES;
/* stages, then two slot tables, their valid rows and the barriers */
constexpr int QW_TABLES_AT = QW_STAGES * QW_STAGE_BYTES;
constexpr int QW_ROWS_AT = QW_TABLES_AT + 2 * QW_TOKENS * 4;
constexpr int QW_BARS_AT = QW_ROWS_AT + 16;
constexpr int QW_SMEM = QW_BARS_AT + (2 * QW_STAGES + 4) * 8 + 1024; /* + alignment */
static_assert(QW_SMEM <= 227 * 1024, "a block's shared memory");

struct qw_shared {
    char *stages;
    int *slots;       /* [2][QW_TOKENS] */
    int *rows;        /* [2]: valid token rows */
    uint64_t *full, *empty;           /* [QW_STAGES] */
    uint64_t *table_full, *table_empty; /* [2] */
};

#if defined(MI4_HAVE_WGMMA)

MI4_DEVICE int warp_sum_int(int v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

template <bool GATED>
MI4_DEVICE void qw_produce(const gemm_params &p, const mi4_hip_int4_matrix &q,
                           const qw_shared &sh, int row_tiles, int out_tiles, int64_t my_tiles,
                           int chunks)
{
    const int ptid = (int)threadIdx.x - QW_CONSUMERS, lane = ptid % 32;
    /* token copies: 16-byte piece `piece` of rows first_row + 8 i (a warp
     * copies two whole 256-byte rows a copy; rows 8 apart share the swizzle) */
    const int piece = ptid % 16, first_row = ptid / 16;
    const int token_at =
        piece / 8 * QW_TOKENS * 64 + first_row * 64 + (((piece % 8) ^ (first_row & 7)) * 8);
    /* code copies: 16 bytes `code_piece` of block rows code_row + 32 i */
    const int code_piece = ptid % 4, code_row = ptid / 4;
    auto signal = [&](int64_t s) { /* this warp's copies of step s landed */
        mi4_fence_proxy_async();
        __syncwarp();
        if (lane == 0)
            mi4_mbar_arrive(&sh.full[s % QW_STAGES]);
    };
    int64_t step = 0;
    for (int64_t j = 0; j < my_tiles; j++) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int buf = (int)(j & 1);
        int *slots = sh.slots + buf * QW_TOKENS;
        if (ptid < 32) { /* warp 0 fills the table once the consumers are done with it */
            mi4_mbar_wait(&sh.table_empty[buf], (unsigned)((j >> 1) & 1) ^ 1u);
            int valid = 0;
#pragma unroll
            for (int i = 0; i < QW_TOKENS / 32; i++) {
                const int slot = p.sorted_slot[(size_t)tile * QW_TOKENS + lane + 32 * i];
                slots[lane + 32 * i] = slot;
                valid += slot >= 0;
            }
            valid = warp_sum_int(valid);
            if (lane == 0) {
                sh.rows[buf] = valid;
                mi4_mbar_arrive(&sh.table_full[buf]);
            }
        }
        mi4_mbar_wait(&sh.table_full[buf], (unsigned)((j >> 1) & 1));
        const int valid = sh.rows[buf]; /* padding only ends a tile */
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
        for (int c = 0; c < chunks; c++, step++) {
            const int stage = (int)(step % QW_STAGES);
            mi4_mbar_wait(&sh.empty[stage], (unsigned)((step / QW_STAGES) & 1) ^ 1u);
            char *base = sh.stages + stage * QW_STAGE_BYTES;
            uint16_t *tokens = (uint16_t *)base;
            /* rows past `valid` are not copied: only dropped columns read them */
#pragma unroll 4
            for (int i = 0; i < QW_TOKENS / 8; i++) {
                const int r = first_row + 8 * i;
                if (r >= valid)
                    break;
                const int slot = slots[r];
                const size_t row = GATED ? (size_t)(p.a_by_slot ? slot : slot / p.topk)
                                         : (size_t)tile * QW_TOKENS + r;
                mi4_copy16(tokens + token_at + i * 8 * 64,
                           p.a + row * (size_t)p.inner + c * Q_CHUNK + piece * 8, true);
            }
            uint8_t *codes = (uint8_t *)(base + QW_TOKEN_BYTES);
#pragma unroll
            for (int i = 0; i < 4; i++)
                mi4_copy16(codes + (code_row + 32 * i) * 64 + 16 * code_piece,
                           code_src[i] ? code_src[i] + (size_t)c * MI4_INT4_CHUNK_BYTES : q.codes,
                           code_src[i] != nullptr);
            mi4_copy_commit();
            if (step >= QW_LAG) {
                mi4_copy_wait<QW_LAG>();
                signal(step - QW_LAG);
            }
        }
    }
    mi4_copy_wait<0>();
    for (int64_t s = step > QW_LAG ? step - QW_LAG : 0; s < step; s++)
        signal(s);
}

/* A consumer thread's weight rows (block rows lo = 16 warp + g, hi = lo + 8)
 * of one tile: where their scales and zero points are. */
struct qw_rows {
    size_t at_lo, at_hi; /* [row][group] entries; valid_* false: no row */
    bool valid_lo, valid_hi;
};

/* The chunk's codes, scales and zero points of this thread's two rows. */
struct qw_chunk {
    uint4 lo, hi;
    float scale_lo, scale_hi;
    uint32_t bias_lo, bias_hi;
};

struct qw_scale_bits {
    uint16_t lo, hi;
    uint8_t zero_lo, zero_hi;
};

MI4_DEVICE qw_scale_bits qw_load_scales(const mi4_hip_int4_matrix &q, const qw_rows &r, int c)
{
    const int group = c * Q_CHUNK / q.group_size;
    qw_scale_bits b;
    b.lo = r.valid_lo ? q.scales[r.at_lo + group] : 0;
    b.hi = r.valid_hi ? q.scales[r.at_hi + group] : 0;
    b.zero_lo = r.valid_lo && q.zeros ? q.zeros[r.at_lo + group] : 8;
    b.zero_hi = r.valid_hi && q.zeros ? q.zeros[r.at_hi + group] : 8;
    return b;
}

/* One tile's k loop over `chunks` stages from `step`, N = WIDTH token rows:
 * k step s's wgmma is issued, then (once step s - 1's has completed) step
 * s + 1's A fragment is dequantized, so a warpgroup keeps one wgmma in
 * flight while it dequantizes and the other warpgroup's fill the gaps. */
template <int WIDTH>
MI4_DEVICE void qw_mainloop(float (&acc)[QW_TOKENS / 2], const mi4_hip_int4_matrix &q,
                            const qw_shared &sh, const qw_rows &rows, int chunks, int64_t step)
{
    float(&d)[WIDTH / 2] = *reinterpret_cast<float(*)[WIDTH / 2]>(&acc);
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int row_lo = warp * 16 + lane / 4, t = lane % 4;
    qw_chunk ch;
    qw_scale_bits bits = qw_load_scales(q, rows, 0);
    auto take = [&](int c, int64_t at_step) { /* chunk c's stage has landed */
        const int stage = (int)(at_step % QW_STAGES);
        mi4_mbar_wait(&sh.full[stage], (unsigned)((at_step / QW_STAGES) & 1));
        const uint8_t *codes = (const uint8_t *)(sh.stages + stage * QW_STAGE_BYTES + QW_TOKEN_BYTES);
        ch.lo = *(const uint4 *)(codes + row_lo * 64 + 16 * t);
        ch.hi = *(const uint4 *)(codes + (row_lo + 8) * 64 + 16 * t);
        ch.scale_lo = int4_scale_of(q, bits.lo);
        ch.scale_hi = int4_scale_of(q, bits.hi);
        ch.bias_lo = int4_bias_pair(bits.zero_lo);
        ch.bias_hi = int4_bias_pair(bits.zero_hi);
        if (c + 1 < chunks)
            bits = qw_load_scales(q, rows, c + 1); /* used a chunk later */
    };
    uint32_t frag[2][4];
    take(0, step);
    q_fragment<true>(frag[0], ch.lo, ch.hi, 0, ch.bias_lo, ch.bias_hi, ch.scale_lo, ch.scale_hi);
    for (int c = 0; c < chunks; c++, step++) {
        const int stage = (int)(step % QW_STAGES);
        const uint16_t *tokens = (const uint16_t *)(sh.stages + stage * QW_STAGE_BYTES);
        const uint64_t desc0 = mi4_wgmma_desc(tokens),
                       desc1 = mi4_wgmma_desc(tokens + QW_TOKENS * 64);
#pragma unroll
        for (int s = 0; s < 8; s++) {
            mi4_wgmma_fence();
            wgmma_rs(d, frag[s % 2], (s < 4 ? desc0 : desc1) + 2 * (s % 4), c > 0 || s > 0);
            mi4_wgmma_commit();
            if (s == 7) {
                if (c + 1 == chunks)
                    break;
                take(c + 1, step + 1);
            }
            mi4_wgmma_wait_one(); /* step s - 1's wgmma is done: its fragment is free */
            q_keep(frag);
            if (s == 0 && c > 0 && lane == 0) /* and with it chunk c - 1's stage */
                mi4_mbar_arrive(&sh.empty[(step - 1) % QW_STAGES]);
            q_fragment<true>(frag[(s + 1) % 2], ch.lo, ch.hi, (s + 1) % 8, ch.bias_lo,
                             ch.bias_hi, ch.scale_lo, ch.scale_hi);
        }
    }
    mi4_wgmma_wait_all();
    q_keep(frag);
    if (lane == 0)
        mi4_mbar_arrive(&sh.empty[(step - 1) % QW_STAGES]);
    mi4_fence_registers(acc);
}

template <bool GATED>
MI4_DEVICE void qw_consume(const gemm_params &p, const mi4_hip_int4_matrix &q,
                           const qw_shared &sh, int row_tiles, int out_tiles, int64_t my_tiles,
                           int chunks)
{
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4, row_lo = warp * 16 + g;
    float acc[QW_TOKENS / 2];
    int64_t step = 0;
    for (int64_t j = 0; j < my_tiles; j++, step += chunks) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int buf = (int)(j & 1);
        const int expert = p.tile_expert[tile];
        qw_rows rows;
        const int wr_lo = q_weight_row<GATED>(p, out_tile, row_lo);
        const int wr_hi = q_weight_row<GATED>(p, out_tile, row_lo + 8);
        rows.valid_lo = wr_lo >= 0;
        rows.valid_hi = wr_hi >= 0;
        rows.at_lo = ((size_t)expert * q.rows + (wr_lo < 0 ? 0 : wr_lo)) * q.groups;
        rows.at_hi = ((size_t)expert * q.rows + (wr_hi < 0 ? 0 : wr_hi)) * q.groups;
        mi4_mbar_wait(&sh.table_full[buf], (unsigned)((j >> 1) & 1));
        const int valid = sh.rows[buf];
        if (valid <= 64)
            qw_mainloop<64>(acc, q, sh, rows, chunks, step);
        else if (valid <= 128)
            qw_mainloop<128>(acc, q, sh, rows, chunks, step);
        else if (valid <= 192)
            qw_mainloop<192>(acc, q, sh, rows, chunks, step);
        else
            qw_mainloop<256>(acc, q, sh, rows, chunks, step);

        /* acc[4 jj + i]: weight row lo (i < 2) or hi, token 8 jj + 2 t + (i & 1) */
        const int *slots = sh.slots + buf * QW_TOKENS;
#pragma unroll
        for (int jj = 0; jj < QW_TOKENS / 8; jj++) {
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
                    p.act[((size_t)tile * QW_TOKENS + n) * (size_t)p.out_cols + at] =
                        mi4_dev_f32_to_bf16(activate(p.activation, acc[4 * jj + i],
                                                     acc[4 * jj + 2 + i], p.limit, p.alpha,
                                                     p.beta));
                } else {
                    const int slot = slots[n];
                    const float scale = p.weight_on_output ? p.topk_weights[slot] : 1.0f;
                    float *y = p.y + (size_t)slot * (size_t)p.out_cols;
                    const int out_lo = out_tile * Q_ROWS + row_lo, out_hi = out_lo + 8;
                    if (out_lo < p.out_cols)
                        y[out_lo] = acc[4 * jj + i] * scale;
                    if (out_hi < p.out_cols)
                        y[out_hi] = acc[4 * jj + 2 + i] * scale;
                }
            }
        }
        __syncwarp();
        if (lane == 0)
            mi4_mbar_arrive(&sh.table_empty[buf]);
    }
}

#endif

template <bool GATED>
__global__ void __launch_bounds__(QW_THREADS, 1)
    int4_ws_gemm(gemm_params p, mi4_hip_int4_matrix q)
{
#if defined(MI4_HAVE_WGMMA)
    extern __shared__ uint4 qw_smem_raw[];
    char *base = (char *)(((uintptr_t)qw_smem_raw + 1023) & ~(uintptr_t)1023);
    qw_shared sh;
    sh.stages = base;
    sh.slots = (int *)(base + QW_TABLES_AT);
    sh.rows = (int *)(base + QW_ROWS_AT);
    sh.full = (uint64_t *)(base + QW_BARS_AT);
    sh.empty = sh.full + QW_STAGES;
    sh.table_full = sh.empty + QW_STAGES;
    sh.table_empty = sh.table_full + 2;

    const int out_tiles = q_out_tiles(p.out_cols, GATED);
    const int row_tiles = p.status[2];
    const int64_t tiles = (int64_t)row_tiles * out_tiles;
    if ((int64_t)blockIdx.x >= tiles)
        return;
    const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;
    const int chunks = q.inner_padded / Q_CHUNK;
    if (threadIdx.x == 0) {
        for (int s = 0; s < QW_STAGES; s++) {
            mi4_mbar_init(&sh.full[s], QW_PRODUCERS / 32);
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
        mi4_regs_lower<QW_PRODUCER_REGS>();
        qw_produce<GATED>(p, q, sh, row_tiles, out_tiles, my_tiles, chunks);
        return;
    }
    mi4_regs_raise<QW_CONSUMER_REGS>();
    qw_consume<GATED>(p, q, sh, row_tiles, out_tiles, my_tiles, chunks);
#else
    (void)p;
    (void)q;
    __trap(); /* launched only in sm_90a builds */
#endif
}

#endif

template <bool GATED> hipError_t launch_qw(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    if (init)
        return hipFuncSetAttribute((const void *)int4_ws_gemm<GATED>,
                                   hipFuncAttributeMaxDynamicSharedMemorySize, QW_SMEM);
    gemm_params p = make_params(a, GATED);
    p.b = nullptr; /* the weights are q */
    const mi4_hip_int4_matrix q = GATED ? a->weights->q13 : a->weights->q2;
    const size_t tiles = (size_t)a->routing->max_tiles * (size_t)q_out_tiles(p.out_cols, GATED);
    const size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    const size_t blocks = tiles < sms ? tiles : sms; /* persistent: one block an SM */
    if (blocks == 0)
        return hipSuccess;
    return mi4_launch(int4_ws_gemm<GATED>, dim3((unsigned)blocks), dim3(QW_THREADS), QW_SMEM,
                      a->stream, p, q);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never launched: mi4_hip_int4_wgmma_serves is 0 */
#endif
}

} // namespace

hipError_t mi4_hip_launch_int4_ws(bool gated, const mi4_hip_gemm_args *a, bool init)
{
    return gated ? launch_qw<true>(a, init) : launch_qw<false>(a, init);
}
