/* The warp-specialized int4 GEMM's tiles and ring (hip_int4_ws.hip): the
 * shape of a tile of T token rows (qw_config), the block's shared memory
 * (stages, tile tables, barriers) and the ring's steps. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INT4_WS_RING_H
#define MOEINT4_BACKENDS_HIP_HIP_INT4_WS_RING_H

#include "backends/hip/hip_int4_wgmma_ops.h"

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
namespace mi4_int4_ws {

using namespace mi4_gemm;

constexpr int QW_HALF = 64; /* inputs a 128B-swizzled token block (a TMA box) holds */
/* Each tile's ring depth (q256: MI4_QW_STAGES, the qw tiles:
 * MI4_QW<T>_STAGES), macros for tuning builds; the stages must fit shared
 * memory (static_asserts below). A stage is full once each producer
 * thread's copies of it have landed (cp.async.mbarrier.arrive: no thread
 * waits for its own copies). The producer used to wait for a stage's
 * copies and signal it `lag` steps later (lags 1, 1, 2, 2 for q256, qw128,
 * qw64, qw32: bench/results/hip-2026-12-05-s29.md); arriving as the copies
 * land was up to 11% faster (hip-2026-12-06-s35.md). */
#ifndef MI4_QW_STAGES
#define MI4_QW_STAGES 6
#endif
#ifndef MI4_QW128_STAGES
#define MI4_QW128_STAGES 5
#endif
#ifndef MI4_QW64_STAGES
#define MI4_QW64_STAGES 9
#endif
#ifndef MI4_QW32_STAGES
#define MI4_QW32_STAGES 6
#endif
constexpr int QW_CONSUMERS = 256, QW_PRODUCERS = 128, QW_THREADS = QW_CONSUMERS + QW_PRODUCERS;
/* Staged scales: a buffer holds 8 chunks' scales ([row][8] f16 / bf16
 * bits) and then their zero points ([row][8] bytes) of the block's 128
 * rows (producer thread r copies row r's: 16 and 8 bytes). */
constexpr int QW_SCALE_CHUNKS = 8, QW_SCALE_BUFS = 4;
constexpr int QW_SCALE_ROW_BYTES = QW_SCALE_CHUNKS * 2, QW_ZERO_ROW_BYTES = QW_SCALE_CHUNKS;
constexpr int QW_ZEROS_AT = Q_ROWS * QW_SCALE_ROW_BYTES;
constexpr int QW_SCALE_BUF_BYTES = QW_ZEROS_AT + Q_ROWS * QW_ZERO_ROW_BYTES;

/* A tile of T token rows: q256 (T = 256, 36 KB stages) rounds the weights
 * to BF16 once (the BF16 mode's bits); qw32, qw64 and qw128 (16, 24 and 40 KB
 * stages) keep each chunk's product exact in its own accumulators and
 * scale it in f32, as the narrow q tiles do (a few instructions a weight
 * less: where the wgmmas are narrow the dequantization is the whole cost),
 * with deeper rings: at 16 rows an expert q256 waited for its stages. */
