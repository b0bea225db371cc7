/* What differs between the two platforms the HIP sources build for, outside
 * the matrix cores (hip_matrix_core.h): the runtime header, the warp width, the
 * asynchronous global->shared copy, and the 16-bit float conversions (done
 * with integer bit operations so both compilers give the same bits; group
 * scales, exact either way, by the hardware on NVIDIA). */
#ifndef MOEINT4_BACKENDS_HIP_HIP_PLATFORM_H
#define MOEINT4_BACKENDS_HIP_HIP_PLATFORM_H

#include <stdint.h>

#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#define MI4_PLATFORM_AMD 1
#define MI4_WARP 64 /* gfx90a and gfx940 run wave64 */
#else
#include "backends/hip/hip_to_cuda.h"
#define MI4_PLATFORM_NVIDIA 1
#define MI4_WARP 32
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MI4_HAVE_CP_ASYNC 1
#endif

#define MI4_DEVICE __device__ __forceinline__
#define MI4_HOST_DEVICE __host__ __device__ __forceinline__

/* ---- kernel launches ----
 * mi4_launch(kernel, grid, block, shared_bytes, stream, args...) returns this
 * launch's own error (hipLaunchKernel's result): the runtime's last error is
 * neither read nor cleared, so an error the caller left pending stays theirs
 * and is never reported as ours. Arguments convert to the kernel's parameter
 * types first. */
template <typename... Params>
inline hipError_t mi4_launch_values(void (*kernel)(Params...), dim3 grid, dim3 block,
                                    size_t shared_bytes, hipStream_t stream, Params... values)
{
    void *pointers[] = {(void *)&values...};
    return hipLaunchKernel((const void *)kernel, grid, block, pointers, shared_bytes, stream);
}

#if defined(MI4_PLATFORM_NVIDIA)
/* cudaLaunchKernelExC with the values converted to the parameter types. */
template <typename... Params>
inline hipError_t mi4_launch_config(const cudaLaunchConfig_t &config, void (*kernel)(Params...),
                                    Params... values)
{
    void *pointers[] = {(void *)&values...};
    return cudaLaunchKernelExC(&config, (const void *)kernel, pointers);
}
#endif

template <typename... Params, typename... Args>
inline hipError_t mi4_launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                             hipStream_t stream, Args... args)
{
    static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count");
    return mi4_launch_values<Params...>(kernel, grid, block, shared_bytes, stream,
                                        static_cast<Params>(args)...);
}

/* mi4_launch_early: as mi4_launch, but on NVIDIA (sm_90+) the kernel may
 * start while the previous kernel on the stream is still running (Hopper's
 * programmatic dependent launch): its blocks take the SMs the previous
 * kernel's blocks free, as soon as those blocks have all called
 * mi4_grid_allow_next. Such a kernel must call mi4_grid_wait_previous before
 * it reads or writes anything the previous kernel writes; what it does
 * before (loading weights, reading the caller's inputs) overlaps the
 * previous kernel's tail. Elsewhere, and on the legacy default stream (0),
 * an ordinary launch. */
template <typename... Params, typename... Args>
inline hipError_t mi4_launch_early(void (*kernel)(Params...), dim3 grid, dim3 block,
                                   size_t shared_bytes, hipStream_t stream, Args... args)
{
#if defined(MI4_PLATFORM_NVIDIA)
    static_assert(sizeof...(Params) == sizeof...(Args), "kernel argument count");
    if (stream == nullptr)
        return mi4_launch(kernel, grid, block, shared_bytes, stream, args...);
    cudaLaunchAttribute attribute;
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    return mi4_launch_config<Params...>(config, kernel, static_cast<Params>(args)...);
#else
    return mi4_launch(kernel, grid, block, shared_bytes, stream, args...);
#endif
}

/* In a kernel launched by mi4_launch_early: waits until the previous
 * kernel on the stream has finished and its writes are visible. */
MI4_DEVICE void mi4_grid_wait_previous()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/* In a kernel followed by one launched with mi4_launch_early: lets that
 * kernel's blocks start once every block of this one has called it. */
MI4_DEVICE void mi4_grid_allow_next()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

/* ---- 16-bit floats as bit patterns ---- */

MI4_HOST_DEVICE float mi4_dev_bits_to_f32(uint32_t bits)
{
    union { uint32_t u; float f; } v;
    v.u = bits;
    return v.f;
}

MI4_HOST_DEVICE uint32_t mi4_dev_f32_to_bits(float f)
{
    union { uint32_t u; float f; } v;
    v.f = f;
    return v.u;
}

