/* Int4 grouped GEMMs on the XPU layout. Weights: packed [E, OUT, IN/2] bytes
 * (low nibble = even column); scales [E, OUT, IN/group] as f16 or bf16 bits;
 * value = (code - zero) * scale, zero = 8 (GPTQ symmetric, uint4b8) or, in
 * the _zp kernels (GPTQ asymmetric, AWQ), zeros [E, OUT, IN/group] bytes.
 * Each kernel body takes its zero points as a pointer that the symmetric
 * entries pass as a literal 0, so after inlining their code is what it was
 * without zero points (the constant 8 folds into the decode).
 *
 * A work-group of MI4_GROUP work-items owns one tile of sorted slots of one
 * expert (mi4_find_tile: the routing's tile list; groups past its end
 * return at once): up to MI4_TILE_ROWS slots for the GEMMs, one slot for
 * the GEMVs the host launches on one-token chunks. It covers MI4_GROUP /
 * team output columns: each team of `team` work-items (the host's choice,
 * a power of two from 4 to 32, see mi4_xpu_gemm_team) walks one weight row
 * (w13: the gate row and the up row) with neighbouring work-items reading
 * neighbouring 16-byte pieces of 32 codes, MI4_AHEAD pieces (and their
 * scales) loaded per work-item before any is used. The tile's activations
 * are staged once per work-group into local memory as f32 (in blocks of
 * MI4_XBLOCK values, interleaved so that a team's reads hit distinct banks:
 * MI4_X_INTERLEAVE), so every team reads them from there as float4. Codes
 * become floats without an int-to-float conversion (2^23 + code is exact
 * as a float: OR the code into 2^23's bits). Each 32-code piece is added in
 * a fixed tree, scaled once by its group's scale (group sizes are multiples
 * of 32 on this path) and accumulated in f32; one local-memory reduction
 * per row adds the team's sums in lane order (work-item r % team of the
 * team finishes row r). Rows whose length or group size is not a multiple
 * of 32 codes, or weights not 16-byte aligned, take the same path one
 * 32-bit word (8 codes) at a time. Assignment and order are fixed, so
 * results are deterministic. Words are read little-endian (Intel GPUs,
 * NVIDIA GPUs, PoCL on x86). Only OpenCL C 1.2: local memory and barriers,
 * no sub-groups. Measured on the H200 only (bench/results/xpu-2026-12-01.md). */

#define MI4_ROUTE_END(route, num_local, e) ((route)[(num_local) + (e) + 1])
#define MI4_XBLOCK 4096 /* f32 values of local memory: staged activations, then the sums */
#ifndef MI4_AHEAD /* MOEINT4_XPU_BUILD_OPTIONS may set it (bench) */
#define MI4_AHEAD 4
#endif
/* Where the 16-byte pieces' activations lie in local memory (vec path):
 * float4 s (0..7) of piece p at s * pieces + p, so the work-items of a team,
 * which read neighbouring pieces, read neighbouring float4 at each step.
 * Piece-major order (8 p + s) puts all of a team's reads of one step 128
 * bytes apart, in the same four banks: a team-wide conflict on every read
 * (on the H200 the GEMVs ran 1.6-2.9x slower in that order, 23852b9).
 * MOEINT4_XPU_BUILD_OPTIONS=-DMI4_X_INTERLEAVE=0 gives piece-major. */
#ifndef MI4_X_INTERLEAVE
#define MI4_X_INTERLEAVE 1
#endif
#if MI4_X_INTERLEAVE
#define MI4_PIECE_AT(p, pieces) (p)
#define MI4_PIECE_STRIDE(pieces) (pieces)
#define MI4_CODE_AT(k, pieces) (((((k) >> 2) & 7) * (pieces) + ((k) >> 5)) * 4 + ((k) & 3))
#else
#define MI4_PIECE_AT(p, pieces) (8 * (p))
#define MI4_PIECE_STRIDE(pieces) 1
#define MI4_CODE_AT(k, pieces) (k)
#endif
#define MI4_MAGIC 0x4B000000u /* 2^23 as float bits */

