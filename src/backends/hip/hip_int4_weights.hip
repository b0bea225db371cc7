/* Weights that stay int4 on the device (gpu_weights INT4): the layout of
 * mi4_hip_int4_matrix (hip_internal.h) built at prepare from the checkpoint
 * arrays, and its expansion to BF16 in a forward's workspace for the row
 * tiles that only exist for BF16 weights: the matrix-core GEMMs of large
 * batches where the int4 grouped GEMM does not serve (not sm_90a, AMD,
 * groups 32 / 64, the plain-FMA variant, K or N not a multiple of 128) or
 * from MI4_EXPAND_MIN_ROWS_PER_EXPERT rows per expert, where the expansion
 * measured faster (hip_tiles.hip).
 *
 * The checkpoint arrays are uploaded as they are and repacked on the
 * device; which nibble holds what and the zero rule come from the layout
 * module (moeint4_int4_packing, moeint4_backend.h): no checkpoint format is known here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backends/hip/hip_int4_mma_ops.h"
#include "backends/hip/hip_internal.h"
#include "moeint4_backend.h"

moeint4_status mi4_hip_resolve_gpu_weights(int requested, int *mode, char *err, size_t cap)
{
    if (requested == MOEINT4_GPU_WEIGHTS_BF16 || requested == MOEINT4_GPU_WEIGHTS_INT4) {
        *mode = requested;
        return MOEINT4_SUCCESS;
    }
    const char *v = getenv("MOEINT4_HIP_WEIGHTS");
    *mode = MOEINT4_GPU_WEIGHTS_INT4;
    if (v == nullptr || *v == '\0' || strcasecmp(v, "auto") == 0 || strcasecmp(v, "int4") == 0)
        return MOEINT4_SUCCESS;
    if (strcasecmp(v, "bf16") == 0) {
        *mode = MOEINT4_GPU_WEIGHTS_BF16;
        return MOEINT4_SUCCESS;
    }
    snprintf(err, cap, "MOEINT4_HIP_WEIGHTS = \"%s\" is not one of auto, bf16, int4", v);
    return MOEINT4_INVALID_ARGUMENT;
}

namespace {

struct repack_params {
    const int32_t *qweight;
    const uint16_t *scales; /* checkpoint [E][G][OUT] */
    const int32_t *qzeros;
    moeint4_int4_packing packing;
    int experts, in, out, groups, group_size, in_padded;
    uint8_t *codes;
    uint16_t *scales_t;     /* [E][OUT][G] */
    uint8_t *zeros;         /* [E][OUT][G] or NULL */
};

__device__ unsigned nibble_of(int32_t word, unsigned index)
{
    return ((uint32_t)word >> (4u * index)) & 15u;
}

/* One thread packs 8 inputs of one row into 4 bytes; the first E*OUT*G
 * threads also write one (row, group) scale and zero. */
__global__ void repack(repack_params p)
{
    const int64_t words_per_row = p.in / 8;
    const int64_t total = (int64_t)p.experts * p.out * words_per_row;
    const int64_t group_total = (int64_t)p.experts * p.out * p.groups;
    const int64_t stop = total > group_total ? total : group_total;
    const moeint4_int4_packing &k = p.packing;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < stop;
         t += (int64_t)gridDim.x * blockDim.x) {
        if (t < total) {
            int64_t word = t % words_per_row;
            int64_t o = (t / words_per_row) % p.out;
            int64_t e = t / (words_per_row * p.out);
            uint32_t packed = 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int64_t i = word * 8 + j;
                unsigned code;
                if (k.weights_along_out)
                    code = nibble_of(p.qweight[((size_t)e * p.in + (size_t)i) * (p.out / 8) +
                                               (size_t)(o / 8)],
                                     k.weight_nibble[o % 8]);
                else
                    code = nibble_of(p.qweight[((size_t)e * (p.in / 8) + (size_t)word) * p.out +
                                               (size_t)o],
                                     k.weight_nibble[j]);
                packed |= code << (4 * j);
            }
            *(uint32_t *)(p.codes + mi4_int4_row_offset(p.in_padded, (size_t)e * p.out + o) +
                          mi4_int4_input_offset((int)word * 8)) = packed;
        }
        if (t < group_total) {
            int64_t g = t % p.groups;
            int64_t o = (t / p.groups) % p.out;
            int64_t e = t / ((int64_t)p.groups * p.out);
            size_t group_at = (size_t)e * p.groups + (size_t)g;
            p.scales_t[t] = p.scales[group_at * p.out + (size_t)o];
            if (p.zeros != nullptr) {
                int32_t zword = p.qzeros[group_at * (p.out / 8) + (size_t)(o / 8)];
                p.zeros[t] = (uint8_t)((int)nibble_of(zword, k.zero_nibble[o % 8]) +
                                       k.zero_offset);
            }
        }
    }
}

} // namespace

