/*
 * libmoeint4 — the interface for backend authors.
 *
 * Users of the library include moeint4.h only. A backend includes this header
 * (which includes moeint4.h) and nothing else of the library: the table it
 * fills, the entry point a plugin exports, and a small header-only kit (the
 * weights descriptor's two projections as quant matrices, group arithmetic,
 * the error-message helper), so a plugin links no internal symbol.
 *
 * A backend reaches the library in one of three ways:
 *  - a plugin shared object found by its file name next to libmoeint4.so or
 *    on MOEINT4_BACKEND_PATH (libmoeint4-xpu.so, libmoeint4-hip.so);
 *  - a plugin shared object loaded by path: moeint4_backend_load();
 *  - a table handed over by the application: moeint4_register_backend().
 *
 * Every function of the table reports an error by writing a message of at
 * most `err_cap` bytes into `err` (moeint4_backend_fail does it) and
 * returning its status; the library prefixes the backend's name and makes it
 * the thread's moeint4_last_error().
 *
 * Copyright 2026 the libmoeint4 authors. SPDX-License-Identifier: Apache-2.0
 */
#ifndef MOEINT4_BACKEND_H
#define MOEINT4_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "moeint4.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The table's version; a plugin built against another one is refused with a
 * message that names both. */
#define MOEINT4_BACKEND_API_VERSION 1

/* The oracle's priorities (lower = tried first), the one table of them. A
 * table that leaves platform_priority at 0 gets its id's value: XPU, HIP and
 * CPU as named, every registered or loaded backend CUSTOM. */
#define MOEINT4_PRIORITY_XPU 100
#define MOEINT4_PRIORITY_HIP 200
#define MOEINT4_PRIORITY_CUSTOM 500
#define MOEINT4_PRIORITY_CPU 1000

/* ------------------------------------------------------------------------ */
/* The table                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct moeint4_backend_iface {
    size_t struct_size;         /* Required: sizeof(moeint4_backend_iface) */
    uint32_t api_version;       /* Required: MOEINT4_BACKEND_API_VERSION */
    moeint4_backend id;         /* Plugins found by file name: XPU or HIP. Ignored by
                                 * moeint4_register_backend and moeint4_backend_load,
                                 * which hand out a new id. */
    const char *name;           /* Required: 1-31 of [A-Za-z0-9_.-], e.g. "cpu"; unique */
    int device_pointers;        /* 1: forward() takes device pointers (no host-side
                                 * checks of topk_ids); 0: host pointers */
    int platform_priority;      /* Optional (0 = the id's MOEINT4_PRIORITY_*) */
    void *user_data;            /* Optional: passed back to probe, supports,
                                 * context_create/destroy and get_proc_address */

    /* Required. Is the hardware/runtime here? 1 yes, 0 no (reason filled).
     * Called once per device index; the answer is cached. */
    int (*probe)(void *user_data, int device_index, char *reason, size_t reason_cap);
    /* Required. Can it serve this problem (already checked by the core)?
     * 1 yes, 0 no (reason filled). */
    int (*supports)(void *user_data, const moeint4_problem *problem, char *reason,
                    size_t reason_cap);
    /* Required. Per-context state (device handles, queues, thread pools). */
    moeint4_status (*context_create)(void *user_data, const moeint4_context_options *options,
                                     void **backend_context, char *err, size_t err_cap);
    /* Optional (NULL: nothing to free). */
    void (*context_destroy)(void *user_data, void *backend_context);
    /* Required. Converts validated checkpoint tensors (host pointers; the
     * descriptor's struct_size is the library's, defaults filled in) into the
     * backend's own layout. */
    moeint4_status (*prepare)(void *backend_context, const moeint4_weights_desc *desc,
                              void **backend_weights, char *err, size_t err_cap);
    /* Optional (NULL: prepare allocated nothing). */
    void (*release)(void *backend_context, void *backend_weights);
    /* Required. args were validated by the core (host-side topk ids and
     * weights checked when device_pointers == 0). */
    moeint4_status (*forward)(void *backend_context, const void *backend_weights,
                              const moeint4_forward_args *args, char *err, size_t err_cap);
    /* Optional (NULL: 0 bytes reported): bytes held by a prepared handle. */
    void (*memory_usage)(void *backend_context, const void *backend_weights, size_t *host_bytes,
                         size_t *device_bytes);
    /* Optional, the three together (NULL: aligned host memory and memmove):
     * memory helpers for forward()'s pointers. */
    moeint4_status (*memory_alloc)(void *backend_context, size_t bytes, void **ptr, char *err,
                                   size_t err_cap);
    void (*memory_free)(void *backend_context, void *ptr);
    moeint4_status (*memory_copy)(void *backend_context, void *dst, const void *src, size_t bytes,
                                  moeint4_copy_kind kind, char *err, size_t err_cap);
    /* Optional (NULL: no extras): a backend-specific function by name, for
     * extensions that need no change of this table; NULL when unknown.
     * Callers reach it through moeint4_backend_get_proc_address(). */
    void *(*get_proc_address)(void *user_data, const char *name);
    /* ---- appended after the first release: a table whose struct_size ends
     * before them (MOEINT4_BACKEND_IFACE_MIN_SIZE or more) leaves them NULL ---- */
    /* Optional (NULL: 0 bytes): moeint4_forward_workspace_size for these
     * weights (max_tokens >= 0, topk and dtype checked by the core). */
    moeint4_status (*forward_workspace_size)(void *backend_context, const void *backend_weights,
                                             int64_t max_tokens, int topk, moeint4_dtype dtype,
                                             size_t *bytes, char *err, size_t err_cap);
    /* Optional (NULL: always SUCCESS): moeint4_forward_check. */
    moeint4_status (*forward_check)(void *backend_context, const void *backend_weights,
                                    void *stream, char *err, size_t err_cap);
} moeint4_backend_iface;
/* The first published size (moeint4.h's struct_size rule): a table at least
 * this large is accepted; functions appended later stay NULL for it. */