/* The zero point of (row, group) as a float: 8 without zero points. */
float mi4_load_zero(__global const uchar *zeros, long index)
{
    return zeros ? (float)zeros[index] : 8.0f;
}

/* (code - zero) of nibble i of word, exact (2^23 + code - (2^23 + zero)) */
#define MI4_CODE(word, i, zero)                                                                    \
    (as_float((((word) >> (4 * (i))) & 15u) | MI4_MAGIC) - (8388608.0f + (zero)))

/* sum over the 8 codes of word of (code - zero) * x, x = a then b, in a
 * fixed order */
float mi4_dot_word_values_z(uint word, float4 a, float4 b, float zero)
{
    return (MI4_CODE(word, 0, zero) * a.x + MI4_CODE(word, 1, zero) * a.y +
            MI4_CODE(word, 2, zero) * a.z + MI4_CODE(word, 3, zero) * a.w) +
           (MI4_CODE(word, 4, zero) * b.x + MI4_CODE(word, 5, zero) * b.y +
            MI4_CODE(word, 6, zero) * b.z + MI4_CODE(word, 7, zero) * b.w);
}

float mi4_dot_word_values(uint word, float4 a, float4 b)
{
    return mi4_dot_word_values_z(word, a, b, 8.0f);
}

/* 2^23 + zero 16^i: what a code at nibble i, read where it stands as the
 * float 2^23 + 16^i code, has above 16^i (code - zero); exact for zeros up
 * to 16 (16^5 = 2^20 < 2^23) */
#define MI4_CODE_OFFSET_Z(i, zero) (8388608.0f + (zero) * (float)(1u << (4 * (i))))
#define MI4_CODE_OFFSET(i) MI4_CODE_OFFSET_Z(i, 8.0f)

/* Codes in place (MOEINT4_XPU_BUILD_OPTIONS=-DMI4_NIBBLES_IN_PLACE=1):
 * nibble i < 5 of a word is masked where it stands, 2^23 + 16^i code as a
 * float, and 2^23 + 16^i 8 subtracted (exact: 16^i (code - 8)); nibbles
 * 5-7 likewise from the word shifted right once by 20. The staged
 * activation of position p in its word is scaled by 16^-(p < 5 ? p : p - 5)
 * (MI4_STAGED), so each product is (code - 8) x exactly as before: the
 * same bits, unless a scaled activation falls below f32's normal range
 * (|x| < 2^-110) and the device flushes it. 25 instead of 31 integer and
 * float operations per word (no shift per nibble). Staged paths only (the
 * walking GEMVs' global activations use mi4_dot_word_values). */
#define MI4_CODE_IN_PLACE_Z(word, i, zero)                                                         \
    (as_float(((word) & (15u << (4 * (i)))) | MI4_MAGIC) - MI4_CODE_OFFSET_Z(i, zero))
#define MI4_CODE_IN_PLACE(word, i) MI4_CODE_IN_PLACE_Z(word, i, 8.0f)
/* 16^-(p < 5 ? p : p - 5) for position p of a word (the one-token GEMVs of
 * gemv_lanes.cl and gemv_rows.cl always decode in place) */
float mi4_staged_scale(int p) { return as_float((uint)(127 - 4 * (p < 5 ? p : p - 5)) << 23); }
#ifndef MI4_NIBBLES_IN_PLACE
#define MI4_NIBBLES_IN_PLACE 0
#endif
#if MI4_NIBBLES_IN_PLACE
#define MI4_STAGED(value, k) ((value) * mi4_staged_scale((k) & 7))

float mi4_dot_word(uint word, __local const float4 *x, int stride, float zero)
{
    float4 a = x[0], b = x[stride];
    uint high = word >> 20;
    return (MI4_CODE_IN_PLACE_Z(word, 0, zero) * a.x + MI4_CODE_IN_PLACE_Z(word, 1, zero) * a.y +
            MI4_CODE_IN_PLACE_Z(word, 2, zero) * a.z + MI4_CODE_IN_PLACE_Z(word, 3, zero) * a.w) +
           (MI4_CODE_IN_PLACE_Z(word, 4, zero) * b.x + MI4_CODE_IN_PLACE_Z(high, 0, zero) * b.y +
            MI4_CODE_IN_PLACE_Z(high, 1, zero) * b.z + MI4_CODE_IN_PLACE_Z(high, 2, zero) * b.w);
}
#else
#define MI4_STAGED(value, k) (value)

