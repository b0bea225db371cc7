/* The warp-specialized int4 grouped GEMMs for 41 rows an expert and more
 * (sm_90a; other builds keep a stub): persistent, the weights dequantized
 * into registers, no BF16 copy of them anywhere. One kernel, three tile
 * heights: qw64 (MI4_TILE_QW64, 41-95 rows an expert), qw128 (96-128) and
 * q256 (129-511; hip_tiles.hip).
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
 * tile's valid rows rounded up (q256: to 64; qw64, qw128: to 16), so an
 * expert's last, partly filled tile costs what it holds. The producer hands
 * each tile's table (slots, input rows, router weights) and valid rows to
 * the consumers through a two-entry ring. Numerics (qw_config): q256 has
 * the q tiles' rounded mode (weights rounded once to BF16, the BF16 mode's
 * bits; one f32 accumulator), qw64 and qw128 their exact mode (each
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

#include "backends/hip/hip_int4_wgmma_ops.h"
#include "backends/hip/hip_tma.h"

namespace {

using namespace mi4_gemm;

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
constexpr int QW_K = 64; /* inputs a stage: half a 128-input chunk */
#ifndef MI4_QW_STAGES
#define MI4_QW_STAGES 6
#endif
#ifndef MI4_QW_LAG
#define MI4_QW_LAG 3
#endif
constexpr int QW_CONSUMERS = 256, QW_PRODUCERS = 128, QW_THREADS = QW_CONSUMERS + QW_PRODUCERS;
/* setmaxnreg: producer x 128 + consumer x 256 fits the launch's 384 x 168
 * (the consumers' raise waits for what the producer gives back); the
 * producer keeps its token rows (16 at most) in registers */
constexpr int QW_PRODUCER_REGS = 104, QW_CONSUMER_REGS = 200;
static_assert(QW_PRODUCER_REGS * QW_PRODUCERS + QW_CONSUMER_REGS * QW_CONSUMERS <= 168 * QW_THREADS,
              "setmaxnreg within the launch's registers");
constexpr int QW_CODE_BYTES = Q_ROWS * QW_K / 2;

/* A tile of T token rows: q256 (T = 256, 36 KB stages) rounds the weights
 * to BF16 once (the BF16 mode's bits); qw64 and qw128 (12 and 20 KB
 * stages) keep each chunk's product exact in its own accumulators and
 * scale it in f32, as the narrow q tiles do (a few instructions a weight
 * less: where the wgmmas are narrow the dequantization is the whole cost),
 * with deeper rings: at 16 rows an expert q256 waited for its stages. */
template <int T> struct qw_config {
    static constexpr bool exact = T <= 128;
    static constexpr int stages = T == 256 ? MI4_QW_STAGES : T == 128 ? 10 : 16;
    /* a stage is signalled once the copies of the `lag` steps after it are
     * issued: lag + 1 stages of copies in flight a producer thread */
    static constexpr int lag = T == 256 ? MI4_QW_LAG : T == 128 ? 7 : 10;
    static constexpr int token_bytes = T * QW_K * 2;
    static constexpr int stage_bytes = token_bytes + QW_CODE_BYTES;
    /* stages, then two tile tables (slot, input row, router weight a token
     * row), their valid rows and the barriers */
    static constexpr int tables_at = stages * stage_bytes;
    static constexpr int table_bytes = T * 12;
    static constexpr int rows_at = tables_at + 2 * table_bytes;
    static constexpr int bars_at = rows_at + 16;
    static constexpr int smem = bars_at + (2 * stages + 4) * 8 + 1024; /* + alignment */
    /* the consumers release a stage once the next has landed, which the
     * producer signals `lag` steps later: more would wait for a stage not
     * yet released */
    static_assert(lag + 2 <= stages, "the producer must not wait for its own signal");
    static_assert(smem <= 227 * 1024, "a block's shared memory");
};

/* A block's ring steps (its tiles x steps a tile: far below 2^32); 32 bits,
 * as % stages on 64 bits cost a chain of wide multiplies a step. */
