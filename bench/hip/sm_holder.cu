// Takes SMs away from everything else in the process while a bench times a
// forward: a stand-in, on an H100, for a GPU with fewer SMs for the same
// HBM (an H200 has 1.4x an H100's bandwidth over the same 132 SMs; an H100
// with 38 SMs held gives each of its 94 SMs about an H200 SM's share).
// Sizing the grids for fewer SMs does not do this: the blocks spread over
// every SM (sm_placement.cu).
//
// sm_holder_start(n) launches n blocks of 1024 threads, each taking all the
// shared memory a block may have, so one lands on each of n distinct SMs
// and no block that needs shared memory (every GEMM and GEMV of the HIP
// backend) can join it there; small kernels without shared memory (the
// routing, the combine) still may. It returns once all n are resident and
// have reported distinct SMs. The blocks wait, asleep, on a flag in mapped
// host memory until sm_holder_stop(). Nothing may synchronize the whole
// device in between (cudaDeviceSynchronize would wait for the holder): wait
// on streams or events. A block gives up by itself after about 60 s.
//   nvcc -O3 -arch=sm_90a -shared -Xcompiler -fPIC -o libsm_holder.so bench/hip/sm_holder.cu
// hip_bench.py loads it (MOEINT4_BENCH_HOLD_SMS, MOEINT4_BENCH_SM_HOLDER).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace
{

// The SM the calling thread runs on (sm_placement.cu uses it too).
__device__ unsigned current_smid()
{
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    return smid;
}

__global__ void __launch_bounds__(1024, 1)
    hold(volatile int *release, volatile int *smid_of_block, long long limit_cycles)
{
    extern __shared__ unsigned char held[];
    if (threadIdx.x == 0) {
        const unsigned smid = current_smid();
        held[0] = (unsigned char)smid;
        /* a plain store a block, no atomics: PCIe hosts need not have
         * atomics on mapped host memory */
        smid_of_block[blockIdx.x] = (int)smid;
        __threadfence_system();
        const long long t0 = clock64();
        while (*release == 0 && clock64() - t0 < limit_cycles)
            __nanosleep(20000);
    }
    __syncthreads();
}

struct holder_state {
    cudaStream_t stream = nullptr;
    int *host = nullptr; // [0] release, [1..n] the SM of each block (-1: not started)
    int held = 0;
};
holder_state state; // one holder a process: the bench is single-threaded

int fail(const char *what, cudaError_t e, char *err, size_t cap)
{
    snprintf(err, cap, "%s: %s", what, e == cudaSuccess ? "see above" : cudaGetErrorString(e));
    return 1;
}

} // namespace

extern "C" int sm_holder_stop(void)
{
    if (state.host == nullptr)
        return 0;
    ((volatile int *)state.host)[0] = 1;
    cudaError_t e = cudaStreamSynchronize(state.stream);
    cudaStreamDestroy(state.stream);
    cudaFreeHost(state.host);
    state = holder_state();
    return e == cudaSuccess ? 0 : 1;
}

// 0 when n blocks hold n distinct SMs; else 1 with a message in err.
extern "C" int sm_holder_start(int n, char *err, size_t cap)
{
    int sms = 0, max_shared = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceGetAttribute(&max_shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
    if (state.host != nullptr || n < 1 || n >= sms) {
        snprintf(err, cap, "sm_holder_start: n = %d (1 to %d SMs, none held yet)", n, sms - 1);
        return 1;
    }
    cudaError_t e = cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         max_shared);
    if (e != cudaSuccess)
        return fail("cudaFuncSetAttribute", e, err, cap);
    e = cudaHostAlloc(&state.host, sizeof(int) * (1 + n), cudaHostAllocMapped);
    if (e != cudaSuccess)
        return fail("cudaHostAlloc", e, err, cap);
    memset(state.host, 0xff, sizeof(int) * (1 + n));
    state.host[0] = 0;
    int *device = nullptr;
    cudaHostGetDevicePointer(&device, state.host, 0);
    cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking);
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    hold<<<n, 1024, max_shared, state.stream>>>(device, device + 1, 60LL * clock_khz * 1000);
    if ((e = cudaGetLastError()) != cudaSuccess) {
        sm_holder_stop();
        return fail("hold launch", e, err, cap);
    }
    volatile int *smid_of_block = state.host + 1;
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < n; b++) {
        while (smid_of_block[b] < 0) {
            if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) {
                sm_holder_stop();
                snprintf(err, cap, "sm_holder_start: block %d of %d never started", b, n);
                return 1;
            }
        }
    }
    std::vector<int> taken(sms, 0);
    for (int b = 0; b < n; b++) {
        const int s = smid_of_block[b];
        if (s < 0 || s >= sms || taken[s]++) {
            sm_holder_stop();
            snprintf(err, cap, "sm_holder_start: block %d on SM %d, not a distinct SM", b, s);
            return 1;
        }
    }
    state.held = n;
    return 0;
}

// The SM that block b holds (after a successful start), else -1.
extern "C" int sm_holder_sm(int b)
{
    return state.host != nullptr && b >= 0 && b < state.held ? state.host[1 + b] : -1;
}
