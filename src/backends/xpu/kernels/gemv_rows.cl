/* One-token GEMVs that split each row over a few work-items and keep the
 * reductions out of the walk (mi4_w13_gemv_rows, mi4_w2_gemv_rows; the
 * host launches them with MOEINT4_XPU_GEMV_ROWS, a few work-groups per
 * compute unit, on rows of 16-byte pieces in groups of whole pieces).
 *
 * Why: the staged, walking and lanes GEMVs end every batch of a few rows
 * with a work-group reduction (barriers), and a work-group's loads stop
 * while it reduces; on the H200 they stream at 32-40% of the copy
 * bandwidth. Here a team of `team` work-items (4 to 32, the host's choice)
 * shares one row: work-item q reads pieces q, q + team, ... (a team reads
 * team * 16 neighbouring bytes a step) and keeps one sum for the whole row.
 * The work-group's MI4_GROUP / team teams walk that many rows side by side
 * (a chunk; w13: the gate and up rows of half as many columns). The
 * chunk's sums meet in local memory behind one barrier per chunk, in two
 * buffers, so that a chunk's sums never overwrite the previous chunk's
 * before they are read. The token's activations are staged in local
 * memory once per work-group (per block of MI4_ROWS_XBLOCK values and
 * chunk when the row is longer), pre-scaled for codes decoded in place
 * (mi4_staged_scale), each piece's 32 values followed by 4 of padding so
 * that the 8 pieces a team of 8 reads at once lie in distinct banks.
 * What the arithmetic costs decided the rest (H200): one AND a code
 * (MI4_CODE_MASKED) and f16 scales through the hardware conversion
 * (mi4_rows_scale) took Mixtral's w13 from 69 to 56 us, 50% of the copy
 * bandwidth; the loads alone take 38 us.
 * Sums: a work-item's pieces in order, then the team's sums in lane order:
 * deterministic (test_gemv_rows checks against the double reference). */

/* Build switches (MOEINT4_XPU_BUILD_OPTIONS): MI4_ROWS_AHEAD pieces a
 * work-item loads before using any; MI4_ROWS_PIPELINE=1 (mi4_rows_sum_loaded);
 * MI4_ROWS_HALF_SCALES=0 (mi4_rows_scale); MI4_ROWS_STREAM_PROBE=1
 * replaces the arithmetic by one product per word (wrong results: what the
 * loads alone take);
 * MI4_ROWS_EARLY=1 loads a work-item's first batch of a block before the
 * activations are staged, so the staging and its barriers overlap the
 * weights' latency (mi4_rows_walk; combines with MI4_ROWS_PIPELINE=1;
 * opt-in: on the H200 Mixtral's w2 3-4% faster, every other GEMV 12-24%
 * slower); MI4_ROWS_CHAINS=2 sums a piece's even and odd codes in two
 * chains, halving the dependent FMAs (mi4_rows_piece_dot; other rounding;
 * opt-in: no gain on the H200); MI4_ROWS_XBLOCK=8192 stages rows of up to
 * 8192 activations once (36 KB of local memory: Mixtral's w2 in two blocks
 * instead of four; opt-in: through NVIDIA's OpenCL that GEMV 3.7-5.0%
 * faster on H100s and an H200; on Intel GPUs the larger block may halve
 * the work-groups a core holds). Measured: bench/results/xpu-2026-12-06-s32.md. */
#ifndef MI4_ROWS_AHEAD
#define MI4_ROWS_AHEAD 4
#endif
#ifndef MI4_ROWS_PIPELINE
#define MI4_ROWS_PIPELINE 0
#endif
#ifndef MI4_ROWS_HALF_SCALES
#define MI4_ROWS_HALF_SCALES 1
#endif
#ifndef MI4_ROWS_STREAM_PROBE
#define MI4_ROWS_STREAM_PROBE 0
#endif
#ifndef MI4_ROWS_EARLY
#define MI4_ROWS_EARLY 0
#endif
#ifndef MI4_ROWS_CHAINS
#define MI4_ROWS_CHAINS 1
#endif
#if MI4_ROWS_CHAINS != 1 && MI4_ROWS_CHAINS != 2
#error "MI4_ROWS_CHAINS: 1 or 2"
#endif
#ifndef MI4_ROWS_XBLOCK /* activations staged at a time (Mixtral's w2: 4 blocks a row) */
#define MI4_ROWS_XBLOCK 4096
#endif
#if MI4_ROWS_XBLOCK % 32 != 0 || MI4_ROWS_XBLOCK < 32
#error "MI4_ROWS_XBLOCK: a multiple of 32"
#endif
#define MI4_ROWS_PIECE 36    /* floats a staged piece takes: 32 and padding */