using qw_step = uint32_t;
/* The ring slot of step s and the parity of its fill (of its release: ^ 1). */
template <int T> MI4_DEVICE unsigned qw_slot(qw_step s) { return s % qw_config<T>::stages; }
template <int T> MI4_DEVICE unsigned qw_parity(qw_step s)
{
    return (s / qw_config<T>::stages) & 1u;
}

/* A tile's token rows as the producer's warp 0 reads them once. */
struct qw_table {
    int *slot;     /* -1 past the valid rows */
    int *row;      /* row of p.a the token row's inputs are */
    float *weight; /* router weight on the output (gemm2), else 1 */
};

template <int T> struct qw_shared {
    char *stages;
    char *tables;                       /* [2] */
    int *rows;                          /* [2]: valid token rows */
    uint64_t *full, *empty;             /* [stages] */
    uint64_t *table_full, *table_empty; /* [2] */
    MI4_DEVICE qw_table table(int buf) const
    {
        int *at = (int *)(tables + buf * qw_config<T>::table_bytes);
        return { at, at + T, (float *)(at + 2 * T) };
    }
    MI4_DEVICE char *stage(qw_step s) const
    {
        return stages + qw_slot<T>(s) * qw_config<T>::stage_bytes;
    }
};

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
template <int T, bool GATED, bool TOKEN_TMA>
MI4_DEVICE void qw_produce(const gemm_params &p, const mi4_hip_int4_matrix &q,
                           const qw_shared<T> &sh, const CUtensorMap *token_map, int row_tiles,
                           int out_tiles, int64_t my_tiles, int steps)
{
    typedef qw_config<T> C;
    const int ptid = (int)threadIdx.x - QW_CONSUMERS, lane = ptid % 32;
    /* token copies: 16-byte piece `piece` of rows first_row + 16 i (a warp
     * copies four whole 128-byte rows a copy; rows 8 apart share the swizzle) */
    const int piece = ptid % 8, first_row = ptid / 8;
    const int token_at = first_row * 64 + ((piece ^ (first_row & 7)) * 8);
    /* code copies: 8 bytes `code_piece` of block rows code_row + 32 i */
    const int code_piece = ptid % 4, code_row = ptid / 4;
    auto signal = [&](qw_step s) { /* this warp's copies of step s landed */
        mi4_fence_proxy_async();
        __syncwarp();
        if (lane == 0)
            mi4_mbar_arrive(&sh.full[qw_slot<T>(s)]);
    };
    qw_step step = 0, signaled = 0; /* steps issued, steps signalled */
    auto signal_all = [&]() { /* every step issued so far */
        mi4_copy_wait<0>();
        while (signaled < step)
            signal(signaled++);
    };
    for (int64_t j = 0; j < my_tiles; j++) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int buf = (int)(j & 1);
        if (ptid < 32)
            qw_fill_table<T, GATED>(p, sh, tile, buf, (unsigned)((j >> 1) & 1) ^ 1u);
        mi4_mbar_wait(&sh.table_full[buf], (unsigned)((j >> 1) & 1));
        const int valid = sh.rows[buf];
        /* this thread's token rows of the tile, read once (a table read and
         * a 64-bit multiply before every copy made the producer a serial
         * chain that the consumers waited for: ncu, 2026-12-04) */
        const int *table_rows = sh.table(buf).row;
        unsigned row_of[T / 16];
#pragma unroll
        for (int i = 0; i < T / 16; i++)
            row_of[i] = !TOKEN_TMA && first_row + 16 * i < valid
                            ? (unsigned)table_rows[first_row + 16 * i]
                            : 0u;
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
        for (int k = 0; k < steps; k++, step++) {
            const int stage = (int)qw_slot<T>(step);
            mi4_mbar_wait(&sh.empty[stage], qw_parity<T>(step) ^ 1u);
            char *base = sh.stage(step);
            uint16_t *tokens = (uint16_t *)base;
            if (TOKEN_TMA) {
                /* rows past `valid` (or zeros past the intermediate) reach
                 * only dropped columns */
                if (ptid == 0) {
                    mi4_mbar_expect_bytes(&sh.full[stage], C::token_bytes);
                    mi4_tma_load_box(tokens, token_map, k * QW_K, tile * T, &sh.full[stage]);
                }
            } else {
                const uint16_t *a_k = p.a + k * QW_K + piece * 8;
                /* rows past `valid` are not copied: only dropped columns read them */
#pragma unroll
                for (int i = 0; i < T / 16; i++)
                    if (first_row + 16 * i < valid)
                        mi4_copy16(tokens + token_at + i * 16 * 64,
                                   a_k + (size_t)row_of[i] * (unsigned)p.inner, true);
            }
            /* half k % 2 of chunk k / 2: bytes 8 (k % 2) .. + 7 of each 16 */
            uint8_t *codes = (uint8_t *)(base + C::token_bytes);
            const size_t code_at = (size_t)(k / 2) * MI4_INT4_CHUNK_BYTES + 8 * (k % 2);
#pragma unroll
            for (int i = 0; i < 4; i++)
                qw_copy8(codes + (code_row + 32 * i) * 32 + 8 * code_piece,
                         code_src[i] ? code_src[i] + code_at : q.codes, code_src[i] != nullptr);
            mi4_copy_commit();
            if (step - signaled >= C::lag) {
                mi4_copy_wait<C::lag>();
                signal(signaled++);
            }
        }
        /* a tile of fewer stages than the lag: its steps are signalled now,
         * else the next table would wait for consumers that wait for them */
        if (steps <= C::lag)
            signal_all();
    }
    signal_all();
}