#define MOEINT4_BACKEND_IFACE_MIN_SIZE \
    MOEINT4_SIZE_THROUGH(moeint4_backend_iface, get_proc_address)

/* ------------------------------------------------------------------------ */
/* Plugins, registration, extensions                                          */
/* ------------------------------------------------------------------------ */

#if defined(__GNUC__)
#define MOEINT4_PLUGIN_API __attribute__((visibility("default")))
#else
#define MOEINT4_PLUGIN_API
#endif

/* The entry point a plugin shared object defines and exports (with
 * MOEINT4_PLUGIN_API): its table, or NULL when it cannot work with a core of
 * `core_api_version`. The table must outlive the process's use of it. */
#define MOEINT4_PLUGIN_ENTRY_NAME "moeint4_plugin_backend"
typedef const moeint4_backend_iface *(*moeint4_plugin_backend_fn)(uint32_t core_api_version);
MOEINT4_PLUGIN_API const moeint4_backend_iface *moeint4_plugin_backend(uint32_t core_api_version);

/* Adds a third-party backend. The table is copied; user_data must outlive
 * the library's use of it. Fails with VERSION_MISMATCH when api_version does
 * not match or struct_size is below MOEINT4_BACKEND_IFACE_MIN_SIZE,
 * INVALID_ARGUMENT for a missing required
 * function or a name already taken. *id receives the new backend's id. */
MOEINT4_API moeint4_status moeint4_register_backend(const moeint4_backend_iface *iface,
                                                    moeint4_backend *id);

/* Loads the plugin shared object at `path` (checked to be a whole ELF file of
 * this machine first), asks its entry point for a table and registers it as
 * moeint4_register_backend does; *id receives the new backend's id. The
 * object stays loaded for the life of the process. Fails with
 * BACKEND_UNAVAILABLE (no such file, not loadable, no entry point, no
 * table), VERSION_MISMATCH or INVALID_ARGUMENT (as register_backend, e.g.
 * its name is taken), the message naming the file. The names "xpu" and "hip"
 * stay taken even when their plugin was not found: put such a file on
 * MOEINT4_BACKEND_PATH instead. */
MOEINT4_API moeint4_status moeint4_backend_load(const char *path, moeint4_backend *id);

/* The backend's extension `name` (its table's get_proc_address), or NULL
 * when the backend is unknown, absent, has no extras, or none of that name;
 * cast to the function type the backend documents. */
MOEINT4_API void *moeint4_backend_get_proc_address(moeint4_backend id, const char *name);

/* The layout module's XPU conversion (moeint4_layout_to_xpu's output) for a
 * projection that moeint4_weights_prepare has already validated: a
 * backend's prepare_weights receives such matrices, so nothing is checked
 * again here (calling it on anything else is undefined). Any format without
 * act-order (sort act-order weights first, below); zeros_t may be NULL
 * (then not written). _gptq_to_xpu: the same with zeros_t NULL, kept for
 * plugins built before zero points. */
