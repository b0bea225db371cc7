/* AVX-512 kernels (compiled with -mavx512f/bw/dq/vl -mfma -mf16c, called only
 * after a run-time feature check). The tile layout is the AVX2 one
 * (cpu_repack.h); a 16-lane register holds rows 0-7 of one tile in its low
 * half and rows 0-7 of a second tile in its high half, 8 columns each, so the
 * scaled input value of a column is a single broadcast for all 16 lanes.
 * Per 16 weights that is one AND, one int->float and one FMA, against the
 * same three per 8 weights in the AVX2 kernel (Intel's ports 0 and 5 both
 * take 512-bit FMAs). The pair is gate and up tile t in phase 2 of the
 * forward, tiles t and t + 1 in phase 3 (t and t + half the tiles when
 * phase 3 runs by expert, for decode).
 *
 * Every lane does the same operations whichever tile shares its register,
 * so a lone tile (run as a pair with itself) gets the same bits as in a
 * pair. The row scaling, output rounding and activation are the AVX2 ones. */
#include <immintrin.h>

#include "backends/cpu/cpu_avx512_tile.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_scalar_io.h"

#define ALWAYS_INLINE MI4_AVX512_INLINE
/* Tokens per register block. Measured per core (bench_cpu_kernels, GCC 12):
 * blocks of 8 run at ~125 GFLOP/s; 12 or 16 (registers enough on paper) at
 * 66-96, GCC shuffling the accumulator array between registers. */
#define MAX_BLOCK_TOKENS MI4_AVX512_BLOCK_TOKENS

static ALWAYS_INLINE __m512 nibble_as_float(__m512i word, int c)
{
    __m512i q = c == 7 ? _mm512_srli_epi32(word, 28)
                       : _mm512_and_si512(word, _mm512_set1_epi32((int)(15u << (4 * c))));
    return _mm512_cvtepi32_ps(q);
}

/* Tokens [t_first, t_first + TB) of jobs a and b (b may be a); S
 * accumulator sets per token keep >= 8 FMA chains in flight. */
static ALWAYS_INLINE void pair_tokens(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b,
                                      int t_first, const int TB, const int S)
{
    const mi4_cpu_pack_geometry *geo = a->geo;
    const float *rows[MAX_BLOCK_TOKENS];
    const float *sums[MAX_BLOCK_TOKENS];
    __attribute__((aligned(64))) float y[MAX_BLOCK_TOKENS][16];
    mi4_avx512_block_start(a, t_first, TB, rows, sums, y);
    const size_t group_bytes = (size_t)geo->group_blocks * MI4_CPU_BLOCK_BYTES;
    for (int g = 0; g < geo->num_groups; g++) {
        __m512 acc[8][MAX_BLOCK_TOKENS];
        mi4_avx512_clear(acc, S, TB);
        const uint8_t *block_a = a->tile + (size_t)g * group_bytes;
        const uint8_t *block_b = b->tile + (size_t)g * group_bytes;
        const size_t column0 = (size_t)g * geo->group_blocks * MI4_CPU_BLOCK_COLUMNS;
        for (int k = 0; k < geo->group_blocks; k++) {
            const size_t at = (size_t)k * MI4_CPU_BLOCK_BYTES;
            /* one line per 2 blocks, whatever the token count: the first
             * pass over a tile pair streams it from DRAM (bf16 table, Qwen3
             * M = 64 forward on one core: 30-31 -> 23 ms of CPU) */
            if ((k & 1) == 0) {
                _mm_prefetch((const char *)(block_a + at + MI4_CPU_PREFETCH_BYTES), _MM_HINT_T0);
                _mm_prefetch((const char *)(block_b + at + MI4_CPU_PREFETCH_BYTES), _MM_HINT_T0);
            }
            __m512i word = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_load_si256((const __m256i *)(block_a + at))),
                _mm256_load_si256((const __m256i *)(block_b + at)), 1);
            const size_t column = column0 + (size_t)k * MI4_CPU_BLOCK_COLUMNS;
            for (int c = 0; c < 8; c++) {
                __m512 q = nibble_as_float(word, c);
                for (int t = 0; t < TB; t++)
                    acc[c % S][t] =
                        _mm512_fmadd_ps(q, _mm512_set1_ps(rows[t][column + c]), acc[c % S][t]);
            }
        }
        mi4_avx512_group_end(a, b, g, 0.0f, acc, S, sums, TB, y);
    }
    mi4_avx512_store_pair(a, b, t_first, TB, y);
}

MI4_AVX512_BLOCK(1, 8)
MI4_AVX512_BLOCK(2, 4)
MI4_AVX512_BLOCK(3, 3)
MI4_AVX512_BLOCK(4, 2)
MI4_AVX512_BLOCK(5, 2)
MI4_AVX512_BLOCK(6, 2)
MI4_AVX512_BLOCK(7, 2)
MI4_AVX512_BLOCK(8, 1)

static void avx512_tile_pair(const mi4_cpu_tile_job *a, const mi4_cpu_tile_job *b)
{
    static const mi4_avx512_block_fn by_count[MAX_BLOCK_TOKENS + 1] = { NULL,    block_1, block_2,
                                                                        block_3, block_4, block_5,
                                                                        block_6, block_7, block_8 };
    mi4_avx512_run_blocks(a, b, by_count);
}

static void avx512_tile(const mi4_cpu_tile_job *job) { avx512_tile_pair(job, job); }

/* Conversions and the activation are memory or latency bound at these
 * sizes: the AVX2 table's. */
static const mi4_cpu_kernels avx512_kernels = {
    .name = "avx512",
    .tile = avx512_tile,
    .tile_pair = avx512_tile_pair,
    .scale_row = mi4_cpu_avx2_scale_row,
    .store_row = mi4_cpu_avx2_store_row,
    .activate = mi4_cpu_avx2_activate,
    .pack_block = mi4_cpu_pack_block_scaled,
    .row_block_floats = MI4_CPU_BLOCK_COLUMNS,
};

const mi4_cpu_kernels *mi4_cpu_kernels_avx512(void) { return &avx512_kernels; }