/* A consumer thread's weight rows (block rows lo = 16 warp + g, hi = lo + 8)
 * of one tile: where their scales and zero points are. */
struct qw_rows {
    size_t at_lo, at_hi; /* [row][group] entries; valid_* false: no row */
    bool valid_lo, valid_hi;
};

struct qw_scale_bits {
    uint16_t lo, hi;
    uint8_t zero_lo, zero_hi;
};

/* 8 bytes of shared memory by a shared-space load (a generic one waits on
 * the long scoreboard). */
MI4_DEVICE uint2 qw_load_shared8(const char *at)
{
    uint2 v;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n"
                 : "=r"(v.x), "=r"(v.y)
                 : "r"((unsigned)__cvta_generic_to_shared(at)));
    return v;
}

/* Scales and zero points of the chunk that stage step k of a tile reads. */
MI4_DEVICE qw_scale_bits qw_load_scales(const mi4_hip_int4_matrix &q, const qw_rows &r, int k)
{
    /* groups of one chunk or per channel (mi4_hip_int4_wgmma_serves): no
     * division a chunk */
    const int group = q.group_size == Q_CHUNK ? k / 2 : k / 2 * Q_CHUNK / q.group_size;
    qw_scale_bits b;
    b.lo = r.valid_lo ? q.scales[r.at_lo + group] : 0;
    b.hi = r.valid_hi ? q.scales[r.at_hi + group] : 0;
    b.zero_lo = r.valid_lo && q.zeros ? q.zeros[r.at_lo + group] : 8;
    b.zero_hi = r.valid_hi && q.zeros ? q.zeros[r.at_hi + group] : 8;
    return b;
}

/* A consumer thread's view of the ring's codes: the 16 bytes of rows lo and
 * hi of the stage taken last, and the scales of its chunk (exact: and of
 * the chunk before it, which the tile's accumulators still take). */