/* The same with x from local memory (two float4, `stride` float4 apart). */
float mi4_dot_word(uint word, __local const float4 *x, int stride, float zero)
{
    return mi4_dot_word_values_z(word, x[0], x[stride], zero);
}
#endif

/* The 32 codes of a piece against its activations: the piece's eight
 * float4 lie `stride` float4 apart (see mi4_rows_dot). */
float mi4_dot_piece_z(uint4 piece, __local const float4 *x, int stride, float zero)
{
    return (mi4_dot_word(piece.x, x, stride, zero) +
            mi4_dot_word(piece.y, x + 2 * stride, stride, zero)) +
           (mi4_dot_word(piece.z, x + 4 * stride, stride, zero) +
            mi4_dot_word(piece.w, x + 6 * stride, stride, zero));
}

float mi4_dot_piece(uint4 piece, __local const float4 *x, int stride)
{
    return mi4_dot_piece_z(piece, x, stride, 8.0f);
}

/* The group of code k: a shift for power-of-two group sizes (integer
 * division costs tens of instructions). */
int mi4_group_of(int k, int group_size, int group_shift)
{
    return group_shift >= 0 ? k >> group_shift : k / group_size;
}

/* log2 of a power-of-two group size, else -1 (mi4_group_of divides) */
int mi4_group_shift(int group_size)
{
    return (group_size & (group_size - 1)) == 0 ? 31 - (int)clz(group_size) : -1;
}

/* One expert's rows as the one-token GEMVs of gemv_lanes.cl and
 * gemv_rows.cl walk them: rows of `pieces` 16-byte pieces, w13 (halves 2)
 * with the up row `cols` rows after the gate row. */
typedef struct mi4_expert_rows {
    __global const uint4 *packed; /* the expert's first row */
    __global const ushort *scales;
    __global const uchar *zeros; /* 0: zero point 8 */
    int pieces, groups, group_size, group_shift, cols, halves, scales_bf16;
} mi4_expert_rows;

mi4_expert_rows mi4_expert_rows_at(__global const uchar *packed, __global const ushort *scales,
                                   __global const uchar *zeros, int expert, int out_rows, int in,
                                   int cols, int halves, int group_size, int scales_bf16)
{
    mi4_expert_rows w;
    w.pieces = in / 32;
    w.groups = in / group_size;
    w.group_size = group_size;
    w.group_shift = mi4_group_shift(group_size);
    w.packed = (__global const uint4 *)packed + (long)expert * out_rows * w.pieces;
    w.scales = scales + (long)expert * out_rows * w.groups;
    w.zeros = zeros ? zeros + (long)expert * out_rows * w.groups : 0;
    w.cols = cols;
    w.halves = halves;
    w.scales_bf16 = scales_bf16;
    return w;
}

/* MOEINT4_XPU_BUILD_OPTIONS=-DMI4_PRELOAD=1: each work-item issues the
 * loads of its first batch of a block's weights before the work-group
 * stages that block's activations, so the staging's global reads and its
 * barrier overlap the first weight bytes instead of preceding them (the
 * weights do not depend on the activations). Off, the code is as it was. */
#ifndef MI4_PRELOAD
#define MI4_PRELOAD 0
#endif

/* Issues the loads of one batch of a work-item's pieces: MI4_AHEAD pieces
 * `team` apart from piece c (clamped to the last piece: valid addresses,
 * results unused past the end) of each row and their scales, so that all of
 * them are in flight before any is used. */
