/* Shared between the backend's translation units: the handles behind the
 * plugin table and the kernel launchers (each .hip file launches its own
 * kernels). Host code only sees plain C types here. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_INTERNAL_H
#define MOEINT4_BACKENDS_HIP_HIP_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backends/hip/hip_combine.h"
#include "backends/hip/hip_platform.h"
#include "backends/hip/hip_slots.h"
#include "moeint4.h"

/* One synchronous forward's device scratch and bad-slot record, reused
 * through the context's pool so that concurrent forwards on one context
 * never share them (hip_workspace.hip). */
typedef struct mi4_hip_workspace {
    void *device;            /* one allocation, carved up per forward (NULL: none yet) */
    size_t bytes;
    int *host_record;        /* mapped pinned memory: MI4_RECORD_WORDS (hip_slots.h) */
    int *host_record_device; /* the same memory as the device sees it */
    struct mi4_hip_workspace *next;
} mi4_hip_workspace;

typedef struct mi4_hip_context {
    int device;
    int multiprocessors;     /* SM / CU count of the device */
    int use_mma;             /* 0: plain-FMA GEMM (MOEINT4_HIP_GEMM=fma) */
    int gpu_weights;         /* MOEINT4_GPU_WEIGHTS_BF16 or _INT4 (resolved at create) */
    pthread_mutex_t pool_lock;
    mi4_hip_workspace *free_workspaces;
} mi4_hip_context;

/* One projection kept int4 on the device (hip_int4_weights.hip): rows are
 * outputs, codes packed two per byte along the input (byte j of a row's
 * piece = code(2j) | code(2j+1) << 4, the XPU byte order), each row padded
 * to a multiple of 128 inputs (pad codes 0, their inputs read as 0);
 * scales and zeros per (row, group), so a 16-byte load of codes meets one
 * scale and one zero. The codes are re-tiled: rows R = expert * rows + row
 * (the experts one after another) go in groups of 8, and a group holds its
 * rows' codes chunk after chunk of 128 inputs, a chunk 8 rows x 64 bytes
 * (512 contiguous bytes). The 16 bytes a lane of the matrix-core GEMVs
 * loads per chunk (rows g and g + 8, inputs 32t .. 32t + 31) then make one
 * or two whole 512-byte blocks a warp: the access pattern streamed 16
 * separate 64-byte row pieces at 1954 GB/s and 1 KB contiguous at 2588 GB/s
 * on the H200 (bench/results/hip-2026-12-02-early-x.md), as Marlin's
 * re-tiled weights do. */
#define MI4_INT4_CHUNK_BYTES 512 /* from one chunk of a row to the next */

/* Byte offset of row R's first chunk, and of input k (even) within a row. */
MI4_HOST_DEVICE size_t mi4_int4_row_offset(int inner_padded, size_t row)
{
    return row / 8 * (size_t)inner_padded * 4 + row % 8 * 64;
}
MI4_HOST_DEVICE size_t mi4_int4_input_offset(int k)
{
    return (size_t)(k / 128) * MI4_INT4_CHUNK_BYTES + (size_t)(k % 128) / 2;
}
/* Bytes of the codes of `rows` rows (whole groups of 8). */
MI4_HOST_DEVICE size_t mi4_int4_code_bytes(int inner_padded, size_t rows)
{
    return (rows + 7) / 8 * 8 * (size_t)(inner_padded / 2);
}

typedef struct mi4_hip_int4_matrix {
    uint8_t *codes;          /* E_l x rows rows of inner_padded / 2 bytes (mi4_int4_row_offset) */
    uint16_t *scales;        /* [E_l][rows][groups]: the checkpoint's f16 / bf16 bits */
    uint8_t *zeros;          /* [E_l][rows][groups]: the value subtracted; NULL: 8 */
    int experts, rows, inner, inner_padded, group_size, groups;
    int scales_bf16;
} mi4_hip_int4_matrix;

