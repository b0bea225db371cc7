/* TMA (Hopper's tensor memory accelerator) for the warp-specialized GEMMs
 * (hip_wgmma_ws.hip: weight rows; hip_int4_ws.hip: gemm2's token rows,
 * contiguous in tile order): a 2D descriptor of a row-major bf16 matrix in
 * 128B-swizzled boxes of 64 inputs (the layout the wgmma descriptors read),
 * and the box load counted on a stage's mbarrier by bytes. NVIDIA builds
 * with MOEINT4_HIP_WGMMA only; MOEINT4_HIP_WGMMA_TMA=0 turns TMA off. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_TMA_H
#define MOEINT4_BACKENDS_HIP_HIP_TMA_H

#include "backends/hip/hip_matrix_core.h"

#if defined(MI4_PLATFORM_NVIDIA) && defined(MOEINT4_HIP_WGMMA)
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h> /* CUtensorMap */

/* false with MOEINT4_HIP_WGMMA_TMA=0 */
inline bool mi4_tma_wanted(void)
{
    const char *knob = getenv("MOEINT4_HIP_WGMMA_TMA");
    return knob == nullptr || strcmp(knob, "0") != 0;
}

/* rows x inner bf16 at `base` (row stride inner) in boxes of box_inner (64:
 * 128 bytes) x box_rows; false where TMA cannot take it (rows not a
 * multiple of 16 bytes, base not 16-byte aligned) or the driver has no
 * encoder (map is left as the caller set it). Reads past `rows` fill zeros. */
inline bool mi4_tma_map_bf16(CUtensorMap *map, const void *base, uint64_t inner, uint64_t rows,
                             uint32_t box_inner, uint32_t box_rows)
{
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                  const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                  const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                  CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (inner % 8 != 0 || (uintptr_t)base % 16 != 0 || rows == 0 ||
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess || fn == nullptr)
        return false;
    const cuuint64_t dims[2] = { (cuuint64_t)inner, (cuuint64_t)rows };
    const cuuint64_t strides[1] = { (cuuint64_t)inner * 2 };
    const cuuint32_t box[2] = { box_inner, box_rows }, steps[2] = { 1, 1 };
    return ((encode_fn)fn)(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides,
                           box, steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

#if defined(MI4_HAVE_WGMMA)
/* One arrival on bar that also expects `bytes` of asynchronous copies. */
MI4_DEVICE void mi4_mbar_expect_bytes(uint64_t *bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     (unsigned)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
}
/* The box at (x inputs, y rows) of `map` into dst, counted on bar. */
MI4_DEVICE void mi4_tma_load_box(void *dst, const CUtensorMap *map, int x, int y, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
                 "l"((uint64_t)map), "r"(x), "r"(y),
                 "r"((unsigned)__cvta_generic_to_shared(bar))
                 : "memory");
}
#endif
#endif

#endif