void mi4_load_batch(__global const uint4 *p0, __global const uint4 *p1,
                    __global const ushort *s0, __global const ushort *s1,
                    __global const uchar *z0, __global const uchar *z1, int scales_bf16,
                    int group_size, int group_shift, int kb0, int c, int team, int pieces,
                    int halves, uint4 *g, uint4 *u, float *sg, float *su, float *zg, float *zu)
{
#pragma unroll
    for (int a = 0; a < MI4_AHEAD; ++a) {
        int ca = min(c + a * team, pieces - 1);
        int group = mi4_group_of(kb0 + 32 * ca, group_size, group_shift);
        g[a] = p0[ca];
        sg[a] = mi4_load_scale(s0, scales_bf16, group);
        u[a] = halves == 2 ? p1[ca] : g[a];
        su[a] = halves == 2 ? mi4_load_scale(s1, scales_bf16, group) : 0.0f;
        zg[a] = mi4_load_zero(z0, group);
        zu[a] = halves == 2 ? mi4_load_zero(z1, group) : 8.0f;
    }
}

/* Multiplies a loaded batch with the staged activations into acc. */
void mi4_use_batch(__local const float4 *xs, int block, int c, int team, int pieces,
                   int max_rows, int rows, int halves, const uint4 *g, const uint4 *u,
                   const float *sg, const float *su, const float *zg, const float *zu, float *acc)
{
#pragma unroll
    for (int a = 0; a < MI4_AHEAD; ++a) {
        int ca = c + a * team;
        if (ca < pieces) {
            __local const float4 *x = xs + MI4_PIECE_AT(ca, block / 32);
            int stride = MI4_PIECE_STRIDE(block / 32);
#pragma unroll
            for (int r = 0; r < max_rows; ++r)
                if (r < rows) {
                    __local const float4 *xr = x + r * (block / 4);
                    acc[r] += mi4_dot_piece_z(g[a], xr, stride, zg[a]) * sg[a];
                    if (halves == 2)
                        acc[MI4_TILE_ROWS + r] +=
                            mi4_dot_piece_z(u[a], xr, stride, zu[a]) * su[a];
                }
        }
    }
}

/* One weight row (or two: w13's gate and up) of a team against the staged
 * activations of one block. Codes [kb0, kb0 + kbn) of the rows; row r of
 * the tile at xs + r * block / 4. max_rows is a constant at each call, so
 * the row loops unroll and acc stays in registers. (Loading the next
 * batch before using the current one, with 2 or 4 pieces per batch, was
 * slower on the H200: more registers, fewer work-groups per SM.) */
void mi4_block(__local const float4 *xs, int block, int kb0, int kbn, int max_rows, int rows,
               int halves, __global const uchar *w0, __global const uchar *w1,
               __global const ushort *s0, __global const ushort *s1, __global const uchar *z0,
               __global const uchar *z1, int scales_bf16, int group_size, int vec, int team,
               int lane, int preloaded, const uint4 *first_g, const uint4 *first_u,
               const float *first_sg, const float *first_su, const float *first_zg,
               const float *first_zu, float *acc)
{
    int group_shift = mi4_group_shift(group_size);
    if (vec) { /* 16-byte pieces of 32 codes */
        __global const uint4 *p0 = (__global const uint4 *)w0 + kb0 / 32;
        __global const uint4 *p1 = (__global const uint4 *)w1 + kb0 / 32;
        int pieces = kbn / 32, step = team * MI4_AHEAD;
        uint4 g[MI4_AHEAD], u[MI4_AHEAD];
        float sg[MI4_AHEAD], su[MI4_AHEAD], zg[MI4_AHEAD], zu[MI4_AHEAD];
        for (int c = lane; c < pieces; c += step) {
            if (preloaded && c == lane) { /* the batch mi4_rows_dot loaded (MI4_PRELOAD) */
#pragma unroll
                for (int a = 0; a < MI4_AHEAD; ++a) {
                    g[a] = first_g[a];
                    u[a] = first_u[a];
                    sg[a] = first_sg[a];
                    su[a] = first_su[a];
                    zg[a] = first_zg[a];
                    zu[a] = first_zu[a];
                }
            } else {
                mi4_load_batch(p0, p1, s0, s1, z0, z1, scales_bf16, group_size, group_shift, kb0,
                               c, team, pieces, halves, g, u, sg, su, zg, zu);
            }
            mi4_use_batch(xs, block, c, team, pieces, max_rows, rows, halves, g, u, sg, su, zg,
                          zu, acc);
        }
        return;
    }
    /* one 32-bit word (8 codes) at a time; groups are multiples of 8 */
    __global const uint *q0 = (__global const uint *)w0 + kb0 / 8;
    __global const uint *q1 = (__global const uint *)w1 + kb0 / 8;
    int words = kbn / 8;
    for (int c = lane; c < words; c += team) {
        uint g = q0[c], u = halves == 2 ? q1[c] : g;
        int group = mi4_group_of(kb0 + 8 * c, group_size, group_shift);
        float sg = mi4_load_scale(s0, scales_bf16, group);
        float su = halves == 2 ? mi4_load_scale(s1, scales_bf16, group) : 0.0f;
        float zg = mi4_load_zero(z0, group), zu = halves == 2 ? mi4_load_zero(z1, group) : 8.0f;
        __local const float4 *x = xs + 2 * c;
#pragma unroll
        for (int r = 0; r < max_rows; ++r)
            if (r < rows) {
                acc[r] += mi4_dot_word(g, x + r * (block / 4), 1, zg) * sg;
                if (halves == 2)
                    acc[MI4_TILE_ROWS + r] += mi4_dot_word(u, x + r * (block / 4), 1, zu) * su;
            }
    }
}

