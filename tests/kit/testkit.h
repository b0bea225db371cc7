/* The test kit: everything of tools/synth/synth.h (random checkpoints in
 * every format, routing, activations, the double-precision reference) plus
 * what only tests need: the cases of tests/data/vllm. Link moeint4_test_kit.
 * Sources: tests/kit/tk_*.c on top of tools/synth/. */
#ifndef MOEINT4_TESTS_KIT_TESTKIT_H
#define MOEINT4_TESTS_KIT_TESTKIT_H

#include <stddef.h>
#include <stdint.h>

#include "synth.h"

/* ---- poisoning (tk_poison itself is in synth.h) ---- */
/* malloc'd and poisoned (at least one byte); NULL when out of memory. */
void *tk_poisoned_alloc(size_t bytes);
/* malloc'd copy of `bytes` bytes of src (at least one byte). */
void *tk_copy_alloc(const void *src, size_t bytes);
/* 1 when every byte still holds TK_POISON: the call wrote nothing there. */
int tk_still_poisoned(const void *data, size_t bytes);

/* bf16 bit patterns on a line where adjacent representable values are
 * adjacent integers (negative values mirrored), so |a - b| counts ulps. */
int32_t tk_bf16_ordinal(uint16_t bits);

/* ---- tests/data/vllm: cases produced by vLLM's own helpers ---- */
/* Reads a whole file into a malloc'd buffer; returns NULL when missing.
 * path is relative to MOEINT4_VECTORS_DIR (set by tests/kit/CMakeLists.txt). */
void *tk_read_vector(const char *relative_path, size_t *bytes);
/* Reads <case_name>/<array>.bin; NULL when missing or not exactly `bytes` long. */
void *tk_read_vector_array(const char *case_name, const char *array, size_t bytes);

/* One vector case's parameters (from manifest.json). */
typedef struct tk_vector_params {
    const char *name; /* folder, e.g. "case1_gptq_sym_g128" */
    moeint4_format format;
    int num_experts, hidden_size, intermediate_size, group_size, num_tokens, topk;
} tk_vector_params;
/* The known cases: index 0, 1, ...; NULL past the last. */
const tk_vector_params *tk_vector_case_params(int index);

/* A vector case as a tk_layer: natural codes/zeros/scales from the debug_*
 * arrays (F16 scales, zero_offset 0, identity expert map) packed by
 * tk_matrix_pack, plus the case's inputs and vLLM's f32 output. SiLU,
 * router weight on the output, BF16 activations. */
typedef struct tk_vector_case {
    const tk_vector_params *params;
    tk_layer layer;
    uint16_t *hidden;    /* [M][K] bf16 */
    int32_t *topk_ids;   /* [M][topk] */
    float *topk_weights; /* [M][topk] */
    float *ref_out;      /* [M][K] ref_out_f32.bin */
} tk_vector_case;
/* 0, or -1 when a file is missing or has the wrong size. */
int tk_vector_case_load(tk_vector_case *c, const tk_vector_params *params);
void tk_vector_case_free(tk_vector_case *c);

/* ---- CPU kernel tables (tk_cpu.c; GCC's view of the CPU) ---- */
/* Level of a table named as MOEINT4_CPU_KERNEL names it: 0 scalar, 1 avx2
 * (AVX2 + FMA), 2 avx512 (F/BW/DQ/VL), 3 avx512bf16, 4 amx (AMX-BF16 with
 * the OS's grant, VBMI2); unset or unknown: 4. */
int tk_cpu_kernel_level(const char *name);
/* The name of a level's table, as MOEINT4_CPU_KERNEL spells it. */
const char *tk_cpu_kernel_name(int level);
/* The best level at or below `cap` whose tables this CPU runs. */
int tk_cpu_best_level(int cap);
/* 1 when this CPU runs the tables of `level` (VBMI2 apart). */
int tk_cpu_has_kernels(int level);
int tk_cpu_has_vbmi2(void);
/* Why a run with MOEINT4_CPU_KERNEL forced would only repeat another run
 * (written to `why`, which is returned), or NULL when it checks a table of
 * its own: the CPU lacks the table (the library then falls to the best
 * below), or it is the CPU's best, which the unforced run checks. */
const char *tk_cpu_forced_kernel_skip(char *why, size_t capacity);

#endif