MOEINT4_API void moeint4_backend_layout_to_xpu(const moeint4_quant_matrix *validated,
                                               uint8_t *packed, void *scales_t, uint8_t *zeros_t);
MOEINT4_API void moeint4_backend_layout_gptq_to_xpu(const moeint4_quant_matrix *validated,
                                                    uint8_t *packed, void *scales_t);

/* Act-order (GPTQ desc_act) weights for kernels that need contiguous groups:
 * when the validated descriptor's w13 or w2 g_idx is act-order, the layout
 * module's sorted copy. *sorted_desc (no g_idx) describes w13 with its input
 * rows sorted by group and its gate/up rows in w2's sort order, and w2 with
 * its input rows sorted, so that W2' act(W13' x') = W2 act(W13 x) for
 * x'[i] = x[input_perm[e][i]]; *input_perm is [E_l][K]. Both stay valid
 * until moeint4_backend_sorted_free(*sorted). Otherwise nothing is copied:
 * *sorted_desc = validated, *input_perm = *sorted = NULL. OUT_OF_MEMORY
 * (message in err) or SUCCESS. */
typedef struct moeint4_backend_sorted moeint4_backend_sorted;
MOEINT4_API moeint4_status moeint4_backend_sort_act_order(const moeint4_weights_desc *validated,
                                                          moeint4_backend_sorted **sorted,
                                                          const moeint4_weights_desc **sorted_desc,
                                                          const int32_t **input_perm, char *err,
                                                          size_t err_cap);
MOEINT4_API void moeint4_backend_sorted_free(moeint4_backend_sorted *sorted);

/* ------------------------------------------------------------------------ */
/* Header-only kit                                                           */
/* ------------------------------------------------------------------------ */

#if defined(__GNUC__)
#define MOEINT4_BACKEND_PRINTF(fmt_index, first_arg) \
    __attribute__((format(printf, fmt_index, first_arg)))
#else
#define MOEINT4_BACKEND_PRINTF(fmt_index, first_arg)
#endif

/* Formats a message into the err/err_cap (or reason/reason_cap) buffer a
 * table function received; always NUL-terminates when cap > 0; NULL buf is
 * fine. Returns `status`, so a failing path reads
 *   return moeint4_backend_fail(err, err_cap, MOEINT4_OUT_OF_MEMORY, "...");  */
static inline moeint4_status moeint4_backend_vfail(char *buf, size_t cap, moeint4_status status,
                                                   const char *fmt, va_list ap)
{
    if (buf && cap > 0)
        vsnprintf(buf, cap, fmt, ap);
    return status;
}

static inline moeint4_status moeint4_backend_fail(char *buf, size_t cap, moeint4_status status,
                                                  const char *fmt, ...) MOEINT4_BACKEND_PRINTF(4, 5);
static inline moeint4_status moeint4_backend_fail(char *buf, size_t cap, moeint4_status status,
                                                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    moeint4_backend_vfail(buf, cap, status, fmt, ap);
    va_end(ap);
    return status;
}

/* The descriptor's scales dtype with its default (0 means F16). */
static inline moeint4_dtype moeint4_desc_scales_dtype(const moeint4_weights_desc *desc)
{
    return desc->scales_dtype == 0 ? MOEINT4_DTYPE_F16 : desc->scales_dtype;
}

/* One projection of the descriptor as a quant matrix (the two below). */
static inline moeint4_quant_matrix moeint4_desc_projection(
    const moeint4_weights_desc *desc, int in_features, int out_features, const int32_t *qweight,
    const void *scales, const int32_t *qzeros, const int32_t *g_idx)
{
    moeint4_quant_matrix m;
    memset(&m, 0, sizeof m);
    m.struct_size = sizeof m;
    m.format = desc->format;
    m.zero_offset = desc->zero_offset;
    m.num_experts = desc->num_local_experts;
    m.in_features = in_features;
    m.out_features = out_features;
    m.group_size = desc->group_size;
    m.scales_dtype = moeint4_desc_scales_dtype(desc);
    m.qweight = qweight;
    m.scales = scales;
    m.qzeros = qzeros;
    m.g_idx = g_idx;
    return m;
}