size_t mi4_hip_int4_bytes(const mi4_hip_int4_matrix *m)
{
    if (m->codes == nullptr)
        return 0;
    const size_t row_groups = (size_t)m->experts * m->rows * m->groups;
    return mi4_int4_code_bytes(m->inner_padded, (size_t)m->experts * m->rows) + row_groups * 2 +
           (m->zeros ? row_groups : 0);
}

void mi4_hip_int4_free(mi4_hip_int4_matrix *m)
{
    (void)hipFree(m->codes);
    (void)hipFree(m->scales);
    (void)hipFree(m->zeros);
    m->codes = nullptr;
    m->scales = nullptr;
    m->zeros = nullptr;
}

moeint4_status mi4_hip_int4_alloc(const moeint4_quant_matrix *m, const char *name,
                                  mi4_hip_int4_matrix *out, char *err, size_t err_cap)
{
    memset(out, 0, sizeof *out);
    out->experts = m->num_experts;
    out->rows = m->out_features;
    out->inner = m->in_features;
    out->inner_padded = (m->in_features + 127) / 128 * 128;
    out->group_size = m->group_size == -1 ? out->inner_padded : m->group_size;
    out->groups = m->group_size == -1 ? 1 : m->in_features / m->group_size;
    out->scales_bf16 = m->scales_dtype == MOEINT4_DTYPE_BF16;
    const size_t row_groups = (size_t)out->experts * out->rows * out->groups;
    const size_t code_bytes = mi4_int4_code_bytes(out->inner_padded, (size_t)out->experts * out->rows);
    char what[64];
    snprintf(what, sizeof what, "%s (int4 codes)", name);
    moeint4_status st = mi4_hip_device_alloc((void **)&out->codes, code_bytes, what, err, err_cap);
    snprintf(what, sizeof what, "%s (int4 scales)", name);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_device_alloc((void **)&out->scales, row_groups * 2, what, err, err_cap);
    snprintf(what, sizeof what, "%s (int4 zero points)", name);
    if (st == MOEINT4_SUCCESS && moeint4_quant_matrix_packing(m).has_zeros)
        st = mi4_hip_device_alloc((void **)&out->zeros, row_groups, what, err, err_cap);
    if (st != MOEINT4_SUCCESS)
        mi4_hip_int4_free(out);
    return st;
}