template <int T> struct qw_codes {
    const mi4_hip_int4_matrix &q;
    const qw_shared<T> &sh;
    const qw_rows &rows;
    qw_scale_bits bits; /* the chunk after the current one's */
    int row_lo, t;
    uint2 lo, hi;
    float scale_lo = 0.0f, scale_hi = 0.0f;
    float before_lo = 0.0f, before_hi = 0.0f;
    uint32_t bias_lo = 0, bias_hi = 0;

    /* stage step k (of a tile of `steps`, at ring step at) has landed: its
     * codes (and, a new chunk, its scales) */
    MI4_DEVICE void take(int k, qw_step at, int steps)
    {
        const int stage = (int)qw_slot<T>(at);
        mi4_mbar_wait(&sh.full[stage], qw_parity<T>(at));
        const char *codes =
            sh.stages + stage * qw_config<T>::stage_bytes + qw_config<T>::token_bytes;
        lo = qw_load_shared8(codes + row_lo * 32 + 8 * t);
        hi = qw_load_shared8(codes + (row_lo + 8) * 32 + 8 * t);
        if (k % 2 == 0) {
            if (qw_config<T>::exact) {
                before_lo = scale_lo;
                before_hi = scale_hi;
            }
            scale_lo = int4_scale_of(q, bits.lo);
            scale_hi = int4_scale_of(q, bits.hi);
            bias_lo = int4_bias_pair(bits.zero_lo);
            bias_hi = int4_bias_pair(bits.zero_hi);
            if (k + 2 < steps)
                bits = qw_load_scales(q, rows, k + 2); /* used a chunk later */
        }
    }
    /* k step s (0..3) of the taken stage: words 0, 0, 1, 1, nibbles 8 (s % 2) */
    MI4_DEVICE void fragment(uint32_t (&f)[4], int s) const
    {
        q_fragment_of_words<!qw_config<T>::exact>(f, s < 2 ? lo.x : lo.y, s < 2 ? hi.x : hi.y,
                                                  s % 2, bias_lo, bias_hi, scale_lo, scale_hi);
    }
};

/* One tile's k loop over `steps` stages from `step`, N = WIDTH token rows,
 * the weights rounded (q256). Two wgmma k steps stay queued while the next
 * is dequantized: with k step g in flight, g + 1 is issued, g + 2's A
 * fragment is dequantized into the set g - 2 read, then g is waited for (5%
 * faster than one queued wgmma: bench/results/hip-2026-12-04-queued.md). The
 * chain of wgmmas on the accumulators never drains inside a tile: with 4
 * wgmmas a stage and a wait for all of them before the next (2026-12-04,
 * call 2) a stage took 3.4x the matrix cores' time. */
template <int T, int WIDTH>
MI4_DEVICE void qw_mainloop(float (&acc)[T / 2], qw_codes<T> &codes, int steps, qw_step step)
{
    float(&d)[WIDTH / 2] = *reinterpret_cast<float(*)[WIDTH / 2]>(&acc);
    const int lane = (int)threadIdx.x % 32;
    uint32_t frag[4][4]; /* a set per k step of a stage */
    codes.take(0, step, steps);
    codes.fragment(frag[0], 0);
    codes.fragment(frag[1], 1);
    mi4_wgmma_fence();
    wgmma_rs(d, frag[0], mi4_wgmma_desc(codes.sh.stage(step)), 0);
    mi4_wgmma_commit();
    for (int k = 0; k < steps; k++, step++) {
        const uint64_t desc = mi4_wgmma_desc(codes.sh.stage(step));
        const uint64_t next_desc = mi4_wgmma_desc(codes.sh.stage(step + 1));
#pragma unroll
        for (int s = 0; s < 4; s++) {
            /* k step g = 4 k + s is in flight; issue g + 1 */
            const bool last = k + 1 == steps && s == 3;
            if (!last) {
                mi4_wgmma_fence();
                wgmma_rs(d, frag[(s + 1) % 4], s == 3 ? next_desc : desc + 2 * (s + 1), 1);
                mi4_wgmma_commit();
            }
            /* dequantize g + 2 (the next stage's codes from s = 2) */
            if (s == 2 && k + 1 < steps)
                codes.take(k + 1, step + 1, steps);
            if (s < 2 || k + 1 < steps)
                codes.fragment(frag[(s + 2) % 4], (s + 2) % 4);
            if (last)
                break;
            mi4_wgmma_wait_one(); /* g is done */
            q_keep(frag);
            if (s == 3 && lane == 0) /* the stage's last wgmma: release it */
                mi4_mbar_arrive(&codes.sh.empty[qw_slot<T>(step)]);
        }
    }
    step--; /* the last stage's ring step; the ones before it are released */
    mi4_wgmma_wait_all();
    q_keep(frag);
    if (lane == 0)
        mi4_mbar_arrive(&codes.sh.empty[qw_slot<T>(step)]);
    mi4_fence_registers(acc);
}

/* acc += a chunk's exact product times its rows' scales (acc[4 jj + i]:
 * row lo for i < 2, else hi). */
