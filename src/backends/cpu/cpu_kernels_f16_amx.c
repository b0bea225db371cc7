/* The AMX table for F16 activations: the AMX table compiled again with
 * input rows and intermediate activations in two bf16 planes (hi + lo), each
 * multiplied on the tile unit. An f16 input is held exactly and the
 * intermediate to 16 significant bits, where the AVX-512F table it replaces
 * for F16 holds both in f32 at a fraction of the tile unit's rate. */
#define MI4_CPU_AMX_TABLE 1
#define BF16_PLANES 2
#include "backends/cpu/cpu_kernels_avx512bf16.c"
