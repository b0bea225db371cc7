// Host stand-ins for the device built-ins hip_platform.h / hip_slots.h name
// in functions the check never calls.
#include <cuda_runtime.h>
#include <vector_functions.h>
struct { unsigned x, y, z; } threadIdx, blockIdx, blockDim, gridDim;
template <class T> T __ldcs(const T *p) { return *p; }
template <class T> T __ldg(const T *p) { return *p; }
inline int __shfl_up_sync(unsigned, int v, int) { return v; }
inline int __shfl_sync(unsigned, int v, int) { return v; }
inline int __shfl_down_sync(unsigned, int v, int) { return v; }
inline int __shfl_xor_sync(unsigned, int v, int) { return v; }
inline int atomicCAS(int *p, int c, int v) { int o = *p; if (o == c) *p = v; return o; }
inline int atomicExch(int *p, int v) { int o = *p; *p = v; return o; }
inline int atomicMin(int *p, int v) { int o = *p; if (v < o) *p = v; return o; }
inline int atomicAdd(int *p, int v) { int o = *p; *p += v; return o; }
inline void __threadfence() {}
inline void __syncthreads() {}
inline void __syncwarp() {}
inline void __threadfence_system() {}