MI4_HOST_DEVICE float mi4_dev_bf16_to_f32(uint16_t h) { return mi4_dev_bits_to_f32((uint32_t)h << 16); }

/* Nearest even; NaN stays a quiet NaN with its sign (as src/base/half.h). */
MI4_HOST_DEVICE uint16_t mi4_dev_f32_to_bf16(float f)
{
    uint32_t bits = mi4_dev_f32_to_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

MI4_HOST_DEVICE float mi4_dev_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1fu)
        return mi4_dev_bits_to_f32(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        /* zero or subnormal: mantissa * 2^-24, exact in f32 */
        float magnitude = (float)mantissa * (1.0f / 16777216.0f);
        return sign ? -magnitude : magnitude;
    }
    return mi4_dev_bits_to_f32(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/* A group scale's bits (bf16, or f16) as f32, exactly. On NVIDIA an f16
 * scale takes one hardware conversion: the bit-level one above cost about
 * 20 instructions and a branch a scale (SASS of int4_routed_decode,
 * 2026-12-03). Scales are finite (validated at prepare), so both give the
 * same value. */
MI4_DEVICE float mi4_dev_scale_to_f32(uint16_t bits, int bf16)
{
    if (bf16)
        return mi4_dev_bf16_to_f32(bits);
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;\n" : "=f"(f) : "h"(bits));
    return f;
#else
    return mi4_dev_f16_to_f32(bits);
#endif
}

/* Nearest even, overflow to Inf, NaN kept. */
MI4_HOST_DEVICE uint16_t mi4_dev_f32_to_f16(float f)
{
    uint32_t bits = mi4_dev_f32_to_bits(f);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (abs_bits >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    if (abs_bits < 0x38800000u) {
        /* subnormal: let the float adder round at 2^-24 */
        float magnitude = mi4_dev_bits_to_f32(abs_bits);
        uint32_t r = mi4_dev_f32_to_bits(magnitude + 0.5f) - mi4_dev_f32_to_bits(0.5f);
        return (uint16_t)(sign | r);
    }
    uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
    abs_bits += 0xc8000fffu + mantissa_odd;
    return (uint16_t)(sign | (abs_bits >> 13));
}

/* A 16-byte load of data read once (decode weights): on NVIDIA with the
 * evict-first hint, so the weights do not push out what is reused. */
MI4_DEVICE uint4 mi4_load_stream(const uint4 *p)
{
#if defined(MI4_PLATFORM_NVIDIA)
    return __ldcs(p);
#else
    return *p;
#endif
}

/* Inclusive prefix sum of v over the lanes of a warp (lane i: lanes 0..i). */
MI4_DEVICE int mi4_warp_inclusive_scan(int v)
{
    const int lane = (int)(threadIdx.x % MI4_WARP);
#pragma unroll
    for (int offset = 1; offset < MI4_WARP; offset *= 2) {
#if defined(MI4_PLATFORM_NVIDIA)
        const int up = __shfl_up_sync(0xffffffffu, v, offset);
#else
        const int up = __shfl_up(v, offset);
#endif
        if (lane >= offset)
            v += up;
    }
    return v;
}

/* Sum over the lanes of a warp, in a fixed butterfly order (deterministic;
 * float or int). */
template <typename T> MI4_DEVICE T mi4_warp_sum(T v)
{
#pragma unroll
    for (int offset = MI4_WARP / 2; offset > 0; offset /= 2) {
#if defined(MI4_PLATFORM_NVIDIA)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
#else
        v += __shfl_xor(v, offset);
#endif
    }
    return v;
}

/* ---- global -> shared copies of 16 bytes ----
 * NVIDIA sm_80+: cp.async (zero-filled when !valid), completed in groups.
 * Elsewhere: an ordinary load and store, complete at once, so the same
 * multi-stage pipeline code stays correct (just not overlapped). */

MI4_DEVICE void mi4_copy16(void *smem_dst, const void *global_src, bool valid)
{
#if defined(MI4_HAVE_CP_ASYNC)
    unsigned dst = (unsigned)__cvta_generic_to_shared(smem_dst);
    int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src),
                 "r"(src_bytes));
#else
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (valid)
        v = *(const uint4 *)global_src;
    *(uint4 *)smem_dst = v;
#endif
}

MI4_DEVICE void mi4_copy_commit()
{
#if defined(MI4_HAVE_CP_ASYNC)
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/* Waits until at most `pending` committed groups are still in flight. */
template <int pending> MI4_DEVICE void mi4_copy_wait()
{
#if defined(MI4_HAVE_CP_ASYNC)
    asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
#endif
}

#endif
