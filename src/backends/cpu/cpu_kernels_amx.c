/* The AMX table for CPUs with AMX-TILE and AMX-BF16 (Intel Sapphire Rapids
 * and later): the bf16 table compiled again with AMX, its tile pair run on
 * the tile unit where the jobs allow it (cpu_amx_tile.h) and on the bf16
 * kernels otherwise; rows, activations and outputs are the bf16 table's. */
#define MI4_CPU_AMX_TABLE 1 /* (GCC and clang name their AMX-BF16 macros apart) */
#include "backends/cpu/cpu_kernels_avx512bf16.c"