typedef struct mi4_hip_weights {
    int num_experts;         /* global E */
    int num_local_experts;
    int hidden_size;         /* K */
    int intermediate_size;   /* N */
    int int4;                /* 1: gpu_weights INT4 (q13, q2; w13 = w2 = NULL) */
    int int4_mma;            /* 1: int4 weights the matrix-core GEMV serves (see
                                mi4_hip_int4_mma_serves) */
    int int4_routed;         /* 1: int4_mma and the routed decode GEMVs fit the
                                device (mi4_hip_int4_routed_fits) */
    int int4_tile_dequant;   /* 1: the GEMM tiles take these int4 weights as codes,
                                dequantized into their shared weight tiles (no
                                expansion; see mi4_hip_int4_tile_dequant_serves) */
    int int4_ws_prefill;     /* 1: MOEINT4_HIP_INT4_PREFILL=q256 at prepare: the
                                warp-specialized int4 GEMM (MI4_TILE_Q256) also from
                                MI4_EXPAND_MIN_ROWS_PER_EXPERT rows an expert, no
                                expansion, where the int4 grouped GEMM serves */
    uint16_t *w13;           /* bf16 [E_l][2N][K] */
    uint16_t *w2;            /* bf16 [E_l][K][N] */
    mi4_hip_int4_matrix q13; /* int4 [E_l][2N][K] */
    mi4_hip_int4_matrix q2;  /* int4 [E_l][K][N] */
    int32_t *expert_map;     /* [E]: global -> local or -1 */
    int identity_map;        /* 1: expert_map[e] == e for every e (the forwards
                                skip its load) */
    int32_t *input_perm;     /* int4 act-order weights (sorted at prepare): [E_l][K],
                                row i of w13 takes x[input_perm[i]]; else NULL */
    int *error_record;       /* device MI4_RECORD_WORDS: the sticky record of
                                asynchronous forwards (hip_slots.h) */
    size_t device_bytes;
} mi4_hip_weights;

/* ---- hip_backend.hip ---- */
/* hipMalloc with a message naming `what`; OUT_OF_MEMORY when the device is
 * full, DEVICE_ERROR else. */
moeint4_status mi4_hip_device_alloc(void **ptr, size_t bytes, const char *what, char *err,
                                    size_t cap);
/* A message "hip: <what> failed: <runtime's text>"; OUT_OF_MEMORY or DEVICE_ERROR. */
moeint4_status mi4_hip_failure(char *err, size_t cap, const char *what, hipError_t e);
/* A device copy of `bytes` host bytes in *dst (mi4_hip_device_alloc naming
 * `what`); after a failed copy *dst stays allocated for the caller to free. */
moeint4_status mi4_hip_upload(void **dst, const void *src, size_t bytes, const char *what,
                              char *err, size_t cap);
/* Blocks of 256 threads for a grid-stride kernel over `work` items (the
 * load-time kernels and the int4 expansion): at least 1, at most 2^20. */
static inline unsigned mi4_hip_stride_grid(int64_t work)
{
    int64_t blocks = (work + 255) / 256;
    return (unsigned)(blocks > (1 << 20) ? (1 << 20) : (blocks < 1 ? 1 : blocks));
}

#ifdef __cplusplus
/* Makes `device` current for the scope and restores the caller's device, so
 * a framework's notion of the current device is left as it was. */
class mi4_hip_device_scope {
  public:
    explicit mi4_hip_device_scope(int device)
    {
        if (hipGetDevice(&saved_) != hipSuccess)
            saved_ = -1;
        changed_ = saved_ != device;
        status_ = changed_ ? hipSetDevice(device) : hipSuccess;
    }
    ~mi4_hip_device_scope()
    {
        if (changed_ && saved_ >= 0)
            (void)hipSetDevice(saved_);
    }
    hipError_t status() const { return status_; }

  private:
    int saved_;
    bool changed_;
    hipError_t status_;
};

#endif

/* ---- hip_dequant.hip ---- */
/* Device copy of one projection (host arrays of `m`) dequantized to bf16
 * [E][OUT][IN] in `out` (device memory the caller owns). */
moeint4_status mi4_hip_dequantize(const moeint4_quant_matrix *m, uint16_t *out, char *err,
                                  size_t err_cap);