/* The dot products of a team's row(s) with the tile's `rows` activation rows
 * (row r: `in` values at x + x_row[r] elements, of dtype): acc[h *
 * MI4_TILE_ROWS + r] for h < halves. Every work-item of the group calls it
 * (it stages activations between barriers); an inactive team (a column past
 * the end) reads no weights. */
void mi4_rows_dot(__local float4 *xs, __global const uchar *x, int dtype, const long *x_row,
                  int max_rows, int rows, int in, int halves, __global const uchar *w0,
                  __global const uchar *w1, __global const ushort *s0, __global const ushort *s1,
                  __global const uchar *z0, __global const uchar *z1, int scales_bf16,
                  int group_size, int team, int lane, int active, float *acc)
{
    int vec = in % 32 == 0 && group_size % 32 == 0 && ((size_t)w0 & 15) == 0 &&
              ((size_t)w1 & 15) == 0;
    int block = rows == 1 ? MI4_XBLOCK : (MI4_XBLOCK / rows) & ~31;
    int lid = (int)get_local_id(0);
    __local float *xf = (__local float *)xs;
#pragma unroll
    for (int i = 0; i < 2 * MI4_TILE_ROWS; ++i)
        acc[i] = 0.0f;
    for (int kb0 = 0; kb0 < in; kb0 += block) {
        int kbn = min(block, in - kb0);
#if MI4_PRELOAD /* the first batch, before the staging */
        uint4 g[MI4_AHEAD], u[MI4_AHEAD];
        float sg[MI4_AHEAD], su[MI4_AHEAD], zg[MI4_AHEAD], zu[MI4_AHEAD];
        int preloaded = vec && active && lane < kbn / 32;
        if (preloaded)
            mi4_load_batch((__global const uint4 *)w0 + kb0 / 32,
                           (__global const uint4 *)w1 + kb0 / 32, s0, s1, z0, z1, scales_bf16,
                           group_size, mi4_group_shift(group_size), kb0, lane, team, kbn / 32,
                           halves, g, u, sg, su, zg, zu);
#define MI4_FIRST_BATCH preloaded, g, u, sg, su, zg, zu
#else /* no arrays: the SPIR-V is built at -O0, where unused ones stay private memory */
#define MI4_FIRST_BATCH 0, 0, 0, 0, 0, 0, 0
#endif
#pragma unroll
        for (int r = 0; r < MI4_TILE_ROWS; ++r)
            if (r < max_rows && r < rows)
                for (int k = lid; k < kbn; k += MI4_GROUP)
                    xf[r * block + (vec ? MI4_CODE_AT(k, block / 32) : k)] =
                        MI4_STAGED(mi4_load(x, dtype, x_row[r] + kb0 + k), k);
        barrier(CLK_LOCAL_MEM_FENCE);
        int span = active ? kbn : 0;
        if (max_rows == 1 || rows == 1)
            mi4_block(xs, block, kb0, span, 1, 1, halves, w0, w1, s0, s1, z0, z1, scales_bf16,
                      group_size, vec, team, lane, MI4_FIRST_BATCH, acc);
        else
            mi4_block(xs, block, kb0, span, max_rows, rows, halves, w0, w1, s0, s1, z0, z1,
                      scales_bf16, group_size, vec, team, lane, MI4_FIRST_BATCH, acc);
#undef MI4_FIRST_BATCH
        barrier(CLK_LOCAL_MEM_FENCE); /* all have read the block (xs is reused after) */
    }
}