/* Stages activations [x_at, x_at + count) (dtype; count a multiple of 32),
 * pre-scaled for codes in place, into xs. Every work-item calls it. */
void mi4_rows_stage(__local float4 *xs, __global const uchar *x, int dtype, long x_at, int count)
{
    for (int k = 4 * (int)get_local_id(0); k < count; k += 4 * MI4_GROUP) {
        float4 v = mi4_load4(x, dtype, x_at + k);
        int p = k & 7; /* 0 or 4 */
        float4 scaled = (float4)(v.x * mi4_staged_scale(p), v.y * mi4_staged_scale(p + 1),
                                 v.z * mi4_staged_scale(p + 2), v.w * mi4_staged_scale(p + 3));
        xs[(k >> 5) * (MI4_ROWS_PIECE / 4) + (k & 31) / 4] = scaled;
    }
}

/* Code i of a word already ORed with 2^23's bits (mi4_rows_piece_dot) as
 * (code - zero) 16^i: one AND a code, where MI4_CODE_IN_PLACE masks and ORs
 * each code (on the H200 the Mixtral w13 GEMV took 58.4 instead of 67.7 us,
 * bench/results/xpu-2026-12-03-rows.md). The same values. */
#define MI4_CODE_MASKED(v, i, zero)                                                                \
    (as_float((v) & (MI4_MAGIC | (15u << (4 * (i))))) - MI4_CODE_OFFSET_Z(i, zero))

/* A piece's 32 codes against its staged activations (8 float4).
 * MI4_ROWS_CHAINS=2: the odd codes go to a second sum (MI4_ROWS_ODD), added
 * last, so two chains of 16 dependent FMAs instead of one of 32; off, both
 * names are s and the code is as it was. */
float mi4_rows_piece_dot(uint4 piece, __local const float4 *x, float zero)
{
    uint words[4] = { piece.x, piece.y, piece.z, piece.w };
    float s = 0.0f;
#if MI4_ROWS_CHAINS == 2
    float odd = 0.0f;
#define MI4_ROWS_ODD odd
#else
#define MI4_ROWS_ODD s
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float4 a = x[2 * j], b = x[2 * j + 1];
        uint w = words[j];
#if MI4_ROWS_STREAM_PROBE
        s += (float)w * a.x;
#else
        /* nibbles 0-4 where they stand, 5-7 shifted down; bit 23 of `low`
         * (nibble 5's top bit) is cleared by every mask */
        uint low = (w & 0x007fffffu) | MI4_MAGIC, high = (w >> 20) | MI4_MAGIC;
        s = fma(MI4_CODE_MASKED(low, 0, zero), a.x, s);
        MI4_ROWS_ODD = fma(MI4_CODE_MASKED(low, 1, zero), a.y, MI4_ROWS_ODD);
        s = fma(MI4_CODE_MASKED(low, 2, zero), a.z, s);
        MI4_ROWS_ODD = fma(MI4_CODE_MASKED(low, 3, zero), a.w, MI4_ROWS_ODD);
        s = fma(MI4_CODE_MASKED(low, 4, zero), b.x, s);
        MI4_ROWS_ODD = fma(MI4_CODE_MASKED(high, 0, zero), b.y, MI4_ROWS_ODD);
        s = fma(MI4_CODE_MASKED(high, 1, zero), b.z, s);
        MI4_ROWS_ODD = fma(MI4_CODE_MASKED(high, 2, zero), b.w, MI4_ROWS_ODD);
#endif
    }
#if MI4_ROWS_CHAINS == 2
    return s + odd;
#else
    return s;
#endif
}
#undef MI4_ROWS_ODD

