// How fast each load engine of the lent GPU streams the int4 decode's
// weight bytes in their real layout, with nothing else in the way (no MMA,
// no dequantization). The layout (hip_internal.h): rows in groups of 8, a
// group's codes chunk after chunk, a chunk 8 rows x 64 bytes = 512
// contiguous bytes. A warp's unit is a block of 16 rows (two groups: two
// contiguous streams) and a quarter of their chunks, as the decode GEMVs
// split a row over 4 warps. Engines:
//   cpasync: 16 bytes a lane a stream a step into a ring of STAGES 1 KB
//            slots (today's decode kernels)
//   bulk:    one elected lane issues cp.async.bulk copies of B chunks a
//            stream a step into a ring of STAGES slots, completed on an
//            mbarrier a slot (sm_90)
//   ldg:     16-byte register loads, U chunks a stream in flight a lane
// 8 warps a block, as many blocks as an SM holds (printed as n/SM; a
// label's "bound" is the kernel's __launch_bounds__ minimum, not a cap).
// Then the ceiling: the same byte counts (and larger) read contiguously by
// the whole grid (16-byte loads, U in flight a thread), and an empty kernel
// (what the timer adds). Prints the median of 20 kernel times (CUDA events,
// L2 flushed before each) and GB/s.
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/stream_engines bench/hip/stream_engines.cu
#include <cstdint>
#include <cstdio>

#include "stream_timing.cuh"

constexpr int CHUNK = 512; // bytes of one chunk of a group (8 rows x 64 B)

__device__ __forceinline__ unsigned shared_address(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// unit u of a warp: its two streams' first bytes and its chunk count
struct unit_span {
    const uint8_t *stream[2];
    int chunks;
};

__device__ __forceinline__ unit_span unit_of(const uint8_t *codes, long u, int group_chunks,
                                             int splits)
{
    const int per = group_chunks / splits;
    const long block = u / splits;
    const int first = (int)(u % splits) * per;
    unit_span s;
    for (int h = 0; h < 2; h++)
        s.stream[h] = codes + ((block * 2 + h) * group_chunks + first) * (long)CHUNK;
    s.chunks = per;
    return s;
}

__device__ __forceinline__ unsigned fold(const uint4 &v) { return v.x + v.y + v.z + v.w; }

template <int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
    stream_cpasync(const uint8_t *codes, long units, int group_chunks, int splits, unsigned *sink)
{
    extern __shared__ uint4 ring_all[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint4 *ring = ring_all + warp * STAGES * 64;
    const long warps = (long)gridDim.x * 8;
    unsigned acc = 0;
    for (long u = (long)blockIdx.x * 8 + warp; u < units; u += warps) {
        const unit_span span = unit_of(codes, u, group_chunks, splits);
        auto issue = [&](int c, int s) {
            if (c < span.chunks)
                for (int h = 0; h < 2; h++) {
                    const unsigned d = shared_address(ring + s * 64 + h * 32 + lane);
                    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d),
                                 "l"(span.stream[h] + (long)c * CHUNK + lane * 16));
                }
            asm volatile("cp.async.commit_group;\n" ::);
        };
        for (int s = 0; s < STAGES - 1; s++)
            issue(s, s);
        for (int c = 0; c < span.chunks; c++) {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2));
            const uint4 *slot = ring + (c % STAGES) * 64;
            acc ^= fold(slot[lane]) + fold(slot[32 + lane]);
            asm volatile("" ::: "memory");
            issue(c + STAGES - 1, (c + STAGES - 1) % STAGES);
        }
        asm volatile("cp.async.wait_group 0;\n" ::);
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

__device__ __forceinline__ void barrier_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n\t.reg .pred done;\n"
                 "WAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

