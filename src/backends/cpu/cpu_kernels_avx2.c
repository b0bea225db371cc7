/* AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c, called only
 * after a run-time feature check). One 32-byte load holds 8 rows x 8
 * columns; nibble c < 7 of every row is isolated with one AND against
 * (15 << 4c) and converted to float exactly, the top one with one shift,
 * and the scaled input row (cpu_scalar_io.h) makes each product code * x. Accumulators are per
 * (token, c mod S) so that at least 8 independent FMA chains run even for
 * one token. */
#include <immintrin.h>

#include "backends/cpu/cpu_avx2_io.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_scalar_io.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define MAX_BLOCK_TOKENS 8

static ALWAYS_INLINE __m256 nibble_as_float(__m256i word, int c)
{
    __m256i q = c == 7 ? _mm256_srli_epi32(word, 28)
                       : _mm256_and_si256(word, _mm256_set1_epi32((int)(15u << (4 * c))));
    return _mm256_cvtepi32_ps(q);
}

static ALWAYS_INLINE __m256 load_scales(const uint8_t *p, int bf16)
{
    __m128i bits = _mm_loadu_si128((const __m128i *)p);
    if (bf16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
    return _mm256_cvtph_ps(bits);
}

/* Tokens [t_first, t_first + TB) of the job; S accumulator sets per token. */
static ALWAYS_INLINE void tile_tokens(const mi4_cpu_tile_job *job, int t_first, const int TB,
                                      const int S)
{
    const mi4_cpu_pack_geometry *geo = job->geo;
    const float *rows[MAX_BLOCK_TOKENS];
    const float *sums[MAX_BLOCK_TOKENS];
    for (int t = 0; t < TB; t++) {
        rows[t] = job->x[t_first + t];
        sums[t] = job->xsum[t_first + t];
    }
    __m256 y[MAX_BLOCK_TOKENS];
    for (int t = 0; t < TB; t++)
        y[t] = _mm256_setzero_ps();
    for (int g = 0; g < geo->num_groups; g++) {
        __m256 acc[8][MAX_BLOCK_TOKENS];
        for (int s = 0; s < S; s++)
            for (int t = 0; t < TB; t++)
                acc[s][t] = _mm256_setzero_ps();
        const uint8_t *block = job->tile + (size_t)g * geo->group_blocks * MI4_CPU_BLOCK_BYTES;
        const size_t column0 = (size_t)g * geo->group_blocks * MI4_CPU_BLOCK_COLUMNS;
        for (int b = 0; b < geo->group_blocks; b++) {
            /* pull lines MI4_CPU_PREFETCH_BYTES ahead (past the tile's end
             * is the next tile, usually the next one read), whatever the
             * token count: the first pass over a tile streams it from DRAM */
            if ((b & 1) == 0)
                _mm_prefetch((const char *)(block + (size_t)b * MI4_CPU_BLOCK_BYTES +
                                            MI4_CPU_PREFETCH_BYTES),
                             _MM_HINT_T0);
            __m256i word =
                _mm256_load_si256((const __m256i *)(block + (size_t)b * MI4_CPU_BLOCK_BYTES));
            const size_t column = column0 + (size_t)b * MI4_CPU_BLOCK_COLUMNS;
            for (int c = 0; c < 8; c++) {
                __m256 q = nibble_as_float(word, c);
                for (int t = 0; t < TB; t++)
                    acc[c % S][t] = _mm256_fmadd_ps(q, _mm256_broadcast_ss(rows[t] + column + c),
                                                    acc[c % S][t]);
            }
        }
        __m256 scale = load_scales(
            job->tile + geo->scales_offset + (size_t)g * MI4_CPU_TILE_ROWS * 2, job->scales_bf16);
        __m128i zero_bytes = _mm_loadl_epi64(
            (const __m128i *)(job->tile + geo->zeros_offset + (size_t)g * MI4_CPU_TILE_ROWS));
        __m256 zero_scale =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(zero_bytes)), scale);
        for (int t = 0; t < TB; t++) {
            __m256 v = acc[0][t];
            for (int s = 1; s < S; s++)
                v = _mm256_add_ps(v, acc[s][t]);
            y[t] = _mm256_fmadd_ps(v, scale, y[t]);
            y[t] = _mm256_fnmadd_ps(zero_scale, _mm256_broadcast_ss(sums[t] + g), y[t]);
        }
    }
    for (int t = 0; t < TB; t++)
        _mm256_storeu_ps(job->y + (size_t)(t_first + t) * MI4_CPU_TILE_ROWS, y[t]);
}

static void tile_1(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 1, 8); }
static void tile_2(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 2, 4); }
static void tile_3(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 3, 3); }
static void tile_4(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 4, 2); }
static void tile_5(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 5, 2); }
static void tile_6(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 6, 2); }
static void tile_7(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 7, 1); }
static void tile_8(const mi4_cpu_tile_job *job, int t) { tile_tokens(job, t, 8, 1); }