/* Publishes every work-item's sums in local memory (over the staged
 * activations, which mi4_rows_dot is done with) for mi4_team_total. Every
 * work-item must call it. */
void mi4_team_store(__local float4 *xs, const float *acc, int max_rows, int rows, int halves)
{
    __local float *red = (__local float *)xs; /* 2 * MI4_TILE_ROWS * MI4_GROUP = MI4_XBLOCK */
    int lid = (int)get_local_id(0);
#pragma unroll
    for (int i = 0; i < 2 * MI4_TILE_ROWS; ++i)
        if (i / MI4_TILE_ROWS < halves && i % MI4_TILE_ROWS < max_rows && i % MI4_TILE_ROWS < rows)
            red[i * MI4_GROUP + lid] = acc[i];
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* The team's total of sum i (red: [sums][MI4_GROUP], one per work-item),
 * added in lane order. */
float mi4_lanes_total(__local const float *red, int i, int team, int lane)
{
    int at = i * MI4_GROUP + (int)get_local_id(0) - lane;
    float sum = 0.0f;
    for (int t = 0; t < team; ++t)
        sum += red[at + t];
    return sum;
}

/* The team's total of row r, half h (mi4_team_store's layout). */
float mi4_team_total(__local const float4 *xs, int h, int r, int team, int lane)
{
    return mi4_lanes_total((__local const float *)xs, h * MI4_TILE_ROWS + r, team, lane);
}

/* w13: gate = rows [0, N), up = rows [N, 2N); act_out[slot][n] (f32) =
 * act(gate, up). With weight_on_input the router weight scales x first,
 * which is the same as scaling both dot products. Tiles of max_rows slots
 * (a constant at each call). */
#define MI4_W13_PARAMS                                                                            \
    __global const int *route, int num_local, __global const int *sorted_slots,                  \
        __global const uchar *hidden, int dtype, __global const float *topk_weights,              \
        int weight_on_input, int topk, __global const uchar *packed,                              \
        __global const ushort *scales, int scales_bf16, int K, int N, int group_size,             \
        int act_kind, float limit, float alpha, float beta, int team, __global float *act_out
#define MI4_W13_ARGS                                                                              \
    route, num_local, sorted_slots, hidden, dtype, topk_weights, weight_on_input, topk, packed,   \
        scales, scales_bf16, K, N, group_size, act_kind, limit, alpha, beta, team, act_out

/* zeros: [E, 2N, K/group] bytes, or a literal 0 (zero point 8) */
void mi4_w13(__local float4 *xs, int max_rows, __global const uchar *zeros, MI4_W13_PARAMS)
{
    long x_row[MI4_TILE_ROWS];
    float acc[2 * MI4_TILE_ROWS];
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), max_rows, &expert, &row0))
        return; /* the whole work-group: no barrier is skipped by part of it */
    int rows = min(max_rows, MI4_ROUTE_END(route, num_local, expert) - row0);
    int lid = (int)get_local_id(0), lane = lid % team;
    int n = (int)get_group_id(0) * (MI4_GROUP / team) + lid / team;
    int active = n < N, col = active ? n : N - 1;
    int groups = K / group_size;
    __global const uchar *w_gate = packed + ((long)expert * 2 * N + col) * (K / 2);
    __global const uchar *w_up = w_gate + (long)N * (K / 2);
    __global const ushort *s_gate = scales + ((long)expert * 2 * N + col) * groups;
    __global const ushort *s_up = s_gate + (long)N * groups;
    __global const uchar *z_gate = zeros ? zeros + ((long)expert * 2 * N + col) * groups : 0;
    __global const uchar *z_up = zeros ? z_gate + (long)N * groups : 0;
