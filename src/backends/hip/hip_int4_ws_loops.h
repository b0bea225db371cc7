/* The consumers' k loops of the warp-specialized int4 GEMM
 * (hip_int4_ws.hip): a consumer thread's view of the ring's codes and
 * scales, the rounded loop (q256) and the exact one (the qw tiles). */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INT4_WS_LOOPS_H
#define MOEINT4_BACKENDS_HIP_HIP_INT4_WS_LOOPS_H

#include "backends/hip/hip_int4_ws_ring.h"

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA) && defined(MI4_HAVE_WGMMA)
namespace mi4_int4_ws {

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

/* 16 bytes of shared memory by a shared-space load. */
MI4_DEVICE uint4 qw_load_shared16(const char *at)
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"((unsigned)__cvta_generic_to_shared(at)));
    return v;
}

/* 2 bytes and 1 byte of shared memory by shared-space loads. */
MI4_DEVICE uint16_t qw_load_shared_u16(const char *at)
{
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];\n"
                 : "=h"(v)
                 : "r"((unsigned)__cvta_generic_to_shared(at)));
    return v;
}
MI4_DEVICE int qw_load_shared_u8(const char *at)
{
    unsigned v;
    asm volatile("ld.shared.u8 %0, [%1];\n"
                 : "=r"(v)
                 : "r"((unsigned)__cvta_generic_to_shared(at)));
    return (int)v;
}

/* Scales and zero points of chunk `chunk` (128 inputs) of a tile's rows. */
MI4_DEVICE qw_scale_bits qw_load_scales(const mi4_hip_int4_matrix &q, const qw_rows &r, int chunk)
{
    /* groups of one chunk or per channel (mi4_hip_int4_wgmma_serves): no
     * division a chunk */
    const int group = q.group_size == Q_CHUNK ? chunk : chunk * Q_CHUNK / q.group_size;
    qw_scale_bits b;
    b.lo = r.valid_lo ? q.scales[r.at_lo + group] : 0;
    b.hi = r.valid_hi ? q.scales[r.at_hi + group] : 0;
    b.zero_lo = r.valid_lo && q.zeros ? q.zeros[r.at_lo + group] : 8;
    b.zero_hi = r.valid_hi && q.zeros ? q.zeros[r.at_hi + group] : 8;
    return b;
}

/* A consumer thread's view of the ring's codes: its piece of rows lo and hi
 * of the stage taken last (16 bytes of a whole chunk; q256: the 8 of its
 * half), and the scales of its chunk (exact: and of the chunk before it,
 * which the tile's accumulators still take). */