/* ---- gemm tile configurations (hip_grouped_gemm.hip) ---- */
typedef enum mi4_hip_tile_config {
    MI4_TILE_16 = 0,        /* decode: 16 rows x 64 columns */
    MI4_TILE_16_NARROW = 1, /* decode: 16 x 32, one warp: more blocks for few experts */
    MI4_TILE_64 = 2,
    MI4_TILE_128 = 3,       /* prefill: 128 x 128, 8 warps */
    MI4_TILE_128_DEEP = 4,  /* prefill: 128 x 128, 4 warps of 64 x 64, deeper k step */
    MI4_TILE_256 = 5,       /* prefill: 128 x 256, 8 warps of 64 x 64 */
    MI4_TILE_GEMV = 6,      /* decode: 8 rows, weights streamed through registers */
    MI4_TILE_WGMMA_128 = 7, /* prefill on sm_90a: wgmma, 128 x 128 */
    MI4_TILE_WGMMA_256 = 8, /* prefill on sm_90a: wgmma, 128 x 256 */
    MI4_TILE_DIRECT = 9,    /* decode: GEMVs straight from the ids, no routing, no combine
                               (at most MI4_DIRECT_MAX_SLOTS slots) */
    MI4_TILE_WGMMA_64 = 10, /* sm_90a: wgmma, 64 x 256 (few rows per expert) */
    /* int4 weights on sm_90a: the int4 grouped GEMM (hip_int4_grouped_gemm.hip),
     * routed tiles of 8 .. 128 token rows, the weights dequantized on the way
     * into wgmma (mi4_hip_int4_wgmma_serves) */
    MI4_TILE_Q8 = 11,
    MI4_TILE_Q16 = 12,
    MI4_TILE_Q32 = 13,
    MI4_TILE_Q64 = 14,
    MI4_TILE_Q128 = 15,
    /* int4 weights on the matrix cores (NVIDIA sm_80+): routed tiles of 8 rows,
     * the decode GEMVs' streaming with 8 token rows an MMA
     * (hip_int4_routed.hip); elsewhere the routed 8-row GEMV (MI4_TILE_GEMV) */
    MI4_TILE_D8 = 16,
    /* int4 weights on sm_90a, many rows an expert: routed tiles of 256 token
     * rows, the persistent warp-specialized int4 GEMM (hip_int4_ws.hip) */
    MI4_TILE_Q256 = 17,
    /* the same kernel with routed tiles of 64 token rows, each chunk's
     * product exact in f32 (as MI4_TILE_Q8 .. MI4_TILE_Q32), a deeper ring */
    MI4_TILE_QW64 = 18,
    MI4_TILE_QW128 = 19, /* the same with 128 token rows */
    /* the warp-specialized tile (as MI4_TILE_QW64) with 32 token rows, two
     * blocks an SM */
    MI4_TILE_QW32 = 20,
    MI4_TILE_COUNT = 21,
} mi4_hip_tile_config;

/* The direct GEMVs keep a table of every slot's expert in shared memory. */
#define MI4_DIRECT_MAX_SLOTS 8192

/* "16", "16n", "64", "128", "128d", "256", "8v", "w128", "w256", "direct",
 * "w64", "q8", "q16", "q32", "q64", "q128", "d8", "q256", "qw64", "qw128",
 * "qw32" (MOEINT4_HIP_TILE); NULL otherwise. */
const char *mi4_hip_tile_name(mi4_hip_tile_config config);
/* hip_tiles.hip: 1 when a forward of `tokens` tokens and `slots` slots takes
 * the direct decode: at most 64 slots, and one token, or no more slots than
 * local experts while the experts it would read twice (on average, for
 * uniform routing) stay under 100 MB where the routed paths it was measured
 * against exist (routed_measured). Pure: reads the weights' sizes only. */
int mi4_hip_direct_decode_serves(int64_t tokens, int64_t slots, const mi4_hip_weights *w,
                                 int routed_measured);
int mi4_hip_tile_rows(mi4_hip_tile_config config);
/* 1 for the int4 grouped GEMM's tiles (MI4_TILE_Q8 .. MI4_TILE_Q128, MI4_TILE_Q256,
 * MI4_TILE_QW64, MI4_TILE_QW128, MI4_TILE_QW32). */
int mi4_hip_tile_is_int4_gemm(mi4_hip_tile_config config);

/* ---- hip_int4_weights.hip ---- */
/* MOEINT4_HIP_WEIGHTS and the context option -> BF16 or INT4, with a
 * message naming a bad value. */
moeint4_status mi4_hip_resolve_gpu_weights(int requested, int *mode, char *err, size_t cap);
/* The int4 device layout of one projection in two steps, so that a prepare
 * allocates everything before it reads a host array: _alloc (device
 * memory named "<name> (int4 codes)" ...; nothing kept on failure), then
 * _fill (uploads and repacks). mi4_hip_int4_free releases it. */