moeint4_status mi4_hip_int4_fill(const moeint4_quant_matrix *m, mi4_hip_int4_matrix *out,
                                 char *err, size_t err_cap)
{
    const moeint4_int4_packing packing = moeint4_quant_matrix_packing(m);
    const size_t experts = (size_t)m->num_experts, in = (size_t)m->in_features,
                 rows = (size_t)m->out_features;
    const size_t code_bytes = mi4_int4_code_bytes(out->inner_padded, experts * rows);
    const size_t row_groups = experts * rows * (size_t)out->groups;
    moeint4_status st = MOEINT4_SUCCESS;
    if (out->inner_padded != out->inner) {
        hipError_t e = hipMemset(out->codes, 0, code_bytes); /* pad codes */
        if (e != hipSuccess)
            st = mi4_hip_failure(err, err_cap, "clearing the int4 codes", e);
    }
    void *qweight = nullptr, *scales = nullptr, *qzeros = nullptr;
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_upload(&qweight, m->qweight, experts * in * rows / 2, "qweight (upload)",
                            err, err_cap);
    if (st == MOEINT4_SUCCESS)
        st = mi4_hip_upload(&scales, m->scales, row_groups * 2, "scales (upload)", err, err_cap);
    if (st == MOEINT4_SUCCESS && packing.has_zeros)
        st = mi4_hip_upload(&qzeros, m->qzeros, row_groups / 2, "qzeros (upload)", err, err_cap);
    if (st == MOEINT4_SUCCESS) {
        repack_params p;
        p.qweight = (const int32_t *)qweight;
        p.scales = (const uint16_t *)scales;
        p.qzeros = (const int32_t *)qzeros;
        p.packing = packing;
        p.experts = m->num_experts;
        p.in = m->in_features;
        p.out = m->out_features;
        p.groups = out->groups;
        p.group_size = out->group_size;
        p.in_padded = out->inner_padded;
        p.codes = out->codes;
        p.scales_t = out->scales;
        p.zeros = out->zeros;
        const int64_t words = (int64_t)(experts * rows * in / 8);
        const int64_t work = words > (int64_t)row_groups ? words : (int64_t)row_groups;
        hipError_t e = mi4_launch(repack, dim3(mi4_hip_stride_grid(work)), dim3(256), 0,
                                  (hipStream_t)0, p);
        if (e == hipSuccess)
            e = hipStreamSynchronize(0);
        if (e != hipSuccess)
            st = mi4_hip_failure(err, err_cap, "the int4 repack kernel", e);
    }
    (void)hipFree(qweight);
    (void)hipFree(scales);
    (void)hipFree(qzeros);
    return st;
}

/* ---- expansion to BF16 for the matrix-core tiles ---- */

namespace {

struct expand_params {
    mi4_hip_int4_matrix m;
    uint16_t *dst; /* [E][rows][inner] */
};

/* Inputs 8 * word .. + 7 of `row` from their 8 codes: (q - zero) * scale
 * rounded once to BF16 (the bits the BF16 mode's prepare writes). */
MI4_DEVICE void expand_word(const mi4_hip_int4_matrix &m, int64_t row, int word, uint32_t codes,
                            uint16_t *out_row)
{
    const int g = word * 8 / m.group_size;
    const float scale = mi4_gemm::int4_scale_of(m, m.scales[(size_t)row * m.groups + g]);
    const int zero = m.zeros ? (int)m.zeros[(size_t)row * m.groups + g] : 8;
    *(uint4 *)(out_row + word * 8) = mi4_gemm::int4_word_to_bf16(codes, zero, scale);
}

/* A team of 32 threads a row (grid-strided); member m takes the row's words
 * m, m + 32, ..., four loads in flight before their four conversions, so a
 * team's stores (512 bytes) stay contiguous, its loads are two 64-byte row
 * pieces of the re-tiled codes (a block's 8 teams: the 8 rows of a group,
 * whole 512-byte blocks together), and no word pays a 64-bit division. On
 * the H200 this reads the re-tiled codes 7% slower than it read whole rows
 * (bench/results/hip-2026-12-02-routed.md). */
constexpr int EXPAND_TEAM = 32, EXPAND_THREADS = 256, EXPAND_TEAMS = EXPAND_THREADS / EXPAND_TEAM;
constexpr int EXPAND_AHEAD = 4;

__global__ void expand(expand_params p)
{
    const mi4_hip_int4_matrix &m = p.m;
    const int64_t rows = (int64_t)m.experts * m.rows;
    const int words = m.inner / 8, member = (int)threadIdx.x % EXPAND_TEAM;
    for (int64_t row = (int64_t)blockIdx.x * EXPAND_TEAMS + (int)threadIdx.x / EXPAND_TEAM;
         row < rows; row += (int64_t)gridDim.x * EXPAND_TEAMS) {
        const uint8_t *codes = m.codes + mi4_int4_row_offset(m.inner_padded, (size_t)row);
        uint16_t *out_row = p.dst + (size_t)row * m.inner;
        for (int first = member; first < words; first += EXPAND_TEAM * EXPAND_AHEAD) {
            uint32_t word_codes[EXPAND_AHEAD];
#pragma unroll
            for (int i = 0; i < EXPAND_AHEAD; i++) {
                const int w = first + i * EXPAND_TEAM;
                word_codes[i] =
                    w < words ? *(const uint32_t *)(codes + mi4_int4_input_offset(8 * w)) : 0u;
            }
#pragma unroll
            for (int i = 0; i < EXPAND_AHEAD; i++) {
                const int w = first + i * EXPAND_TEAM;
                if (w < words)
                    expand_word(m, row, w, word_codes[i], out_row);
            }
        }
    }
}

size_t bf16_bytes(const mi4_hip_int4_matrix &m)
{
    return ((size_t)m.experts * m.rows * m.inner * 2 + MI4_WORKSPACE_ALIGNMENT - 1) /
           MI4_WORKSPACE_ALIGNMENT * MI4_WORKSPACE_ALIGNMENT;
}

} // namespace