template <int T> struct qw_config {
    static constexpr bool exact = T <= 128;
    /* qw32: two blocks an SM (half the ring each), so that one block's
     * waits hide behind the other's work */
    static constexpr int blocks_per_sm = T == 32 ? 2 : 1;
    /* inputs a stage: a whole 128-input chunk (its codes 64 contiguous
     * bytes a row, one 16-byte copy a row piece; a chunk's scales, join
     * and ring step once), q256 half of one (its 256 token rows) */
    static constexpr int k_inputs = exact ? 128 : 64;
    static constexpr int k_steps = k_inputs / 16;   /* wgmma k steps a stage */
    static constexpr int halves = k_inputs / QW_HALF; /* token blocks a stage */
    static constexpr int stages = T == 256   ? MI4_QW_STAGES
                                  : T == 128 ? MI4_QW128_STAGES
                                  : T == 64  ? MI4_QW64_STAGES
                                             : MI4_QW32_STAGES;
    /* setmaxnreg: producer x 128 + consumer x 256 within the launch's
     * registers a block (the consumers' raise waits for what the producer
     * gives back); the producer keeps its token rows (16 at most) in
     * registers */
    static constexpr int launch_regs = blocks_per_sm == 1 ? 168 : 80;
    static constexpr int producer_regs = blocks_per_sm == 1 ? 104 : 48;
    static constexpr int consumer_regs = blocks_per_sm == 1 ? 200 : 96;
    static_assert(producer_regs * QW_PRODUCERS + consumer_regs * QW_CONSUMERS <=
                      launch_regs * QW_THREADS,
                  "setmaxnreg within the launch's registers");
    static_assert(launch_regs * QW_THREADS * blocks_per_sm <= 65536, "registers an SM");
    static constexpr int half_bytes = T * QW_HALF * 2; /* a token block: T rows x 128 bytes */
    static constexpr int token_bytes = halves * half_bytes;
    static constexpr int code_bytes = Q_ROWS * k_inputs / 2; /* a row's piece: k_inputs / 2 bytes */
    static constexpr int stage_bytes = token_bytes + code_bytes;
    /* the descriptor offset (16-byte units) of k step s of a stage: token
     * block s / 4, 32 bytes a k step within it */
    MI4_HOST_DEVICE static constexpr uint64_t step_desc(int s)
    {
        return (uint64_t)(s / 4) * (half_bytes >> 4) + 2u * (uint64_t)(s % 4);
    }
    /* stages, then two tile tables (slot, input row, router weight a token
     * row), their valid rows and the barriers */
    static constexpr int tables_at = stages * stage_bytes;
    static constexpr int table_bytes = T * 12;
    static constexpr int rows_at = tables_at + 2 * table_bytes;
    static constexpr int bars_at = rows_at + 16;
    static constexpr int smem = bars_at + (2 * stages + 4) * 8 + 1024; /* + alignment */
    /* STAGED_SCALES (qw_stages_scales): after the barriers, a ring of
     * QW_SCALE_BUFS buffers of QW_SCALE_BUF_BYTES */
    static constexpr int scales_at = (bars_at + (2 * stages + 4) * 8 + 15) / 16 * 16;
    static constexpr int smem_staged = scales_at + QW_SCALE_BUFS * QW_SCALE_BUF_BYTES + 1024;
    /* qw32 only: on an H100 (bench/results/hip-2026-12-06-s35.md, call 8)
     * its gemm13 took 10% less time (Mixtral M = 64: 229 -> 207 us), where
     * qw128 moved by -0.9% and +1.2%; qw64's ring leaves no room */
    static constexpr bool can_stage_scales =
        T == 32 && stages <= QW_SCALE_CHUNKS * (QW_SCALE_BUFS - 1) &&
        smem_staged * blocks_per_sm <= 227 * 1024 - (blocks_per_sm - 1) * 1024;
    /* the consumers hold a stage until the next has landed */
    static_assert(stages >= 2, "a stage in use and one landing");
    static_assert(half_bytes % 1024 == 0 && stage_bytes % 1024 == 0,
                  "token blocks on the 128B swizzle's 1024-byte pattern");
    static_assert(smem * blocks_per_sm <= 227 * 1024 - (blocks_per_sm - 1) * 1024,
                  "a block's shared memory");
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
    char *scales; /* STAGED_SCALES: the scale ring */
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
    /* STAGED_SCALES: the buffer that holds step s's scales (a step a chunk) */
    MI4_DEVICE char *scale_buffer(qw_step s) const
    {
        return scales + (s / QW_SCALE_CHUNKS % QW_SCALE_BUFS) * QW_SCALE_BUF_BYTES;
    }
};

} // namespace mi4_int4_ws
#endif

#endif