moeint4_status mi4_hip_int4_alloc(const moeint4_quant_matrix *m, const char *name,
                                  mi4_hip_int4_matrix *out, char *err, size_t err_cap);
moeint4_status mi4_hip_int4_fill(const moeint4_quant_matrix *m, mi4_hip_int4_matrix *out,
                                 char *err, size_t err_cap);
void mi4_hip_int4_free(mi4_hip_int4_matrix *m);
size_t mi4_hip_int4_bytes(const mi4_hip_int4_matrix *m);
/* 1 when tile `config` reads BF16 weights, so that int4 weights w reach it
 * as BF16: expanded into the workspace, or (int4_tile_dequant) as codes
 * dequantized into its shared weight tiles. 0 for BF16 weights and for the
 * tiles that read int4 (the direct GEMVs, the routed 8-row FMA GEMV, the
 * 16-row matrix-core GEMV where it serves, the int4 grouped GEMM's tiles). */
int mi4_hip_int4_tile_reads_bf16(const mi4_hip_weights *w, mi4_hip_tile_config config);
/* Workspace bytes a forward on tile `config` needs for BF16 copies of int4
 * weights: both projections of every local expert where the tile reads BF16
 * and the weights are not dequantized in the tiles, else 0. */
size_t mi4_hip_int4_expand_bytes(const mi4_hip_weights *w, mi4_hip_tile_config config);
/* 1 when the GEMM tiles (the grouped tiles and, on sm_90a, the wgmma ones)
 * can read these int4 weights as codes (K and N multiples of 8, group sizes
 * multiples of 32 or per-channel) and MOEINT4_HIP_INT4_PREFILL=dequant asks
 * for it (read at prepare; otherwise those tiles read the expansion to
 * BF16). */
int mi4_hip_int4_tile_dequant_serves(const moeint4_weights_desc *desc);
/* 1 when MOEINT4_HIP_INT4_PREFILL=q256 asks for the warp-specialized int4
 * GEMM at every batch from MI4_Q256_MIN_ROWS_PER_EXPERT rows an expert, the
 * largest too (read at prepare: int4_ws_prefill). */
int mi4_hip_int4_ws_prefill_wanted(void);
/* 1 when the matrix-core int4 GEMV (hip_int4_mma.hip) serves these
 * weights on a context with matrix cores on: NVIDIA builds, group size 128
 * or per-channel (a 16-step of the MMA spans 128 inputs, one scale). */
int mi4_hip_int4_mma_serves(const moeint4_weights_desc *desc);
/* Enqueues the expansion of w's int4 projections to BF16 into `scratch`
 * (mi4_hip_int4_expand_bytes) and fills *view: w with w13 / w2 pointing
 * there, for the BF16 GEMMs. */
hipError_t mi4_hip_int4_expand(const mi4_hip_weights *w, void *scratch, hipStream_t stream,
                               mi4_hip_weights *view);
/* Rows per expert up to which int4 weights the int4 grouped GEMMs do not
 * serve (they take every routed batch below MI4_EXPAND_MIN_ROWS_PER_EXPERT
 * where they do: sm_90a, hip_tiles.hip) take a routed int4 GEMV: the 8-row FMA one
 * (each weight byte read once per 8 rows), the 16-row matrix-core one
 * (once per 16 rows); past that the weights are expanded to BF16. */
#define MI4_INT4_GEMV_MAX_ROWS_PER_EXPERT 16
#define MI4_INT4_MMA_MAX_ROWS_PER_EXPERT 32
/* Rows per expert up to which the routed decode GEMVs (MI4_TILE_D8) take
 * routed batches on sm_90a (hip_tiles.hip): Mixtral M = 16, Qwen3 M = 64. */
#define MI4_ROUTED_MAX_ROWS_PER_EXPERT 4
/* Rows per expert from which the int4 grouped GEMM is the warp-specialized
 * q256 (below: the q tiles), and from which the int4 weights are expanded
 * to BF16 for the BF16 wgmma GEMM instead (unless int4_ws_prefill), on
 * sm_90a (hip_tiles.hip; measured on the H200). */
#define MI4_Q256_MIN_ROWS_PER_EXPERT 96
#define MI4_EXPAND_MIN_ROWS_PER_EXPERT 1024
/* Rows per expert up to which qw128 (exact chunks, 128-row tiles) takes
 * the place of q256 from MI4_Q256_MIN_ROWS_PER_EXPERT (measured on the
 * H200: 22-23% faster at 96 rows, even at 128, 1-5% slower at 256 and
 * more: bench/results/hip-2026-12-04-queued.md). */