#pragma unroll
    for (int r = 0; r < MI4_TILE_ROWS; ++r)
        x_row[r] = r < max_rows && r < rows ? (long)(sorted_slots[row0 + r] / topk) * K : 0;
    mi4_rows_dot(xs, hidden, dtype, x_row, max_rows, rows, K, 2, w_gate, w_up, s_gate, s_up,
                 z_gate, z_up, scales_bf16, group_size, team, lane, active, acc);
    mi4_team_store(xs, acc, max_rows, rows, 2);
    /* lane r % team finishes row r: teams have at least 4 lanes, tiles at
     * most 8 rows (two steps written out: as a loop over r, PoCL 3.1 ran
     * the body for rows past `rows`) */
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        int r = lane + i * team;
        if (active && r < rows) {
            int slot = sorted_slots[row0 + r];
            float scale = weight_on_input ? topk_weights[slot] : 1.0f;
            float gate = mi4_team_total(xs, 0, r, team, lane) * scale;
            float up = mi4_team_total(xs, 1, r, team, lane) * scale;
            act_out[(long)slot * N + n] = mi4_activate(act_kind, gate, up, limit, alpha, beta);
        }
    }
}

/* A kernel running body() on tiles of max_rows slots with the work-group's
 * local memory. The GEMMs take tiles of MI4_TILE_ROWS; the GEMVs (one token)
 * tiles of one slot: only the one-row code, so the compiler sizes
 * registers for it alone (on the H200 the GEMM kernel run on one-row
 * tiles took 1.5x the GEMV's time). */
/* A build for Intel GPUs may fix the SIMD width (-DMI4_SUB_GROUP_SIZE: the
 * ocloc binary for pvc, aot_compile.sh, and the SPIR-V module for EUs 16
 * lanes wide, spirv_module.cmake: IGC's own choice of SIMD32 there spills
 * thousands of bytes per thread). These kernels call no sub-group
 * function, so the width changes registers, not results; elsewhere
 * (PoCL, NVIDIA, a runtime build) the attribute is absent. clang's SPIR
 * target takes the attribute without defining the extension's macro. */
#if defined(MI4_SUB_GROUP_SIZE)
#define MI4_SIMD_WIDTH __attribute__((intel_reqd_sub_group_size(MI4_SUB_GROUP_SIZE)))
#else
#define MI4_SIMD_WIDTH
#endif

#define MI4_ENTRY(name, body, max_rows, PARAMS, ARGS)                                             \
    __kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void name(     \
        PARAMS)                                                                                   \
    {                                                                                             \
        __local float4 xs[MI4_XBLOCK / 4];                                                        \
        body(xs, max_rows, 0, ARGS);                                                              \
    }
/* The same with zero points: one more argument, the zeros, last. */
#define MI4_ENTRY_ZP(name, body, max_rows, PARAMS, ARGS)                                          \
    __kernel __attribute__((reqd_work_group_size(MI4_GROUP, 1, 1))) MI4_SIMD_WIDTH void name(     \
        PARAMS, __global const uchar *zeros)                                                      \
    {                                                                                             \
        __local float4 xs[MI4_XBLOCK / 4];                                                        \
        body(xs, max_rows, zeros, ARGS);                                                          \
    }

