/* Synthetic layers: random quantized projection stacks, packed exactly the way GPTQ
 * and AWQ checkpoints pack them. Written from the formats' definitions (see
 * moeint4_format in include/moeint4.h), independently of src/layout/. */
#include <stdlib.h>
#include <string.h>

#include "synth.h"

/* AWQ: nibble i of a packed word holds column 8*w + awq_column_of_nibble[i]. */
static const int awq_column_of_nibble[8] = { 0, 2, 4, 6, 1, 3, 5, 7 };

static size_t matrix_weights(const tk_matrix *m)
{
    return (size_t)m->num_experts * (size_t)m->out_features * (size_t)m->in_features;
}

static size_t matrix_group_entries(const tk_matrix *m)
{
    return (size_t)m->num_experts * (size_t)m->num_groups * (size_t)m->out_features;
}

int tk_matrix_alloc(tk_matrix *m, moeint4_format format, int zero_offset, int num_experts,
                    int in_features, int out_features, int group_size, moeint4_dtype scales_dtype,
                    int with_g_idx)
{
    memset(m, 0, sizeof *m);
    int gptq = format == MOEINT4_FORMAT_GPTQ_SYM || format == MOEINT4_FORMAT_GPTQ_ASYM;
    if (!gptq && format != MOEINT4_FORMAT_AWQ)
        return -1;
    if (num_experts < 1 || in_features < 8 || out_features < 8)
        return -1;
    if (group_size != -1 && (group_size < 1 || in_features % group_size != 0))
        return -1;
    if (gptq && in_features % 8 != 0)
        return -1;
    if (format != MOEINT4_FORMAT_GPTQ_SYM && out_features % 8 != 0)
        return -1;
    if (scales_dtype != MOEINT4_DTYPE_F16 && scales_dtype != MOEINT4_DTYPE_BF16)
        return -1;
    if (zero_offset != 0 && (format != MOEINT4_FORMAT_GPTQ_ASYM || zero_offset != 1))
        return -1;
    m->format = format;
    m->zero_offset = zero_offset;
    m->num_experts = num_experts;
    m->in_features = in_features;
    m->out_features = out_features;
    m->group_size = group_size;
    m->num_groups = group_size == -1 ? 1 : in_features / group_size;
    m->scales_dtype = scales_dtype;

    size_t weights = matrix_weights(m), groups = matrix_group_entries(m);
    m->codes = malloc(weights);
    m->zeros = malloc(groups);
    m->scales = malloc(groups * sizeof *m->scales);
    m->qweight = malloc(weights / 8 * sizeof *m->qweight);
    if (format != MOEINT4_FORMAT_GPTQ_SYM)
        m->qzeros = malloc(groups / 8 * sizeof *m->qzeros);
    if (!m->codes || !m->zeros || !m->scales || !m->qweight ||
        (format != MOEINT4_FORMAT_GPTQ_SYM && !m->qzeros) ||
        (with_g_idx && tk_matrix_add_g_idx(m) != 0)) {
        tk_matrix_free(m);
        return -1;
    }
    return 0;
}

int tk_matrix_add_g_idx(tk_matrix *m)
{
    int in = m->in_features, group = m->group_size == -1 ? in : m->group_size;
    free(m->g_idx);
    m->g_idx = malloc((size_t)m->num_experts * (size_t)in * sizeof *m->g_idx);
    if (!m->g_idx)
        return -1;
    for (int e = 0; e < m->num_experts; e++)
        for (int i = 0; i < in; i++)
            m->g_idx[(size_t)e * in + i] = i / group;
    return 0;
}

void tk_matrix_free(tk_matrix *m)
{
    free(m->codes);
    free(m->zeros);
    free(m->scales);
    free(m->qweight);
    free(m->qzeros);
    free(m->g_idx);
    memset(m, 0, sizeof *m);
}

/* Eight codes (one per byte, 0..15) -> one word, first code lowest. On
 * little-endian hosts the bytes are folded pairwise in a 64-bit register
 * (6x faster than the loop, which matters for 1.4 G weights). */
static uint32_t pack_eight(const uint8_t *codes)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, codes, sizeof v);
    v &= 0x0f0f0f0f0f0f0f0full;
    v = (v | (v >> 4)) & 0x00ff00ff00ff00ffull;
    v = (v | (v >> 8)) & 0x0000ffff0000ffffull;
    return (uint32_t)(v | (v >> 16));