// A slot: two streams x B chunks; slot s of warp w at ring + (w * STAGES + s) * 2 * B * CHUNK.
template <int STAGES, int B>
__global__ void __launch_bounds__(256, 1)
    stream_bulk(const uint8_t *codes, long units, int group_chunks, int splits, unsigned *sink)
{
    extern __shared__ uint4 ring_all[];
    __shared__ uint64_t bars_all[8 * STAGES];
    constexpr int SLOT = 2 * B * CHUNK;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint8_t *ring = (uint8_t *)ring_all + (size_t)warp * STAGES * SLOT;
    uint64_t *bars = bars_all + warp * STAGES;
    if (lane == 0)
        for (int s = 0; s < STAGES; s++)
            asm volatile(
                "mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(bars + s)));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    __syncwarp();
    const long warps = (long)gridDim.x * 8;
    unsigned acc = 0, step = 0; // step: the warp's steps so far (slot step % STAGES, its phase)
    for (long u = (long)blockIdx.x * 8 + warp; u < units; u += warps) {
        const unit_span span = unit_of(codes, u, group_chunks, splits);
        const int steps = (span.chunks + B - 1) / B;
        auto issue = [&](int i) { // step i of this unit into slot (step + i) % STAGES
            if (lane == 0 && i < steps) {
                const int s = (step + i) % STAGES, n = min(B, span.chunks - i * B);
                const unsigned bar = shared_address(bars + s), bytes = (unsigned)n * CHUNK;
                asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                             "r"(2 * bytes)
                             : "memory");
                for (int h = 0; h < 2; h++)
                    asm volatile(
                        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                        "[%0], [%1], %2, [%3];\n" ::"r"(
                            shared_address(ring + s * SLOT + h * B * CHUNK)),
                        "l"(span.stream[h] + (long)i * B * CHUNK), "r"(bytes), "r"(bar)
                        : "memory");
            }
        };
        for (int i = 0; i < STAGES - 1; i++)
            issue(i);
        for (int i = 0; i < steps; i++) {
            const unsigned at = step + i;
            barrier_wait(shared_address(bars + at % STAGES), (at / STAGES) & 1u);
            const uint4 *slot = (const uint4 *)(ring + (at % STAGES) * SLOT);
            const int n = min(B, span.chunks - i * B);
#pragma unroll
            for (int c = 0; c < B; c++)
                if (c < n)
                    acc ^= fold(slot[c * 32 + lane]) + fold(slot[(B + c) * 32 + lane]);
            __syncwarp(); // the slot refilled next was read a step ago: every lane is past it
            issue(i + STAGES - 1);
        }
        step += steps;
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

template <int U, int MIN_BLOCKS>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
    stream_ldg(const uint8_t *codes, long units, int group_chunks, int splits, unsigned *sink)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long warps = (long)gridDim.x * 8;
    unsigned acc = 0;
    for (long u = (long)blockIdx.x * 8 + warp; u < units; u += warps) {
        const unit_span span = unit_of(codes, u, group_chunks, splits);
        for (int c = 0; c < span.chunks; c += U) {
            uint4 v[2][U];
#pragma unroll
            for (int j = 0; j < U; j++)
#pragma unroll
                for (int h = 0; h < 2; h++)
                    v[h][j] =
                        c + j < span.chunks
                            ? __ldg((const uint4 *)(span.stream[h] + (long)(c + j) * CHUNK) + lane)
                            : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int j = 0; j < U; j++)
                acc ^= fold(v[0][j]) + fold(v[1][j]);
        }
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

// The whole grid reads [0, bytes) in order: thread i takes uint4 i, i + n, ...
template <int U>
__global__ void __launch_bounds__(256)
    read_contiguous(const uint4 *data, long count, unsigned *sink)
{
    const long stride = (long)gridDim.x * blockDim.x;
    unsigned acc = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += U * stride) {
        uint4 v[U];
#pragma unroll
        for (int j = 0; j < U; j++)
            v[j] = i + j * stride < count ? __ldg(data + i + j * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < U; j++)
            acc ^= fold(v[j]);
    }
    if (acc == 0x12345678u)
        sink[0] = acc;
}

__global__ void empty_kernel(unsigned *sink)
{
    if (threadIdx.x == 1024)
        sink[0] = 1;
}

template <typename Kernel>
float time_kernel(Kernel k, int shared, const uint8_t *codes, long units, int group_chunks,
                  int splits, const stream_bench &bench, int *per_sm)
{
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, shared);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, k, 256, shared);
    const int blocks = bench.sms * *per_sm;
    return bench.median_us(
        [&] { k<<<blocks, 256, shared>>>(codes, units, group_chunks, splits, bench.sink); });
}