#define MI4_QW128_MAX_ROWS_PER_EXPERT 128

/* hip_tiles.hip: the int4 grouped GEMMs' tile (sm_90a builds, int4 weights
 * they serve) for rows_per_expert rows an expert: d8 up to 4 rows where
 * `routed` (the routed decode GEMVs fit), q8 there otherwise, qw32 to 24,
 * qw64, qw128, q256; -1 from MI4_EXPAND_MIN_ROWS_PER_EXPERT unless
 * ws_prefill (the BF16 expansion serves). Pure: a mi4_hip_tile_config. */
int mi4_hip_int4_gemm_tile(int64_t rows_per_expert, int routed, int ws_prefill);
/* hip_tiles.hip: the row tile of a forward of `tokens` tokens and `slots`
 * slots (MOEINT4_HIP_TILE forces one). */
mi4_hip_tile_config mi4_hip_choose_tile(int64_t tokens, int64_t slots, const mi4_hip_weights *w);

/* What the routing kernel leaves in the workspace for the GEMMs. */
typedef struct mi4_hip_routing {
    int *status;            /* device [0] bad-id flag, [1] first bad slot, [2] tiles */
    int *sorted_slot;       /* [max_tiles * BM]: slot (m * topk + j) or -1 (padding) */
    int *tile_expert;       /* [max_tiles]: local expert of each row tile */
    int max_tiles;
    int tile_rows;          /* BM */
    int *route_scratch;     /* mi4_hip_route_scratch_bytes(); NULL: one-block routing only */
} mi4_hip_routing;

typedef struct mi4_hip_gemm_args {
    const mi4_hip_weights *weights;
    const mi4_hip_routing *routing;
    const uint16_t *x_bf16;  /* GEMM1 input rows, bf16 [M or M*topk][K] */
    int x_per_slot;          /* 1: x_bf16 has a row per slot (router weight applied) */
    int topk;
    const float *topk_weights;
    int weight_on_output;    /* GEMM2 epilogue multiplies by the router weight */
    int activation;
    float limit, alpha, beta;
    uint16_t *act;           /* bf16 [max_tiles * BM][N] */
    float *y;                /* f32 [M * topk][K] */
    int use_mma;
    hipStream_t stream;
    int multiprocessors;     /* of the device: sizes the decode GEMVs' persistent grids */
    /* Direct decode GEMVs (MI4_TILE_DIRECT): slots, and where gemm2 writes
     * the combined output (combine.check: ids, weights, the bad-slot record) */
    int64_t num_slots;
    mi4_combine_params combine;
} mi4_hip_gemm_args;

/* hip_wgmma_gemm.hip: 1 when this build has the sm_90a wgmma kernels. */
int mi4_hip_wgmma_built(void);
/* hip_int4_grouped_gemm.hip: 1 when the int4 grouped GEMM (MI4_TILE_Q*)
 * serves these weights: int4 on the matrix cores (group 128 or
 * per-channel), an sm_90a build, K and N multiples of 128, the scales of
 * 128 rows fitting in shared memory. */
int mi4_hip_int4_wgmma_serves(const mi4_hip_weights *w);
/* hip_int4_routed.hip: 1 when the routed decode GEMVs (MI4_TILE_D8) of a
 * layer of these sizes fit the current device (NVIDIA builds; int4 weights
 * the matrix cores take, int4_mma, is the caller's to check). */
int mi4_hip_int4_routed_fits(int hidden, int intermediate);
/* Input rows (bf16 [rows][inner]) into the order the int4 grouped GEMM
 * reads its token rows in (dst != src). */
hipError_t mi4_hip_launch_int4_permute(const uint16_t *src, uint16_t *dst, int64_t rows,
                                       int inner, hipStream_t stream);
hipError_t mi4_hip_launch_gemm13(mi4_hip_tile_config config, const mi4_hip_gemm_args *a);
hipError_t mi4_hip_launch_gemm2(mi4_hip_tile_config config, const mi4_hip_gemm_args *a);
/* Raises the shared-memory limit of every GEMM kernel that needs it. */
hipError_t mi4_hip_gemm_init(void);
/* Succeeds when this build has device code for the current device. */
hipError_t mi4_hip_check_kernel_image(void);

