/* The bf16 table for CPUs with AVX512_BF16 but without AVX512_VBMI2 (Intel
 * Cooper Lake): the same kernels, compiled without -mavx512vbmi2, so the top
 * nibble of a half takes a shift and an OR instead of one vpshrdw. */
#include "backends/cpu/cpu_kernels_avx512bf16.c"