int main()
{
    const stream_bench bench;
    const int sms = bench.sms;
    uint8_t *codes;
    struct Shape {
        const char *name;
        long rows;
        int row_bytes, splits; // splits: warps a row block (gemm2 of Qwen3: a slot a warp)
    } shapes[] = { { "mixtral w2 x2 (8192 rows x 7168 B)", 8192, 7168, 4 },
                   { "mixtral w13 x2 (57344 rows x 2048 B)", 57344, 2048, 4 },
                   { "qwen3 w13 x8 (12288 rows x 1024 B)", 12288, 1024, 4 },
                   { "qwen3 w2 x8 (16384 rows x 384 B)", 16384, 384, 1 } };
    cudaMalloc(&codes, (size_t)57344 * 2048);
    cudaMemset(codes, 1, (size_t)57344 * 2048);
    for (const Shape &s : shapes) {
        const double mb = (double)s.rows * s.row_bytes / 1e6;
        const int group_chunks = s.row_bytes * 8 / CHUNK;
        const long units = s.rows / 16 * s.splits;
        printf("%s, %.1f MB, %d chunks a warp\n", s.name, mb, group_chunks / s.splits);
#define RUN(NAME, KERNEL, SHARED)                                                                  \
    {                                                                                              \
        int per_sm = 0;                                                                            \
        const float us =                                                                           \
            time_kernel(KERNEL, SHARED, codes, units, group_chunks, s.splits, bench, &per_sm);     \
        printf("  %-24s %d/SM: %8.2f us %7.0f GB/s\n", NAME, per_sm, us, mb * 1e3 / us);           \
    }
        RUN("cpasync ring 4, bound 2", (stream_cpasync<4, 2>), 8 * 4 * 1024)
        RUN("cpasync ring 4, bound 3", (stream_cpasync<4, 3>), 8 * 4 * 1024)
        RUN("bulk ring 4 x 1 chunk", (stream_bulk<4, 1>), 8 * 4 * 2 * 1 * CHUNK)
        RUN("bulk ring 4 x 2 chunks", (stream_bulk<4, 2>), 8 * 4 * 2 * 2 * CHUNK)
        RUN("bulk ring 3 x 4 chunks", (stream_bulk<3, 4>), 8 * 3 * 2 * 4 * CHUNK)
        RUN("bulk ring 6 x 2 chunks", (stream_bulk<6, 2>), 8 * 6 * 2 * 2 * CHUNK)
        RUN("ldg 2 in flight, bound 3", (stream_ldg<2, 3>), 0)
        RUN("ldg 4 in flight, bound 3", (stream_ldg<4, 3>), 0)
        RUN("ldg 4 in flight, bound 4", (stream_ldg<4, 4>), 0)
        RUN("ldg 8 in flight, bound 2", (stream_ldg<8, 2>), 0)
    }
    printf("ceiling: contiguous reads by the whole grid\n");
    const size_t big = (size_t)2048 << 20;
    uint8_t *data;
    cudaMalloc(&data, big);
    cudaMemset(data, 1, big);
    printf("  empty kernel: %.2f us\n",
           bench.median_us([&] { empty_kernel<<<sms, 256>>>(bench.sink); }));
    for (const size_t bytes : { (size_t)58720256, (size_t)117440512, (size_t)12582912,
                                (size_t)6291456, (size_t)469762048, big }) {
        const long count = (long)(bytes / 16);
        for (const int blocks_per_sm : { 4, 8 }) {
#define CEIL(U)                                                                                    \
    {                                                                                              \
        const float us = bench.median_us([&] {                                                     \
            read_contiguous<U>                                                                     \
                <<<sms * blocks_per_sm, 256>>>((const uint4 *)data, count, bench.sink);            \
        });                                                                                        \
        printf("  %8.1f MB, %d/SM, %d in flight: %9.2f us %7.0f GB/s\n", bytes / 1e6,              \
               blocks_per_sm, U, us, bytes / 1e3 / us);                                            \
    }
            CEIL(2) CEIL(4) CEIL(8)
        }
    }
    cudaError_t e = cudaDeviceSynchronize();
    printf("status: %s\n", cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