static void avx2_tile(const mi4_cpu_tile_job *job)
{
    static void (*const by_count[MAX_BLOCK_TOKENS + 1])(const mi4_cpu_tile_job *, int) = {
        NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6, tile_7, tile_8
    };
    int t = 0;
    for (; t + MAX_BLOCK_TOKENS <= job->tokens; t += MAX_BLOCK_TOKENS)
        tile_8(job, t);
    if (t < job->tokens)
        by_count[job->tokens - t](job, t);
}

static const float column_scales[8] = { 1.0f,     0x1p-4f,  0x1p-8f,  0x1p-12f,
                                        0x1p-16f, 0x1p-20f, 0x1p-24f, 1.0f };

void mi4_cpu_avx2_scale_row(moeint4_dtype dtype, const void *src, int count, float factor,
                            int group_columns, float *dst, float *sums)
{
    const __m256 scales = _mm256_loadu_ps(column_scales);
    const __m256 f = _mm256_set1_ps(factor);
    int num_groups = (count + group_columns - 1) / group_columns;
    for (int g = 0; g < num_groups; g++) {
        int k = g * group_columns;
        int end = k + group_columns < count ? k + group_columns : count;
        __m256 sum = _mm256_setzero_ps();
        for (; k + 8 <= end; k += 8) {
            __m256 v = _mm256_mul_ps(mi4_avx2_load8(dtype, src, k), f);
            sum = _mm256_add_ps(sum, v);
            _mm256_storeu_ps(dst + k, _mm256_mul_ps(v, scales));
        }
        float tail = 0.0f;
        for (; k < end; k++) { /* only per-channel rows with count % 8 != 0 */
            float v = mi4_cpu_load_value(dtype, src, (size_t)k) * factor;
            dst[k] = v * column_scales[k % 8];
            tail += v;
        }
        sums[g] = mi4_avx2_sum8(sum) + tail;
    }
    for (int k = count; k % 8 != 0; k++)
        dst[k] = 0.0f;
}

void mi4_cpu_avx2_store_row(moeint4_dtype dtype, const float *src, int count, void *dst)
{
    int k = 0;
    if (dtype == MOEINT4_DTYPE_F16) {
        for (; k + 8 <= count; k += 8)
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + k),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT));
    } else if (dtype == MOEINT4_DTYPE_F32) {
        for (; k + 8 <= count; k += 8)
            _mm256_storeu_ps((float *)dst + k, _mm256_loadu_ps(src + k));
    }
    for (; k < count; k++)
        mi4_cpu_store_value(dtype, dst, (size_t)k, src[k]);
}

/* e^x for x in [-87, 88] (clamped): x = n ln2 + r, |r| <= ln2/2, e^r by a
 * degree-7 Taylor polynomial (truncation < 1e-8 relative), 2^n through the
 * exponent bits. Within a few ulp of expf. */
static ALWAYS_INLINE __m256 exp_ps(__m256 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

/* v * sigmoid(k * v) = v / (1 + e^(-k v)) */
static ALWAYS_INLINE __m256 swish_ps(__m256 v, __m256 k)
{
    __m256 e = exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), k), v));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

void mi4_cpu_avx2_activate(const mi4_cpu_activation *act, float *gate, const float *up, int count)
{
    if (act->kind == MOEINT4_ACTIVATION_GELU) { /* erf: libm */
        for (int i = 0; i < count; i++)
            gate[i] = mi4_cpu_activate(act, gate[i], up[i]);
        return;
    }
    const int clamp = act->kind == MOEINT4_ACTIVATION_SWIGLU_CLAMP;
    const __m256 k = _mm256_set1_ps(clamp ? act->alpha : 1.0f);
    const __m256 limit = _mm256_set1_ps(act->limit);
    const __m256 beta = _mm256_set1_ps(act->beta);
    for (int i = 0; i < count; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i);
        __m256 u = _mm256_loadu_ps(up + i);
        if (clamp) {
            g = _mm256_min_ps(g, limit);
            u = _mm256_min_ps(_mm256_max_ps(u, _mm256_sub_ps(_mm256_setzero_ps(), limit)), limit);
            u = _mm256_add_ps(u, beta);
        }
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(swish_ps(g, k), u));
    }
}

static const mi4_cpu_kernels avx2_kernels = {
    .name = "avx2",
    .tile = avx2_tile,
    .scale_row = mi4_cpu_avx2_scale_row,
    .store_row = mi4_cpu_avx2_store_row,
    .activate = mi4_cpu_avx2_activate,
    .pack_block = mi4_cpu_pack_block_scaled,
    .row_block_floats = MI4_CPU_BLOCK_COLUMNS,
};

const mi4_cpu_kernels *mi4_cpu_kernels_avx2(void) { return &avx2_kernels; }