int mi4_hip_int4_mma_serves(const moeint4_weights_desc *desc)
{
#if defined(MI4_PLATFORM_NVIDIA)
    return desc->group_size == 128 || desc->group_size == -1;
#else
    (void)desc;
    return 0; /* AMD: the FMA GEMVs (MFMA with in-register dequantization: not yet) */
#endif
}

namespace {

/* MOEINT4_HIP_INT4_PREFILL, read at prepare: "dequant", "q256" or unset */
bool int4_prefill_is(const char *value)
{
    const char *knob = getenv("MOEINT4_HIP_INT4_PREFILL");
    return knob != nullptr && strcmp(knob, value) == 0;
}

} // namespace

int mi4_hip_int4_tile_dequant_serves(const moeint4_weights_desc *desc)
{
    const int group = desc->group_size;
    return int4_prefill_is("dequant") && desc->hidden_size % 8 == 0 &&
           desc->intermediate_size % 8 == 0 && (group == -1 || group % 32 == 0);
}

int mi4_hip_int4_ws_prefill_wanted(void)
{
    return int4_prefill_is("q256");
}

int mi4_hip_int4_tile_reads_bf16(const mi4_hip_weights *w, mi4_hip_tile_config config)
{
    const int tile_rows = mi4_hip_tile_rows(config);
    return w->int4 && tile_rows > 8 && !(tile_rows == 16 && w->int4_mma) &&
           !mi4_hip_tile_is_int4_gemm(config);
}

size_t mi4_hip_int4_expand_bytes(const mi4_hip_weights *w, mi4_hip_tile_config config)
{
    if (!mi4_hip_int4_tile_reads_bf16(w, config) || w->int4_tile_dequant)
        return 0;
    return bf16_bytes(w->q13) + bf16_bytes(w->q2);
}

hipError_t mi4_hip_int4_expand(const mi4_hip_weights *w, void *scratch, hipStream_t stream,
                               mi4_hip_weights *view)
{
    *view = *w;
    view->int4 = 0; /* the GEMMs read the BF16 copies */
    view->int4_mma = 0;
    view->int4_routed = 0;
    view->int4_tile_dequant = 0;
    view->int4_ws_prefill = 0;
    view->w13 = (uint16_t *)scratch;
    view->w2 = (uint16_t *)((char *)scratch + bf16_bytes(w->q13));
    const mi4_hip_int4_matrix *parts[2] = {&w->q13, &w->q2};
    uint16_t *dst[2] = {view->w13, view->w2};
    for (int i = 0; i < 2; i++) {
        expand_params p;
        p.m = *parts[i];
        p.dst = dst[i];
        const int64_t rows = (int64_t)p.m.experts * p.m.rows;
        hipError_t e = mi4_launch(expand, dim3(mi4_hip_stride_grid(rows * EXPAND_TEAM)),
                                  dim3(EXPAND_THREADS), 0, stream, p);
        if (e != hipSuccess)
            return e;
    }
    return hipSuccess;
}