template <int W>
MI4_DEVICE void qw_add_chunk(float (&acc)[W], float (&part)[W], float scale_lo, float scale_hi)
{
    mi4_fence_registers(part);
#pragma unroll
    for (int i = 0; i < W; i++)
        acc[i] = fmaf(part[i], i % 4 < 2 ? scale_lo : scale_hi, acc[i]);
}

/* The exact k loop (qw64, qw128): as qw_mainloop, but each 128-input
 * chunk (8 k steps) accumulates in a fresh set of accumulators, which joins
 * acc in f32 times the chunk's scales once its last wgmma is done. That is
 * the one point where no wgmma stays queued: the next chunk's first is
 * issued after the join (with one in flight ptxas serializes every wgmma,
 * C7514). All but the last two chunks run without a bound check (TAIL
 * false), and a stage's descriptor is the ring's first plus its slot's
 * offset (ncu: computed afresh, descriptors and checks took half of the
 * loop's instructions). */
template <int T, int WIDTH> struct qw_exact_loop {
    static constexpr uint64_t STAGE_DESC = qw_config<T>::stage_bytes >> 4;
    float (&d)[WIDTH / 2];
    float (&part)[WIDTH / 2];
    uint32_t (&frag)[4][4];
    qw_codes<T> &codes;
    const int steps, total; /* stages, k steps */
    const qw_step step;
    const uint64_t ring_desc; /* of slot 0 */

    MI4_DEVICE uint64_t desc_of(int k) const /* stage k of the tile */
    {
        return ring_desc + qw_slot<T>(step + (qw_step)k) * STAGE_DESC;
    }
    /* k step s of a chunk (its stage's descriptor: desc) */
    MI4_DEVICE void issue(int s, uint64_t desc) const
    {
        mi4_wgmma_fence();
        wgmma_rs(part, frag[s % 4], desc + 2 * (s % 4), s != 0);
        mi4_wgmma_commit();
    }
    /* the chunk of k steps base .. base + 7 */
    template <bool TAIL> MI4_DEVICE void run(int base) const
    {
        const int lane = (int)threadIdx.x % 32;
        uint64_t desc_next = desc_of(base / 4);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            /* k step g = base + u (of stage k) is in flight */
            const int g = base + u, k = g / 4;
            const bool last = TAIL && g + 1 == total;
            if (u % 4 == 3) /* the next issue starts stage k + 1 */
                desc_next = desc_of(k + 1);
            if (!last && u != 7)
                issue(u + 1, desc_next);
            if (u % 4 == 2 && (!TAIL || k + 1 < steps))
                codes.take(k + 1, step + (qw_step)(k + 1), steps);
            if (!TAIL || g + 2 < total)
                codes.fragment(frag[(u + 2) % 4], (u + 2) % 4);
            if (last)
                break;
            if (u == 7)
                mi4_wgmma_wait_all();
            else
                mi4_wgmma_wait_one(); /* g is done */
            q_keep(frag);
            if (u % 4 == 3 && lane == 0)
                mi4_mbar_arrive(&codes.sh.empty[qw_slot<T>(step + (qw_step)k)]);
            if (u == 7) { /* the next chunk's scales were taken */
                qw_add_chunk(d, part, codes.before_lo, codes.before_hi);
                issue(0, desc_next);
            }
        }
    }
};

template <int T, int WIDTH>
MI4_DEVICE void qw_mainloop_exact(float (&acc)[T / 2], qw_codes<T> &codes, int steps,
                                  qw_step step)
{
    float(&d)[WIDTH / 2] = *reinterpret_cast<float(*)[WIDTH / 2]>(&acc);
    float part[WIDTH / 2];
    uint32_t frag[4][4];
    const int lane = (int)threadIdx.x % 32, total = 4 * steps;
#pragma unroll
    for (int i = 0; i < WIDTH / 2; i++)
        d[i] = 0.0f;
    const qw_exact_loop<T, WIDTH> loop{d,    part, frag, codes, steps, total, step,
                                       mi4_wgmma_desc(codes.sh.stages)};
    codes.take(0, step, steps);
    codes.fragment(frag[0], 0);
    codes.fragment(frag[1], 1);
    loop.issue(0, loop.desc_of(0));
    int base = 0;
    for (; base + 10 <= total; base += 8) /* the k steps two ahead exist */
        loop.template run<false>(base);
    for (; base < total; base += 8)
        loop.template run<true>(base);
    mi4_wgmma_wait_all();
    q_keep(frag);
    if (lane == 0)
        mi4_mbar_arrive(&codes.sh.empty[qw_slot<T>(step + (qw_step)(steps - 1))]);
    qw_add_chunk(d, part, codes.scale_lo, codes.scale_hi); /* the last chunk's */
    mi4_fence_registers(acc);
}

