/* The small interface both device runtimes (Level Zero, OpenCL) implement:
 * allocate, copy, launch one of the backend's kernels, wait. Device pointers
 * are plain pointers under both (USM on Level Zero, SVM on OpenCL); a queue
 * is a native handle (ze_command_list_handle_t / cl_command_queue) or NULL
 * for the runtime's own. */
#ifndef MOEINT4_BACKENDS_XPU_XPU_RUNTIME_H
#define MOEINT4_BACKENDS_XPU_XPU_RUNTIME_H

#include <stddef.h>

#include "moeint4.h"
#include "xpu_common.h"

/* Rows per GEMM tile; kernels/common.cl has the same MI4_TILE_ROWS. */
#define MI4_XPU_TILE_ROWS 8
/* Work-items per work-group of the routing and GEMM kernels (MI4_GROUP in
 * kernels/common.cl): the routing is one such group, a GEMM work-group
 * covers MI4_XPU_GROUP / team output columns (mi4_xpu_gemm_team). */
#define MI4_XPU_GROUP 256

/* The team size (work-items per GEMM output column) for rows of `in` int4
 * codes: the largest power of two in [4, 16] that leaves each work-item at
 * least 4 pieces of 32 codes (on the H200, 16 beat 32 and 8 on Mixtral's
 * rows); `forced` (a power of two in [4, 32], MOEINT4_XPU_GEMM_TEAM) wins. */
int mi4_xpu_gemm_team(int in, int forced);
/* global[0] of a GEMM launch over `columns` output columns with `team`. */
size_t mi4_xpu_gemm_width(int columns, int team);
/* global[0] of a walking GEMV launch (kernels/gemv_walk.cl) over `tiles`
 * tiles: about groups_per_unit work-groups per compute unit in all (64
 * units when the runtime does not know), at least one per tile, never more
 * than the GEMV's own launch has. */
size_t mi4_xpu_gemv_walk_width(int columns, int team, size_t tiles, int groups_per_unit,
                               int compute_units);

/* The most 16-byte pieces of a row one work-item of the lanes GEMVs holds
 * (kernels/gemv_lanes.cl: MI4_LANES_PIECES). */
#define MI4_XPU_LANES_PIECES 2
/* Whether rows of `in` codes in groups of group_size fit the lanes GEMVs:
 * 16-byte pieces, groups of whole pieces, at most MI4_XPU_GROUP *
 * MI4_XPU_LANES_PIECES pieces. */
int mi4_xpu_lanes_fit(int in, int group_size);
/* The lanes GEMV for rows of `in` codes (w13 or w2): one piece per
 * work-item where the row has at most MI4_XPU_GROUP pieces, else two. */
mi4_xpu_kernel mi4_xpu_lanes_kernel(int in, int w13);
/* The lanes GEMVs' team for rows of `in` codes (their `team` argument): a
 * power of two from 8 to MI4_XPU_GROUP covering the row's pieces, one or
 * two a work-item. */
int mi4_xpu_lanes_team(int in);
/* global[0] of a lanes GEMV launch over `columns` (halves: 2 for w13, whose
 * column is a gate and an up row), as mi4_xpu_gemv_walk_width. */
size_t mi4_xpu_gemv_lanes_width(int columns, int in, int halves, size_t tiles, int groups_per_unit,
                                int compute_units);

/* Whether rows of `in` codes in groups of group_size fit the rows GEMVs
 * (kernels/gemv_rows.cl): 16-byte pieces, groups of whole pieces. */
int mi4_xpu_rows_fit(int in, int group_size);
/* The rows GEMVs' team (work-items per row, their `team` argument): 8, or
 * `forced` where it is a power of two in [4, 32] (MOEINT4_XPU_GEMM_TEAM). */
int mi4_xpu_rows_team(int forced);
/* global[0] of a rows GEMV launch over `columns` (halves: 2 for w13, whose
 * column is a gate and an up row), as mi4_xpu_gemv_walk_width. */
size_t mi4_xpu_gemv_rows_width(int columns, int team, int halves, size_t tiles, int groups_per_unit,
                               int compute_units);

/* A kernel argument: a device pointer (is_pointer) or a scalar by value. */
typedef struct mi4_xpu_arg {
    int is_pointer;
    size_t size;
    const void *value; /* scalar: its bytes; pointer: the device pointer itself */
} mi4_xpu_arg;