/* ---- hip_route.hip ---- */
/* Workspace the multi-block routing of num_slots slots needs (any path may
 * run: MOEINT4_HIP_ROUTE=auto|one|multi is read at the launch). */
size_t mi4_hip_route_scratch_bytes(int64_t num_slots, int num_local_experts);
hipError_t mi4_hip_launch_route(const mi4_slot_check *check, int64_t num_slots, int num_local,
                                const mi4_hip_routing *r, hipStream_t stream);
/* How the input conversion lays x out: a row per token, or per slot (the
 * router weight on the input, or act-order weights: each slot's row in its
 * expert's sort order). */
typedef struct mi4_hip_convert_rows {
    int per_slot;              /* rows m*topk+j */
    int weight_on_input;       /* per_slot rows times w[m,j] */
    const int32_t *input_perm; /* per_slot: [E_l][K] gather order, or NULL */
    mi4_slot_check check;      /* with input_perm: the slot's local expert (a slot
                                  that does not count: any order) */
} mi4_hip_convert_rows;
/* x [M][K] (dtype) -> bf16 rows; per_slot: row m*topk+j = bf16(w[m,j] * x[m])
 * (w = 1 unless weight_on_input), gathered by input_perm where given. */
hipError_t mi4_hip_launch_convert(const void *x, moeint4_dtype dtype, int64_t num_tokens,
                                  int hidden, int topk, const float *topk_weights,
                                  const mi4_hip_convert_rows *rows, uint16_t *x_bf16,
                                  hipStream_t stream);
/* out[m] = sum over local slots of y rows, in slot order; writes nothing
 * when the routing flagged a bad slot of a synchronous forward. */
hipError_t mi4_hip_launch_combine(const mi4_combine_params *c, hipStream_t stream);

/* ---- hip_workspace.hip ---- */
/* The alignment of a forward's scratch base and of each piece in it (a
 * caller workspace is rounded up to it). */
#define MI4_WORKSPACE_ALIGNMENT 256

/* Where one forward's scratch lies, as byte offsets from an aligned base:
 * routing status, tile experts, sorted slots, bf16 input rows (when
 * converted), bf16 intermediate, f32 per-slot outputs, routing scratch,
 * BF16 copies of int4 weights (mi4_hip_int4_expand_bytes). */
typedef struct mi4_hip_workspace_plan {
    size_t at_tile, at_sorted, at_x, at_act, at_y, at_route, at_expand, total;
    int max_tiles;
} mi4_hip_workspace_plan;

mi4_hip_workspace_plan mi4_hip_plan_workspace(const mi4_hip_weights *w, int64_t slots,
                                              int64_t x_rows, int convert_x,
                                              mi4_hip_tile_config config);
/* Bytes any forward of at most max_tokens tokens and `topk` needs (any tile,
 * router weight on either side, any input alignment), including the slack
 * that aligns an unaligned caller workspace. */
size_t mi4_hip_workspace_bound(const mi4_hip_weights *w, int64_t max_tokens, int topk);
/* A pool entry with at least `bytes` of device scratch (0: only the record). */
moeint4_status mi4_hip_workspace_acquire(mi4_hip_context *ctx, size_t bytes,
                                         mi4_hip_workspace **out, char *err, size_t cap);
/* Back into the pool; the caller has synchronized every use of it. */
void mi4_hip_workspace_return(mi4_hip_context *ctx, mi4_hip_workspace *w);
/* Frees an entry (hipFree waits for the device). */
void mi4_hip_workspace_free(mi4_hip_workspace *w);

/* ---- hip_forward.hip ---- */
moeint4_status mi4_hip_forward(mi4_hip_context *ctx, const mi4_hip_weights *w,
                               const moeint4_forward_args *args, char *err, size_t err_cap);
/* Synchronizes `stream`, reads and clears the weights' sticky record. */
moeint4_status mi4_hip_forward_check(mi4_hip_context *ctx, const mi4_hip_weights *w,
                                     void *stream, char *err, size_t err_cap);

/* ---- hip_test_extras.hip (test builds only: MOEINT4_HIP_TEST_EXTRAS) ---- */
/* The extra named `name` for get_proc_address, or NULL. */
void *mi4_hip_test_extra(const char *name);

#endif