/* A tile's epilogue from the consumers' accumulators: acc[4 jj + i] is
 * weight row lo (i < 2) or hi, token 8 jj + 2 t + (i & 1). One instance an
 * activation: with the activation chosen per element, its unrolled code
 * (every activation, 64 elements) missed the instruction cache (ncu's
 * no-instruction stalls, 2026-12-04). */
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

/* The k loop of a tile of `valid` token rows: wgmmas as wide as its rows
 * rounded up (q256: to 64; qw64 and qw128: to 16). */
template <int T>
MI4_DEVICE void qw_tile_loop(float (&acc)[T / 2], qw_codes<T> &codes, int valid, int steps,
                             qw_step step)
{
    if constexpr (qw_config<T>::exact) {
        if (valid <= 16)
            qw_mainloop_exact<T, 16>(acc, codes, steps, step);
        else if (valid <= 32)
            qw_mainloop_exact<T, 32>(acc, codes, steps, step);
        else if (T == 64 || valid <= 64)
            qw_mainloop_exact<T, 64>(acc, codes, steps, step);
        else
            qw_mainloop_exact<T, T>(acc, codes, steps, step);
    } else {
        if (valid <= 64)
            qw_mainloop<T, 64>(acc, codes, steps, step);
        else if (valid <= 128)
            qw_mainloop<T, 128>(acc, codes, steps, step);
        else if (valid <= 192)
            qw_mainloop<T, 192>(acc, codes, steps, step);
        else
            qw_mainloop<T, 256>(acc, codes, steps, step);
    }
}

template <int T, bool GATED>
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
     * behind that epilogue */
    qw_rows rows = rows_of(0);
    qw_scale_bits first_bits = qw_load_scales(q, rows, 0);
    qw_step step = 0;
    for (int64_t j = 0; j < my_tiles; j++, step += steps) {
        int tile, out_tile;
        tile_coords(blockIdx.x + j * gridDim.x, row_tiles, out_tiles, &tile, &out_tile);
        const int buf = (int)(j & 1);
        qw_codes<T> codes{q, sh, rows, first_bits, row_lo, t};
        mi4_mbar_wait(&sh.table_full[buf], (unsigned)((j >> 1) & 1));
        const int valid = sh.rows[buf];
        qw_tile_loop<T>(acc, codes, valid, steps, step);
        if (j + 1 < my_tiles) {
            rows = rows_of(j + 1);
            first_bits = qw_load_scales(q, rows, 0);
        }

        const qw_table tb = sh.table(buf);
        if (!GATED)
            qw_store<T, false, MOEINT4_ACTIVATION_SILU>(p, acc, tb, valid, tile, out_tile);
        else if (p.activation == MOEINT4_ACTIVATION_GELU)
            qw_store<T, true, MOEINT4_ACTIVATION_GELU>(p, acc, tb, valid, tile, out_tile);
        else if (p.activation == MOEINT4_ACTIVATION_SWIGLU_CLAMP)
            qw_store<T, true, MOEINT4_ACTIVATION_SWIGLU_CLAMP>(p, acc, tb, valid, tile, out_tile);
        else
            qw_store<T, true, MOEINT4_ACTIVATION_SILU>(p, acc, tb, valid, tile, out_tile);
        __syncwarp();
        if (lane == 0)
            mi4_mbar_arrive(&sh.table_empty[buf]);
    }
}

#endif