#define MI4_XPU_PTR(p) ((mi4_xpu_arg){ 1, sizeof(void *), (const void *)(p) })
#define MI4_XPU_INT(v) ((mi4_xpu_arg){ 0, sizeof(int), &(v) })
#define MI4_XPU_FLOAT(v) ((mi4_xpu_arg){ 0, sizeof(float), &(v) })
#define MI4_XPU_LONG(v) ((mi4_xpu_arg){ 0, sizeof(long long), &(v) })

typedef enum mi4_xpu_runtime_kind {
    MI4_XPU_LEVEL_ZERO = 1,
    MI4_XPU_OPENCL = 2,
} mi4_xpu_runtime_kind;

typedef struct mi4_xpu_runtime mi4_xpu_runtime;

typedef struct mi4_xpu_runtime_ops {
    moeint4_status (*alloc)(mi4_xpu_runtime *rt, size_t bytes, void **ptr, char *err, size_t cap);
    void (*free)(mi4_xpu_runtime *rt, void *ptr);
    /* Enqueues a copy on `queue` and waits for it (and all work before it). */
    moeint4_status (*copy)(mi4_xpu_runtime *rt, void *queue, void *dst, const void *src,
                           size_t bytes, char *err, size_t cap);
    /* global[i] is a multiple of local[i]; kernels guard their bounds. */
    moeint4_status (*launch)(mi4_xpu_runtime *rt, void *queue, mi4_xpu_kernel kernel,
                             const size_t global[2], const size_t local[2], int num_args,
                             const mi4_xpu_arg *args, char *err, size_t cap);
    moeint4_status (*wait)(mi4_xpu_runtime *rt, void *queue, char *err, size_t cap);
    /* Checks that a caller's queue handle belongs to this runtime's context. */
    moeint4_status (*check_queue)(mi4_xpu_runtime *rt, void *queue, char *err, size_t cap);
    void (*destroy)(mi4_xpu_runtime *rt);
} mi4_xpu_runtime_ops;

/* What every runtime starts with; each runtime's struct embeds it first. */
struct mi4_xpu_runtime {
    const mi4_xpu_runtime_ops *ops;
    mi4_xpu_runtime_kind kind;
    char device_name[128];
    char kernels_from[160]; /* what the kernels were built from, for `moeint4 info` */
    int is_test_cpu_device; /* OpenCL test mode on PoCL's CPU device */
    int compute_units;      /* OpenCL compute units / Level Zero sub-slices; 0: unknown */
};

/* Probes write why not into `reason`; return 1 when a usable device exists. */
int mi4_xpu_ze_probe(int device_index, char *reason, size_t cap);
int mi4_xpu_ocl_probe(int device_index, char *reason, size_t cap);

moeint4_status mi4_xpu_ze_create(const moeint4_context_options *options, mi4_xpu_runtime **rt,
                                 char *err, size_t cap);
/* options->native_device set: the caller's cl_device_id, cl_context and
 * (optional) cl_command_queue; otherwise device options->device_index. */
moeint4_status mi4_xpu_ocl_create(const moeint4_context_options *options, mi4_xpu_runtime **rt,
                                  char *err, size_t cap);

/* OpenCL handles for the oneDNN path (NULL unless rt is an OpenCL runtime). */
void mi4_xpu_ocl_handles(mi4_xpu_runtime *rt, void **device, void **context, void **queue);

/* Embedded program text and SPIR-V (generated at build time). */
extern const char mi4_xpu_kernel_source[];
extern const unsigned char mi4_xpu_kernel_spirv[];
extern const size_t mi4_xpu_kernel_spirv_size;
/* The same kernels at SIMD16, for EUs 16 lanes wide (xpu_runtime_ze.c). */
extern const unsigned char mi4_xpu_kernel_spirv_simd16[];
extern const size_t mi4_xpu_kernel_spirv_simd16_size;
/* ocloc's binaries of the OpenCL C text for Intel GPU targets, with each
 * target's ocloc -options (aot_compile.sh). */
extern const int mi4_xpu_aot_count;
extern const char *const mi4_xpu_aot_targets[];
extern const char *const mi4_xpu_aot_options[];
extern const unsigned char *const mi4_xpu_aot_binaries[];
extern const size_t mi4_xpu_aot_sizes[];
extern const char mi4_xpu_aot_source_sha256[];
extern const char mi4_xpu_aot_spirv_sha256[];
extern const char mi4_xpu_aot_spirv_simd16_sha256[];

#endif