MI4_ENTRY(mi4_w13_gemm, mi4_w13, MI4_TILE_ROWS, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_ENTRY(mi4_w13_gemv, mi4_w13, 1, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_ENTRY_ZP(mi4_w13_gemm_zp, mi4_w13, MI4_TILE_ROWS, MI4_W13_PARAMS, MI4_W13_ARGS)
MI4_ENTRY_ZP(mi4_w13_gemv_zp, mi4_w13, 1, MI4_W13_PARAMS, MI4_W13_ARGS)

/* w2: slot_out[slot][k] (f32) = (router weight unless applied on the input)
 * * sum_n act[slot][n] * W2[e][k][n]. */
#define MI4_W2_PARAMS                                                                             \
    __global const int *route, int num_local, __global const int *sorted_slots,                  \
        __global const float *act, __global const float *topk_weights, int weight_on_input,      \
        __global const uchar *packed, __global const ushort *scales, int scales_bf16, int K,      \
        int N, int group_size, int team, __global float *slot_out
#define MI4_W2_ARGS                                                                               \
    route, num_local, sorted_slots, act, topk_weights, weight_on_input, packed, scales,          \
        scales_bf16, K, N, group_size, team, slot_out

/* zeros: [E, K, N/group] bytes, or a literal 0 (zero point 8) */
void mi4_w2(__local float4 *xs, int max_rows, __global const uchar *zeros, MI4_W2_PARAMS)
{
    long a_row[MI4_TILE_ROWS];
    float acc[2 * MI4_TILE_ROWS];
    int expert, row0;
    if (!mi4_find_tile(route, num_local, (int)get_group_id(1), max_rows, &expert, &row0))
        return; /* the whole work-group: no barrier is skipped by part of it */
    int rows = min(max_rows, MI4_ROUTE_END(route, num_local, expert) - row0);
    int lid = (int)get_local_id(0), lane = lid % team;
    int k = (int)get_group_id(0) * (MI4_GROUP / team) + lid / team;
    int active = k < K, col = active ? k : K - 1;
    int groups = N / group_size;
    __global const uchar *w = packed + ((long)expert * K + col) * (N / 2);
    __global const ushort *s = scales + ((long)expert * K + col) * groups;
    __global const uchar *z = zeros ? zeros + ((long)expert * K + col) * groups : 0;
#pragma unroll
    for (int r = 0; r < MI4_TILE_ROWS; ++r)
        a_row[r] = r < max_rows && r < rows ? (long)sorted_slots[row0 + r] * N : 0;
    mi4_rows_dot(xs, (__global const uchar *)act, MI4_DT_F32, a_row, max_rows, rows, N, 1, w, w, s,
                 s, z, z, scales_bf16, group_size, team, lane, active, acc);
    mi4_team_store(xs, acc, max_rows, rows, 1);
#pragma unroll
    for (int i = 0; i < 2; ++i) { /* as in mi4_w13 */
        int r = lane + i * team;
        if (active && r < rows) {
            int slot = sorted_slots[row0 + r];
            float scale = weight_on_input ? 1.0f : topk_weights[slot];
            slot_out[(long)slot * K + k] = mi4_team_total(xs, 0, r, team, lane) * scale;
        }
    }
}

MI4_ENTRY(mi4_w2_gemm, mi4_w2, MI4_TILE_ROWS, MI4_W2_PARAMS, MI4_W2_ARGS)
MI4_ENTRY(mi4_w2_gemv, mi4_w2, 1, MI4_W2_PARAMS, MI4_W2_ARGS)
MI4_ENTRY_ZP(mi4_w2_gemm_zp, mi4_w2, MI4_TILE_ROWS, MI4_W2_PARAMS, MI4_W2_ARGS)
MI4_ENTRY_ZP(mi4_w2_gemv_zp, mi4_w2, 1, MI4_W2_PARAMS, MI4_W2_ARGS)

/* out[m][k] = sum over the token's local slots, in slot order (deterministic);
 * a token with no local slot gets 0. Rounded once to dtype. */
__kernel void mi4_combine(__global const int *slot_expert, __global const float *slot_out,
                          int num_tokens, int topk, int K, int dtype,
                          __global const int *errors, int gated, __global uchar *output)
{
    int k = (int)get_global_id(0);
    int m = (int)get_global_id(1);
    if (k >= K || m >= num_tokens || (gated && mi4_errors_set(errors)))
        return;
    float sum = 0.0f;
    for (int j = 0; j < topk; ++j) {
        int slot = m * topk + j;
        if (slot_expert[slot] >= 0)
            sum += slot_out[(long)slot * K + k];
    }
    mi4_store(output, dtype, (long)m * K + k, sum);
}

/* A forward of several chunks combines into staging; this copies it to the
 * output once every chunk has run, unless (gated) the error record is set. */
__kernel void mi4_copy_out(__global const uint *staging, long words, __global const int *errors,
                           int gated, __global uint *output)
{
    long i = (long)get_global_id(0) + (long)get_global_id(1) * (long)get_global_size(0);
    if (i < words && !(gated && mi4_errors_set(errors)))
        output[i] = staging[i];
}