template <int T, bool STAGED_SCALES = false> struct qw_codes {
    const mi4_hip_int4_matrix &q;
    const qw_shared<T> &sh;
    const qw_rows &rows;
    qw_scale_bits bits; /* the chunk after the current one's */
    int row_lo, t;
    uint4 lo, hi; /* q256: x and y */
    float scale_lo = 0.0f, scale_hi = 0.0f;
    float before_lo = 0.0f, before_hi = 0.0f;
    q_split_scale split_lo{}, split_hi{}; /* the rounded mode's (q256) */
    uint32_t bias_lo = 0, bias_hi = 0;

    /* stage step k (of a tile of `steps`, at ring step at) has landed: its
     * codes (and, a new chunk, its scales) */
    MI4_DEVICE void take(int k, qw_step at, int steps)
    {
        const int stage = (int)qw_slot<T>(at);
        mi4_mbar_wait(&sh.full[stage], qw_parity<T>(at));
        mi4_fence_proxy_async(); /* the producer's copies, before wgmma reads them */
        /* the slot reused, not sh.stage(at): ptxas then serialized q256's
         * gemm2 wgmmas (C7511, register pressure) */
        typedef qw_config<T> C;
        constexpr int row_bytes = C::k_inputs / 2, stages_a_chunk = Q_CHUNK / C::k_inputs;
        const char *codes = sh.stages + stage * C::stage_bytes + C::token_bytes;
        if constexpr (stages_a_chunk == 1) {
            lo = qw_load_shared16(codes + row_lo * row_bytes + 16 * t);
            hi = qw_load_shared16(codes + (row_lo + 8) * row_bytes + 16 * t);
        } else {
            const uint2 l = qw_load_shared8(codes + row_lo * row_bytes + 8 * t);
            const uint2 h = qw_load_shared8(codes + (row_lo + 8) * row_bytes + 8 * t);
            lo.x = l.x;
            lo.y = l.y;
            hi.x = h.x;
            hi.y = h.y;
        }
        if (k % stages_a_chunk == 0) {
            if (C::exact) {
                before_lo = scale_lo;
                before_hi = scale_hi;
            }
            if constexpr (STAGED_SCALES) {
                /* chunk `at` (the exact tiles: a stage a chunk), in the
                 * buffer the producer filled with this stage's 8 before */
                const char *buf = sh.scale_buffer(at), *zeros = buf + QW_ZEROS_AT;
                const int c = (int)(at % QW_SCALE_CHUNKS);
                constexpr int S = QW_SCALE_ROW_BYTES, Z = QW_ZERO_ROW_BYTES;
                scale_lo = int4_scale_of(q, qw_load_shared_u16(buf + row_lo * S + 2 * c));
                scale_hi = int4_scale_of(q, qw_load_shared_u16(buf + (row_lo + 8) * S + 2 * c));
                bias_lo = int4_bias_pair(q.zeros ? qw_load_shared_u8(zeros + row_lo * Z + c) : 8);
                bias_hi =
                    int4_bias_pair(q.zeros ? qw_load_shared_u8(zeros + (row_lo + 8) * Z + c) : 8);
            } else {
                scale_lo = int4_scale_of(q, bits.lo);
                scale_hi = int4_scale_of(q, bits.hi);
                if constexpr (!C::exact) {
                    split_lo = q_split(scale_lo);
                    split_hi = q_split(scale_hi);
                }
                bias_lo = int4_bias_pair(bits.zero_lo);
                bias_hi = int4_bias_pair(bits.zero_hi);
                if (k + stages_a_chunk < steps) /* used a chunk later */
                    bits = qw_load_scales(q, rows, (k + stages_a_chunk) / stages_a_chunk);
            }
        }
    }
    /* k step s (0 .. k_steps - 1) of the taken stage (q_fragment: word s / 2
     * of the piece, nibbles 8 (s % 2)) */
    MI4_DEVICE void fragment(uint32_t (&f)[4], int s) const
    {
        q_fragment<!qw_config<T>::exact>(f, lo, hi, s, bias_lo, bias_hi, split_lo, split_hi);
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

/* The exact k loop (qw32, qw64, qw128): as qw_mainloop, but each
 * 128-input chunk (8 k steps, one stage) accumulates in a fresh set of
 * accumulators, which joins acc in f32 times the chunk's scales once its
 * last wgmma is done. That is the one point where no wgmma stays queued:
 * the next chunk's first is issued after the join (with one in flight
 * ptxas serializes every wgmma, C7514). All but the last two chunks run
 * without a bound check (TAIL false), and a stage's descriptor is the
 * ring's first plus its slot's offset (ncu: computed afresh, descriptors
 * and checks took half of the loop's instructions). */
template <int T, int WIDTH, typename Codes> struct qw_exact_loop {
    typedef qw_config<T> C;
    static_assert(C::k_steps == 8, "a stage is a chunk");
    static constexpr uint64_t STAGE_DESC = C::stage_bytes >> 4;
    float (&d)[WIDTH / 2];
    float (&part)[WIDTH / 2];
    uint32_t (&frag)[4][4];
    Codes &codes;
    const int steps, total; /* stages (chunks), k steps */
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
        wgmma_rs(part, frag[s % 4], desc + C::step_desc(s), s != 0);
        mi4_wgmma_commit();
    }
    /* the chunk (stage k = base / 8) of k steps base .. base + 7 */
    template <bool TAIL> MI4_DEVICE void run(int base) const
    {
        const int lane = (int)threadIdx.x % 32, k = base / 8;
        const uint64_t desc = desc_of(k);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            /* k step g = base + u is in flight */
            const int g = base + u;
            const bool last = TAIL && g + 1 == total;
            if (!last && u != 7)
                issue(u + 1, desc);
            if (u == 6 && (!TAIL || k + 1 < steps))
                codes.take(k + 1, step + (qw_step)(k + 1), steps);
            if (!TAIL || g + 2 < total)
                codes.fragment(frag[(u + 2) % 4], (u + 2) % 8);
            if (last)
                break;
            if (u == 7)
                mi4_wgmma_wait_all();
            else
                mi4_wgmma_wait_one(); /* g is done */
            q_keep(frag);
            if (u == 7) {
                if (lane == 0)
                    mi4_mbar_arrive(&codes.sh.empty[qw_slot<T>(step + (qw_step)k)]);
                /* the next chunk's scales were taken */
                qw_add_chunk(d, part, codes.before_lo, codes.before_hi);
                issue(0, desc_of(k + 1));
            }
        }
    }
};

template <int T, int WIDTH, typename Codes>
MI4_DEVICE void qw_mainloop_exact(float (&acc)[T / 2], Codes &codes, int steps,
                                  qw_step step)
{
    float(&d)[WIDTH / 2] = *reinterpret_cast<float(*)[WIDTH / 2]>(&acc);
    float part[WIDTH / 2];
    uint32_t frag[4][4];
    const int lane = (int)threadIdx.x % 32, total = 8 * steps;
#pragma unroll
    for (int i = 0; i < WIDTH / 2; i++)
        d[i] = 0.0f;
    const qw_exact_loop<T, WIDTH, Codes> loop{d,    part, frag, codes, steps, total, step,
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

/* The k loop of a tile of `valid` token rows: wgmmas as wide as its rows
 * rounded up (q256: to 64; the qw tiles: to 16). */
template <int T, typename Codes>
MI4_DEVICE void qw_tile_loop(float (&acc)[T / 2], Codes &codes, int valid, int steps,
                             qw_step step)
{
    if constexpr (qw_config<T>::exact) {
        if (valid <= 16)
            qw_mainloop_exact<T, 16>(acc, codes, steps, step);
        else if (T == 32 || valid <= 32)
            qw_mainloop_exact<T, 32>(acc, codes, steps, step);
        else if constexpr (T >= 64) {
            if (T == 64 || valid <= 64)
                qw_mainloop_exact<T, 64>(acc, codes, steps, step);
            else
                qw_mainloop_exact<T, T>(acc, codes, steps, step);
        }
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

} // namespace mi4_int4_ws
#endif

#endif
