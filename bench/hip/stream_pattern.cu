// How fast the lent GPU streams int4 weight bytes in the access patterns the
// decode kernels could use, with nothing else in the way (no MMA, no
// dequantization): a warp copies one 1 KB chunk a step through a cp.async
// ring of STAGES chunks in shared memory, 8 warps a block, the block count
// the SMs hold, as hip_int4_decode.hip does. Patterns, per step of a warp:
//   rows16x64: 16 rows x 64 bytes (today's [E, N, K/2] layout, 128 inputs)
//   rows8x128: 8 rows x 128 bytes (whole 128-byte lines, 256 inputs)
//   tiled1k:   1 KB contiguous (a layout re-tiled to the chunk)
// Each warp walks a run of consecutive chunks of its rows (a quarter of the
// row, as gemm2's 4 warps a slot do). Prints the median of 20 kernel times
// (CUDA events, L2 flushed before each) and GB/s. The blocks an SM holds
// are what its shared memory allows, or (`N/SM`) forced down to N by extra
// shared memory, as the decode kernels' staged token rows do (the routed
// decode: 2 an SM); the M = 8 shapes are the bytes Mixtral's routed
// decode reads with all 8 experts hit.
//   nvcc -O3 -arch=sm_90a -o /tmp/stream_pattern bench/hip/stream_pattern.cu && /tmp/stream_pattern
#include <cstdint>
#include <cstdio>

#include "stream_timing.cuh"

enum Pattern { ROWS16X64, ROWS8X128, TILED1K };

__device__ __forceinline__ void copy16(void *dst, const void *src)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

// rows x row_bytes of codes; a work unit = a row block (16 or 8 rows) and a
// quarter of its chunks. The sum of the words read keeps the loads alive.
template <Pattern P, int STAGES>
__global__ void __launch_bounds__(256, 2)
    stream(const uint8_t *codes, int rows, int row_bytes, int splits, unsigned *sink)
{
    extern __shared__ uint4 ring_all[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint4 *ring = ring_all + warp * STAGES * 64;
    const int block_rows = P == ROWS8X128 ? 8 : 16;
    const int chunk_row_bytes = 1024 / block_rows; // 64 or 128
    const int chunks = row_bytes / chunk_row_bytes, per = chunks / splits;
    const long units = (long)(rows / block_rows) * splits;
    const long warps = (long)gridDim.x * 8;
    unsigned acc = 0;
    for (long u = (long)blockIdx.x * 8 + warp; u < units; u += warps) {
        const long rb = u / splits;
        const int first = (int)(u % splits) * per;
        auto issue = [&](int c, int s) {
            if (c < per) {
                uint4 *slot = ring + s * 64;
                for (int h = 0; h < 2; h++) {
                    const uint8_t *src;
                    if (P == TILED1K) {
                        src = codes + ((rb * chunks + first + c) * 1024) + h * 512 + lane * 16;
                    } else if (P == ROWS16X64) {
                        const long row = rb * 16 + (lane >> 2) + 8 * h;
                        src = codes + row * row_bytes + (long)(first + c) * 64 + (lane & 3) * 16;
                    } else {
                        const long row = rb * 8 + (lane >> 2);
                        src = codes + row * row_bytes + (long)(first + c) * 128 + h * 64 +
                              (lane & 3) * 16;
                    }
                    copy16(slot + h * 32 + lane, src);
                }
            }
            asm volatile("cp.async.commit_group;\n" ::);
        };
        for (int s = 0; s < STAGES - 1; s++)
            issue(s, s);
        for (int c = 0; c < per; c++) {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
            const uint4 *slot = ring + (c % STAGES) * 64;
            const uint4 a = slot[lane], b = slot[32 + lane];
            acc ^= a.x + a.y + a.z + a.w + b.x + b.y + b.z + b.w;
            asm volatile("" ::: "memory");
            issue(c + STAGES - 1, (c + STAGES - 1) % STAGES);
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

template <Pattern P, int STAGES>
float time_one(const uint8_t *codes, int rows, int row_bytes, int force_per_sm,
               const stream_bench &bench, int *ran_per_sm)
{
    auto k = stream<P, STAGES>;
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    const int ring = 8 * STAGES * 1024;
    /* a block's share of the SM's shared memory (228 KB, 1 KB a block reserved) */
    const int forced = force_per_sm > 0 ? 228 * 1024 / force_per_sm - 1024 : 0;
    const int shared = std::min(optin, std::max(ring, forced));
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, 256, shared);
    *ran_per_sm = per_sm;
    return bench.median_us(
        [&] { k<<<bench.sms * per_sm, 256, shared>>>(codes, rows, row_bytes, 4, bench.sink); });
}

int main()
{
    const stream_bench bench;
    uint8_t *codes;
    struct Shape {
        const char *name;
        int rows, row_bytes;
    } shapes[] = { { "mixtral w2 x2 (8192 x 7168 B)", 8192, 7168 },
                   { "mixtral w13 x2 (57344 x 2048 B)", 57344, 2048 },
                   { "qwen3 w13 x8 (12288 x 1024 B)", 12288, 1024 },
                   { "mixtral w2 x8, M = 8 (32768 x 7168 B)", 32768, 7168 },
                   { "mixtral w13 x8, M = 8 (229376 x 2048 B)", 229376, 2048 } };
    const size_t most = (size_t)229376 * 2048;
    cudaMalloc(&codes, most);
    cudaMemset(codes, 1, most);
    for (const Shape &s : shapes) {
        const double mb = (double)s.rows * s.row_bytes / 1e6;
        printf("%s, %.1f MB\n", s.name, mb);
#define RUN(P, ST, FORCE)                                                                          \
    {                                                                                              \
        int ran = 0;                                                                               \
        float us = time_one<P, ST>(codes, s.rows, s.row_bytes, FORCE, bench, &ran);                \
        printf("  %-10s ring %d, %d/SM%s: %8.2f us %7.0f GB/s\n", #P, ST, ran,                     \
               FORCE ? " (forced)" : "", us, mb * 1e3 / us);                                       \
    }
        // clang-format off
        RUN(ROWS16X64, 4, 0) RUN(ROWS8X128, 4, 0) RUN(TILED1K, 4, 0)
        RUN(ROWS16X64, 8, 0) RUN(ROWS8X128, 8, 0) RUN(TILED1K, 8, 0)
        RUN(TILED1K, 4, 2) RUN(TILED1K, 4, 3) RUN(TILED1K, 4, 4)
        RUN(TILED1K, 8, 2) RUN(TILED1K, 6, 2)
        // clang-format on
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