template <int T, bool GATED, bool TOKEN_TMA>
__global__ void __launch_bounds__(QW_THREADS, 1)
    int4_ws_gemm(gemm_params p, mi4_hip_int4_matrix q, const __grid_constant__ CUtensorMap token_map)
{
#if defined(MI4_HAVE_WGMMA)
    typedef qw_config<T> C;
    extern __shared__ uint4 qw_smem_raw[];
    char *base = (char *)(((uintptr_t)qw_smem_raw + 1023) & ~(uintptr_t)1023);
    qw_shared<T> sh;
    sh.stages = base;
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
    const int steps = q.inner_padded / QW_K;
    if (threadIdx.x == 0) {
        for (int s = 0; s < C::stages; s++) {
            mi4_mbar_init(&sh.full[s], QW_PRODUCERS / 32 + (TOKEN_TMA ? 1 : 0));
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
        qw_produce<T, GATED, TOKEN_TMA>(p, q, sh, &token_map, row_tiles, out_tiles, my_tiles,
                                        steps);
        return;
    }
    mi4_regs_raise<QW_CONSUMER_REGS>();
    qw_consume<T, GATED>(p, q, sh, row_tiles, out_tiles, my_tiles, steps);
#else
    (void)p;
    (void)q;
    (void)token_map;
    __trap(); /* launched only in sm_90a builds */
#endif
}

#endif

template <int T, bool GATED> hipError_t launch_qw(const mi4_hip_gemm_args *a, bool init)
{
#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
    typedef qw_config<T> C;
    if (init) {
        hipError_t e = hipFuncSetAttribute((const void *)int4_ws_gemm<T, GATED, false>,
                                           hipFuncAttributeMaxDynamicSharedMemorySize, C::smem);
        return e == hipSuccess && !GATED
                   ? hipFuncSetAttribute((const void *)int4_ws_gemm<T, false, true>,
                                         hipFuncAttributeMaxDynamicSharedMemorySize, C::smem)
                   : e;
    }
    gemm_params p = make_params(a, GATED);
    p.b = nullptr; /* the weights are q */
    const mi4_hip_int4_matrix q = GATED ? a->weights->q13 : a->weights->q2;
    const size_t tiles = (size_t)a->routing->max_tiles * (size_t)q_out_tiles(p.out_cols, GATED);
    const size_t sms = a->multiprocessors > 0 ? (size_t)a->multiprocessors : 1;
    size_t blocks = tiles < sms ? tiles : sms; /* persistent: one block an SM */
    /* MOEINT4_HIP_Q256_BLOCKS=N caps the grid (tests: many tiles a block
     * on small layers, through every ring phase and both tile tables) */
    const char *cap = getenv("MOEINT4_HIP_Q256_BLOCKS");
    if (cap != nullptr && atoi(cap) > 0 && (size_t)atoi(cap) < blocks)
        blocks = (size_t)atoi(cap);
    if (blocks == 0)
        return hipSuccess;
    /* gemm2's token rows (the intermediate, max_tiles x T rows) by TMA */
    CUtensorMap token_map;
    memset(&token_map, 0, sizeof token_map);
    const bool token_tma = !GATED && mi4_tma_wanted() &&
                           mi4_tma_map_bf16(&token_map, p.a, (uint64_t)p.inner,
                                            (uint64_t)a->routing->max_tiles * T, QW_K, T);
    if (token_tma)
        return mi4_launch(int4_ws_gemm<T, false, true>, dim3((unsigned)blocks), dim3(QW_THREADS),
                          C::smem, a->stream, p, q, token_map);
    return mi4_launch(int4_ws_gemm<T, GATED, false>, dim3((unsigned)blocks), dim3(QW_THREADS),
                      C::smem, a->stream, p, q, token_map);
#else
    (void)a;
    (void)init;
    return hipSuccess; /* never launched: mi4_hip_int4_wgmma_serves is 0 */
#endif
}

} // namespace

hipError_t mi4_hip_launch_int4_ws(int tile_rows, bool gated, const mi4_hip_gemm_args *a, bool init)
{
    if (tile_rows == 64)
        return gated ? launch_qw<64, true>(a, init) : launch_qw<64, false>(a, init);
    if (tile_rows == 128)
        return gated ? launch_qw<128, true>(a, init) : launch_qw<128, false>(a, init);
    return gated ? launch_qw<256, true>(a, init) : launch_qw<256, false>(a, init);
}