#else
    uint32_t word = 0;
    for (int n = 0; n < 8; n++)
        word |= (uint32_t)(codes[n] & 15) << (4 * n);
    return word;
#endif
}

/* GPTQ qweight [E][IN/8][OUT]: word (e, b, o) = codes[e][o][8b .. 8b+7],
 * lowest nibble = lowest k. Tiled 64 rows x 8 words so that each codes row
 * is read a cache line at a time and each qweight row written in runs. */
static void pack_gptq_qweight(tk_matrix *m)
{
    int in = m->in_features, out = m->out_features, blocks = in / 8;
    for (int e = 0; e < m->num_experts; e++) {
        const uint8_t *codes = m->codes + (size_t)e * out * in;
        int32_t *qweight = m->qweight + (size_t)e * blocks * out;
        for (int o0 = 0; o0 < out; o0 += 64) {
            int o1 = o0 + 64 < out ? o0 + 64 : out;
            for (int b0 = 0; b0 < blocks; b0 += 8) {
                int b1 = b0 + 8 < blocks ? b0 + 8 : blocks;
                for (int o = o0; o < o1; o++)
                    for (int b = b0; b < b1; b++)
                        qweight[(size_t)b * out + o] =
                            (int32_t)pack_eight(codes + (size_t)o * in + 8 * b);
            }
        }
    }
}

/* AWQ qweight [E][IN][OUT/8]: nibble n of word (e, i, w) = codes[e][8w + order[n]][i]. */
static void pack_awq_qweight(tk_matrix *m)
{
    int in = m->in_features, out = m->out_features, words = out / 8;
    for (int e = 0; e < m->num_experts; e++) {
        const uint8_t *codes = m->codes + (size_t)e * out * in;
        int32_t *qweight = m->qweight + (size_t)e * in * words;
        for (int w0 = 0; w0 < words; w0 += 16) {
            int w1 = w0 + 16 < words ? w0 + 16 : words;
            for (int i = 0; i < in; i++)
                for (int w = w0; w < w1; w++) {
                    uint32_t word = 0;
                    for (int n = 0; n < 8; n++) {
                        size_t row = (size_t)(8 * w + awq_column_of_nibble[n]);
                        word |= (uint32_t)(codes[row * in + i] & 15) << (4 * n);
                    }
                    qweight[(size_t)i * words + w] = (int32_t)word;
                }
        }
    }
}

/* qzeros [E][G][OUT/8] from the stored zeros (natural minus zero_offset):
 * GPTQ lowest nibble first, AWQ in its interleaved order. */
static void pack_qzeros(tk_matrix *m)
{
    int awq = m->format == MOEINT4_FORMAT_AWQ;
    size_t words = matrix_group_entries(m) / 8;
    for (size_t w = 0; w < words; w++) {
        uint32_t word = 0;
        for (int n = 0; n < 8; n++) {
            int column = awq ? awq_column_of_nibble[n] : n;
            int stored = m->zeros[8 * w + (size_t)column] - m->zero_offset;
            word |= (uint32_t)(stored & 15) << (4 * n);
        }
        m->qzeros[w] = (int32_t)word;
    }
}

void tk_matrix_pack(tk_matrix *m)
{
    if (m->format == MOEINT4_FORMAT_AWQ)
        pack_awq_qweight(m);
    else
        pack_gptq_qweight(m);
    if (m->qzeros)
        pack_qzeros(m);
}

int tk_matrix_random(tk_matrix *m, moeint4_format format, int zero_offset, int num_experts,
                     int in_features, int out_features, int group_size, moeint4_dtype scales_dtype,
                     double scale_base, int with_g_idx, tk_rng *rng)
{
    if (!(scale_base > 0.0))
        return -1;
    if (tk_matrix_alloc(m, format, zero_offset, num_experts, in_features, out_features, group_size,
                        scales_dtype, with_g_idx) != 0)
        return -1;
    /* Codes: 16 uniform nibbles from each 64-bit draw, spread to bytes 8 at
     * a time (the order they land in is irrelevant: all are uniform). */
    size_t weights = matrix_weights(m), i = 0;
    const uint64_t low_nibbles = 0x0f0f0f0f0f0f0f0full;
    for (; i + 16 <= weights; i += 16) {
        uint64_t bits = tk_rng_next(rng);
        uint64_t even = bits & low_nibbles, odd = (bits >> 4) & low_nibbles;
        memcpy(m->codes + i, &even, 8);
        memcpy(m->codes + i + 8, &odd, 8);
    }
    for (uint64_t bits = tk_rng_next(rng); i < weights; i++, bits >>= 4)
        m->codes[i] = (uint8_t)(bits & 15);

    size_t groups = matrix_group_entries(m);
    for (size_t g = 0; g < groups; g++) {
        /* Zeros: the value subtracted. GPTQ_SYM: always 8. Asym: any stored
         * nibble, so real zeros span 0..15 (+1 with zero_offset). */
        m->zeros[g] = format == MOEINT4_FORMAT_GPTQ_SYM
                          ? 8
                          : (uint8_t)((tk_rng_next(rng) & 15) + (uint64_t)zero_offset);
        float scale = (float)(scale_base * tk_rng_range(rng, 0.5, 1.5));
        m->scales[g] =
            scales_dtype == MOEINT4_DTYPE_F16 ? tk_f32_to_f16(scale) : tk_f32_to_bf16(scale);
    }
    tk_matrix_pack(m);
    return 0;
}

