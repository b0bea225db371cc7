/* The subset of the HIP runtime API this backend uses, mapped onto CUDA, so
 * the same .hip sources build with nvcc for NVIDIA GPUs. Debian's HIP 5.2
 * NVIDIA headers do not build with CUDA 13, hence this small header of our
 * own. Add a name here when a .hip file starts using it. */
#ifndef MOEINT4_BACKENDS_HIP_HIP_TO_CUDA_H
#define MOEINT4_BACKENDS_HIP_HIP_TO_CUDA_H

#include <cuda_runtime.h>

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaFuncAttributes hipFuncAttributes;
typedef cudaMemcpyKind hipMemcpyKind;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;

#define hipSuccess cudaSuccess
#define hipErrorMemoryAllocation cudaErrorMemoryAllocation
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipHostMallocMapped cudaHostAllocMapped
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeSharedMemPerBlockOptin cudaDevAttrMaxSharedMemoryPerBlockOptin
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal

#define hipGetErrorString cudaGetErrorString
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc cudaHostAlloc
#define hipHostFree cudaFreeHost
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipMemcpy cudaMemcpy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipFuncGetAttributes cudaFuncGetAttributes
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define hipLaunchKernel cudaLaunchKernel
#define hipMemset cudaMemset
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy

#endif