/* The descriptor's w13 projection: IN = K, OUT = 2N (gate rows first). */
static inline moeint4_quant_matrix moeint4_desc_w13(const moeint4_weights_desc *desc)
{
    return moeint4_desc_projection(desc, desc->hidden_size, 2 * desc->intermediate_size,
                                   desc->w13_qweight, desc->w13_scales, desc->w13_qzeros,
                                   desc->w13_g_idx);
}

/* The descriptor's w2 projection: IN = N, OUT = K. */
static inline moeint4_quant_matrix moeint4_desc_w2(const moeint4_weights_desc *desc)
{
    return moeint4_desc_projection(desc, desc->intermediate_size, desc->hidden_size,
                                   desc->w2_qweight, desc->w2_scales, desc->w2_qzeros,
                                   desc->w2_g_idx);
}

/* Quantization groups along IN: IN / group_size, or 1 per-channel (-1). */
static inline int moeint4_num_groups(int in_features, int group_size)
{
    return group_size == -1 ? 1 : in_features / group_size;
}

/* Where the int4 checkpoint formats keep their codes, as data a device
 * kernel can take instead of knowing the formats (the layout module,
 * src/layout/unpack.c, reads the same table): which axis a qweight word
 * packs, which nibble holds which position, and the zero point rule. AWQ
 * interleaves a word's 8 output columns: column 8w + c sits in nibble
 * MOEINT4_AWQ_NIBBLE_OF_COLUMN[c]; MOEINT4_AWQ_COLUMN_OF_NIBBLE is its inverse. */
#define MOEINT4_AWQ_NIBBLE_OF_COLUMN {0, 4, 1, 5, 2, 6, 3, 7}
#define MOEINT4_AWQ_COLUMN_OF_NIBBLE {0, 2, 4, 6, 1, 3, 5, 7}

typedef struct moeint4_int4_packing {
    /* 1: qweight [E][IN][OUT/8], a word holds 8 outputs of one input (AWQ);
     * 0: qweight [E][IN/8][OUT], a word holds 8 inputs of one output (GPTQ). */
    int weights_along_out;
    unsigned char weight_nibble[8]; /* nibble of position p (0..7) inside a qweight word */
    int has_zeros;                  /* 0: the zero point is 8 (symmetric) */
    unsigned char zero_nibble[8];   /* nibble of output column c % 8 inside a qzeros word */
    int zero_offset;                /* added to a stored zero */
} moeint4_int4_packing;

static inline moeint4_int4_packing moeint4_quant_matrix_packing(const moeint4_quant_matrix *m)
{
    static const unsigned char awq[8] = MOEINT4_AWQ_NIBBLE_OF_COLUMN;
    moeint4_int4_packing p;
    int is_awq = m->format == MOEINT4_FORMAT_AWQ;
    p.weights_along_out = is_awq;
    p.has_zeros = m->format != MOEINT4_FORMAT_GPTQ_SYM;
    p.zero_offset = m->format == MOEINT4_FORMAT_GPTQ_ASYM ? m->zero_offset : 0;
    for (int i = 0; i < 8; i++) {
        p.weight_nibble[i] = is_awq ? awq[i] : (unsigned char)i;
        p.zero_nibble[i] = p.weight_nibble[i];
    }
    return p;
}

/* Inputs per group: group_size, or IN per-channel (-1). */
static inline int moeint4_effective_group_size(int in_features, int group_size)
{
    return group_size == -1 ? in_features : group_size;
}

/* 1 when expert `expert`'s g_idx is act-order: some input's group is not
 * k / group_size (a trivial g_idx, or none, is plain group order). */
static inline int moeint4_quant_matrix_expert_has_act_order(const moeint4_quant_matrix *m,
                                                           int expert)
{
    if (!m->g_idx)
        return 0;
    int group = moeint4_effective_group_size(m->in_features, m->group_size);
    const int32_t *g_idx = m->g_idx + (size_t)expert * (size_t)m->in_features;
    for (int k = 0; k < m->in_features; k++)
        if (g_idx[k] != k / group)
            return 1;
    return 0;
}

/* 1 when any expert of `m` is act-order. */
static inline int moeint4_quant_matrix_has_act_order(const moeint4_quant_matrix *m)
{
    for (int e = 0; m->g_idx && e < m->num_experts; e++)
        if (moeint4_quant_matrix_expert_has_act_order(m, e))
            return 1;
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* MOEINT4_BACKEND_H */