/* A scale's bits as f32: f16 bits through vload_half (one conversion
 * instruction where the device has one: HADD2 on the H200, where
 * mi4_scale_from_bits's integer decode made Mixtral's w13 GEMV 7-9% slower,
 * bench/results/xpu-2026-12-03-rows.md), bf16 bits shifted; exact either
 * way. MI4_ROWS_HALF_SCALES=0: mi4_scale_from_bits for both. */
float mi4_rows_scale(uint bits, int scales_bf16)
{
#if MI4_ROWS_HALF_SCALES
    if (!scales_bf16) {
        ushort h = (ushort)bits;
        return vload_half(0, (const __private half *)&h);
    }
#endif
    return mi4_scale_from_bits(bits, scales_bf16);
}

/* Loads the batch of pieces i, i + team, ... (MI4_ROWS_AHEAD of them; past
 * the end: the last piece, unused) of row r, their scales' bits and zero
 * points (rz: the row's, or 0). */
void mi4_rows_load(const mi4_expert_rows *w, __global const uint4 *r, __global const ushort *rs,
                   __global const uchar *rz, int p0, int count, int i, int team, uint4 *piece,
                   uint *bits, float *zero)
{
#pragma unroll
    for (int a = 0; a < MI4_ROWS_AHEAD; ++a) {
        int p = p0 + min(i + a * team, count - 1);
        int group = mi4_group_of(32 * p, w->group_size, w->group_shift);
        piece[a] = r[p];
        bits[a] = rs[group];
        zero[a] = mi4_load_zero(rz, group);
    }
}

/* The batch's products added to acc in order. */
float mi4_rows_use(const mi4_expert_rows *w, __local const float4 *xs, int count, int i, int team,
                   const uint4 *piece, const uint *bits, const float *zero, float acc)
{
#pragma unroll
    for (int a = 0; a < MI4_ROWS_AHEAD; ++a)
        if (i + a * team < count)
            acc += mi4_rows_piece_dot(piece[a], xs + (i + a * team) * (MI4_ROWS_PIECE / 4),
                                      zero[a]) *
                   mi4_rows_scale(bits[a], w->scales_bf16);
    return acc;
}

#if MI4_ROWS_PIPELINE || MI4_ROWS_EARLY
/* The work-item's sum over pieces [p0, p0 + count) of row r (pieces q,
 * q + team, ...), against xs holding those pieces' activations, from its
 * first batch (mi4_rows_load of piece q, when q < count) already in piece,
 * bits and zero. With MI4_ROWS_PIPELINE=1 the next batch's loads go out
 * before this batch's arithmetic (two batches of registers). */
float mi4_rows_sum_loaded(const mi4_expert_rows *w, __global const uint4 *r,
                          __global const ushort *rs, __global const uchar *rz,
                          __local const float4 *xs, int p0, int count, int q, int team,
                          uint4 *piece, uint *bits, float *zero)
{
    float acc = 0.0f;
    int stride = team * MI4_ROWS_AHEAD;
    for (int i = q; i < count; i += stride) {
#if MI4_ROWS_PIPELINE
        uint4 next[MI4_ROWS_AHEAD];
        uint next_bits[MI4_ROWS_AHEAD];
        float next_zero[MI4_ROWS_AHEAD];
        int more = i + stride < count;
        if (more)
            mi4_rows_load(w, r, rs, rz, p0, count, i + stride, team, next, next_bits, next_zero);
        acc = mi4_rows_use(w, xs, count, i, team, piece, bits, zero, acc);
        if (more) /* the last batch leaves `next` unset */
#pragma unroll
            for (int a = 0; a < MI4_ROWS_AHEAD; ++a)
                piece[a] = next[a], bits[a] = next_bits[a], zero[a] = next_zero[a];
#else
        if (i != q) /* the first batch came loaded */
            mi4_rows_load(w, r, rs, rz, p0, count, i, team, piece, bits, zero);
        acc = mi4_rows_use(w, xs, count, i, team, piece, bits, zero, acc);
#endif
    }
    return acc;
}
#endif

/* The same, loading the first batch too (mi4_rows_walk without
 * MI4_ROWS_EARLY). Without MI4_ROWS_PIPELINE a loop of its own that loads
 * every batch: the same loads and products in the same order, and the
 * default build has no first-batch test. */