void tk_matrix_drop_codes(tk_matrix *m)
{
    free(m->codes);
    m->codes = NULL;
}

moeint4_quant_matrix tk_matrix_view(const tk_matrix *m)
{
    moeint4_quant_matrix view;
    memset(&view, 0, sizeof view);
    view.struct_size = sizeof view;
    view.format = m->format;
    view.zero_offset = m->zero_offset;
    view.num_experts = m->num_experts;
    view.in_features = m->in_features;
    view.out_features = m->out_features;
    view.group_size = m->group_size;
    view.scales_dtype = m->scales_dtype;
    view.qweight = m->qweight;
    view.scales = m->scales;
    view.qzeros = m->qzeros;
    view.g_idx = m->g_idx;
    return view;
}

/* The group of input i of expert e: g_idx's (act-order) when the matrix has one. */
static int group_of(const tk_matrix *m, int e, int i)
{
    if (m->group_size == -1)
        return 0;
    return m->g_idx ? m->g_idx[(size_t)e * (size_t)m->in_features + (size_t)i] : i / m->group_size;
}

double tk_matrix_scale(const tk_matrix *m, int e, int o, int i)
{
    int group = group_of(m, e, i);
    uint16_t bits = m->scales[((size_t)e * m->num_groups + group) * m->out_features + o];
    return m->scales_dtype == MOEINT4_DTYPE_F16 ? tk_f16_to_f32(bits) : tk_bf16_to_f32(bits);
}

int tk_matrix_zero(const tk_matrix *m, int e, int o, int i)
{
    int group = group_of(m, e, i);
    return m->zeros[((size_t)e * m->num_groups + group) * m->out_features + o];
}

int tk_matrix_code(const tk_matrix *m, int e, int o, int i)
{
    size_t in = (size_t)m->in_features, out = (size_t)m->out_features;
    if (m->codes)
        return m->codes[((size_t)e * out + (size_t)o) * in + (size_t)i];
    /* Codes dropped: read the packed checkpoint word instead. */
    uint32_t word;
    int nibble;
    if (m->format == MOEINT4_FORMAT_AWQ) {
        word = (uint32_t)m->qweight[((size_t)e * in + (size_t)i) * (out / 8) + (size_t)o / 8];
        for (nibble = 0; awq_column_of_nibble[nibble] != o % 8; nibble++) {
        }
    } else {
        word = (uint32_t)m->qweight[((size_t)e * (in / 8) + (size_t)i / 8) * out + (size_t)o];
        nibble = i % 8;
    }
    return (int)((word >> (4 * nibble)) & 15);
}

int tk_matrix_packed_zero(const tk_matrix *m, int e, int g, int o)
{
    if (m->format == MOEINT4_FORMAT_GPTQ_SYM)
        return 8;
    size_t words = (size_t)m->out_features / 8;
    uint32_t word = (uint32_t)m->qzeros[((size_t)e * m->num_groups + g) * words + (size_t)o / 8];
    int nibble = o % 8;
    if (m->format == MOEINT4_FORMAT_AWQ)
        for (nibble = 0; awq_column_of_nibble[nibble] != o % 8; nibble++) {
        }
    return (int)((word >> (4 * nibble)) & 15) +
           (m->format == MOEINT4_FORMAT_GPTQ_ASYM ? m->zero_offset : 0);
}

double tk_matrix_value(const tk_matrix *m, int e, int o, int i)
{
    return (tk_matrix_code(m, e, o, i) - tk_matrix_zero(m, e, o, i)) * tk_matrix_scale(m, e, o, i);
}