float mi4_rows_sum(const mi4_expert_rows *w, __global const uint4 *r, __global const ushort *rs,
                   __global const uchar *rz, __local const float4 *xs, int p0, int count, int q,
                   int team)
{
#if MI4_ROWS_PIPELINE
    uint4 piece[MI4_ROWS_AHEAD];
    uint bits[MI4_ROWS_AHEAD];
    float zero[MI4_ROWS_AHEAD];
    if (q < count)
        mi4_rows_load(w, r, rs, rz, p0, count, q, team, piece, bits, zero);
    return mi4_rows_sum_loaded(w, r, rs, rz, xs, p0, count, q, team, piece, bits, zero);
#else
    float acc = 0.0f;
    uint4 piece[MI4_ROWS_AHEAD];
    uint bits[MI4_ROWS_AHEAD];
    float zero[MI4_ROWS_AHEAD];
    int stride = team * MI4_ROWS_AHEAD;
    for (int i = q; i < count; i += stride) {
        mi4_rows_load(w, r, rs, rz, p0, count, i, team, piece, bits, zero);
        acc = mi4_rows_use(w, xs, count, i, team, piece, bits, zero, acc);
    }
    return acc;
#endif
}

/* The work-group's chunks of one expert's rows against the token's
 * activations (x + x_at elements of dtype): chunk c covers columns
 * [c * per_chunk, +per_chunk); groups walk chunks group, group + groups, ...
 * Each column's totals times `scale` go to out[out_at + column]: w13
 * (halves 2) the activation of gate and up, w2 the sum. A column past the
 * end reads the last row and writes nothing. */
void mi4_rows_walk(const mi4_expert_rows *w, __local float4 *xs, __local float *sums,
                   __global const uchar *x, int dtype, long x_at, int team, float scale,
                   int act_kind, float limit, float alpha, float beta, __global float *out,
                   long out_at)
{
    int lid = (int)get_local_id(0), q = lid % team, slot = lid / team;
    int per_chunk = MI4_GROUP / team / w->halves, in = 32 * w->pieces;
    int once = in <= MI4_ROWS_XBLOCK;
    int chunk = (int)get_group_id(0), step = (int)get_num_groups(0);
#if MI4_ROWS_EARLY /* the staging moves into the first chunk, after its loads */
    int first_chunk = chunk;
    uint4 piece[MI4_ROWS_AHEAD];
    uint bits[MI4_ROWS_AHEAD];
    float zero[MI4_ROWS_AHEAD];
#else
    if (once && chunk * per_chunk < w->cols) {
        mi4_rows_stage(xs, x, dtype, x_at, in);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    for (int buf = 0; chunk * per_chunk < w->cols; chunk += step, buf ^= 1) {
        int col = min(chunk * per_chunk + slot / w->halves, w->cols - 1);
        long row = (long)(slot % w->halves) * w->cols + col;
        __global const uint4 *r = w->packed + row * w->pieces;
        __global const ushort *rs = w->scales + row * w->groups;
        __global const uchar *rz = w->zeros ? w->zeros + row * w->groups : 0;
        float acc = 0.0f;
#if MI4_ROWS_EARLY
        /* The first batch of each block (weights: no dependence on the
         * activations) is in flight while the work-group stages and waits;
         * the chunk path is the same for the whole work-group. */
        if (once) {
            if (q < w->pieces)
                mi4_rows_load(w, r, rs, rz, 0, w->pieces, q, team, piece, bits, zero);
            if (chunk == first_chunk) {
                mi4_rows_stage(xs, x, dtype, x_at, in);
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            acc = mi4_rows_sum_loaded(w, r, rs, rz, xs, 0, w->pieces, q, team, piece, bits, zero);
        } else
            for (int kb = 0; kb < in; kb += MI4_ROWS_XBLOCK) {
                int count = min(MI4_ROWS_XBLOCK, in - kb);
                if (q < count / 32)
                    mi4_rows_load(w, r, rs, rz, kb / 32, count / 32, q, team, piece, bits, zero);
                barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with the last block */
                mi4_rows_stage(xs, x, dtype, x_at + kb, count);
                barrier(CLK_LOCAL_MEM_FENCE);
                acc += mi4_rows_sum_loaded(w, r, rs, rz, xs, kb / 32, count / 32, q, team, piece,
                                           bits, zero);
            }
#else
        if (once)
            acc = mi4_rows_sum(w, r, rs, rz, xs, 0, w->pieces, q, team);
        else
            for (int kb = 0; kb < in; kb += MI4_ROWS_XBLOCK) {
                int count = min(MI4_ROWS_XBLOCK, in - kb);
                barrier(CLK_LOCAL_MEM_FENCE); /* everyone is done with the last block */
                mi4_rows_stage(xs, x, dtype, x_at + kb, count);
                barrier(CLK_LOCAL_MEM_FENCE);
                acc += mi4_rows_sum(w, r, rs, rz, xs, kb / 32, count / 32, q, team);
            }
#endif
        __local float *red = sums + buf * MI4_GROUP;
        red[lid] = acc;
        barrier(CLK_LOCAL_MEM_FENCE);
        int first = chunk * per_chunk;
        if (lid < per_chunk && first + lid < w->cols) {
            __local const float *gate = red + lid * w->halves * team;
            float g = 0.0f, u = 0.0f;
            for (int j = 0; j < team; ++j)
                g += gate[j];
            if (w->halves == 2)
                for (int j = 0; j < team; ++j)
                    u += gate[team + j];
            out[out_at + first + lid] =
                w->halves == 2 ? mi4_activate(act_kind, g * scale, u * scale, limit, alpha, beta)
                               : g * scale;
        }
    }
}

#define MI4_ROWS_LOCALS                                                                            \
    __local float4 xs[MI4_ROWS_XBLOCK / 32 * MI4_ROWS_PIECE / 4];                                  \
    __local float sums[2 * MI4_GROUP]

/* zeros: [E, 2N, K/group] bytes, or a literal 0 (zero point 8) */
void mi4_w13_rows(__local float4 *xs, __local float *sums, __global const uchar *zeros,
                  MI4_W13_PARAMS)
{
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0];
    float scale = weight_on_input ? topk_weights[slot] : 1.0f;
    mi4_expert_rows w = mi4_expert_rows_at(packed, scales, zeros, expert, 2 * N, K,
                                           N, 2, group_size, scales_bf16);
    mi4_rows_walk(&w, xs, sums, hidden, dtype, (long)(slot / topk) * K, team, scale, act_kind,
                  limit, alpha, beta, act_out, (long)slot * N);
}

void mi4_w2_rows(__local float4 *xs, __local float *sums, __global const uchar *zeros,
                 MI4_W2_PARAMS)
{
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), 1, &expert, &row0))
        return; /* the whole work-group */
    int slot = sorted_slots[row0];
    float scale = weight_on_input ? 1.0f : topk_weights[slot];
    mi4_expert_rows w = mi4_expert_rows_at(packed, scales, zeros, expert, K, N, K,
                                           1, group_size, scales_bf16);
    mi4_rows_walk(&w, xs, sums, (__global const uchar *)act, MI4_DT_F32, (long)slot * N, team,
                  scale, 0, 0.0f, 0.0f, 0.0f, slot_out, (long)slot * K);
}

/* Without zero points (the GEMMs' arguments) and with them (one more, last). */
#define MI4_ROWS_ENTRY(name, body, PARAMS, ARGS)                                                  \
    __kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void name(     \
        PARAMS)                                                                                   \
    {                                                                                             \
        MI4_ROWS_LOCALS;                                                                          \
        body(xs, sums, 0, ARGS);                                                                  \
    }
#define MI4_ROWS_ENTRY_ZP(name, body, PARAMS, ARGS)                                               \
    __kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void name(     \
        PARAMS, __global const uchar *zeros)                                                      \
    {                                                                                             \
        MI4_ROWS_LOCALS;                                                                          \
        body(xs, sums, zeros, ARGS);                                                              \
    }

MI4_ROWS_ENTRY(mi4_w13_gemv_rows, mi4_w13_rows, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_ROWS_ENTRY(mi4_w2_gemv_rows, mi4_w2_rows, MI4_W2_PARAMS, MI4_W2_ARGS)
MI4_ROWS_ENTRY_ZP(mi4_w13_gemv_rows_zp, mi4_w13_rows, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_ROWS_ENTRY_ZP(mi4_w2_gemv_rows_zp, mi4_w2_rows, MI4_W2_PARAMS, MI4_W2_ARGS)
