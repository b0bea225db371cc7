// Where a persistent grid's blocks land: does a grid sized for N of the
// GPU's SMs (MOEINT4_HIP_MULTIPROCESSORS=N: N x blocks-an-SM blocks) run
// on N SMs, or spread one block an SM over all of them? Each block takes
// `shared` bytes of shared memory (so that `per_sm` blocks fit an SM, as
// the routed decode's 2), records the SM it runs on (%smid) and waits
// until every block has started or a time limit passes, so all are
// resident together. Prints, per grid, how many SMs hold 0, 1, 2, ...
// blocks. Then the same with HOLD SMs (argument 1, default 38) held by
// sm_holder.cu and the grid sized for the rest: how many blocks landed on
// a held SM (should be none).
//   nvcc -O3 -arch=sm_90a -o /tmp/sm_placement bench/hip/sm_placement.cu && /tmp/sm_placement
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sm_holder.cu"

__global__ void place(int *smid_of_block, int *started, long long spin_cycles)
{
    extern __shared__ unsigned char pad[];
    if (threadIdx.x == 0) {
        const unsigned smid = current_smid();
        smid_of_block[blockIdx.x] = (int)smid;
        pad[0] = (unsigned char)smid;
        atomicAdd(started, 1);
        const long long t0 = clock64();
        while (atomicAdd(started, 0) < (int)gridDim.x && clock64() - t0 < spin_cycles) {
        }
    }
    __syncthreads();
}

static int check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    cudaDeviceProp prop;
    if (check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"))
        return 1;
    const int sms = prop.multiProcessorCount;
    const size_t shared = 100 * 1024; // two blocks an SM, as the routed decode
    if (check(cudaFuncSetAttribute(place, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   (int)shared),
              "cudaFuncSetAttribute"))
        return 1;
    int per_sm = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, place, 256, shared);
    printf("%s: %d SMs, %d blocks of 256 threads and %zu KB an SM\n", prop.name, sms, per_sm,
           shared / 1024);
    int *d_smid = nullptr, *d_started = nullptr;
    if (check(cudaMalloc(&d_smid, sizeof(int) * sms * per_sm), "cudaMalloc") ||
        check(cudaMalloc(&d_started, sizeof(int)), "cudaMalloc"))
        return 1;
    const int hold_count = argc > 1 ? atoi(argv[1]) : 38;
    if (hold_count < 1 || hold_count >= sms) {
        fprintf(stderr, "SMs to hold: 1 to %d\n", sms - 1);
        return 1;
    }
    const int sized_for[] = { sms / 2, sms, sms - hold_count };
    for (int c = 0; c < 3; c++) {
        const int n = sized_for[c];
        const bool holding = c == 2;
        std::vector<int> held(sms, 0);
        if (holding) {
            char err[200];
            if (sm_holder_start(hold_count, err, sizeof err) != 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            for (int b = 0; b < hold_count; b++)
                held[sm_holder_sm(b)] = 1;
        }
        const int grid = n * per_sm;
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaMemsetAsync(d_started, 0, sizeof(int), s);
        place<<<grid, 256, shared, s>>>(d_smid, d_started, 2000000000LL);
        if (check(cudaStreamSynchronize(s), "place"))
            return 1;
        cudaStreamDestroy(s);
        if (holding && sm_holder_stop() != 0)
            return 1;
        std::vector<int> smid(grid), blocks_on(sms, 0);
        cudaMemcpy(smid.data(), d_smid, sizeof(int) * grid, cudaMemcpyDeviceToHost);
        int started = 0;
        cudaMemcpy(&started, d_started, sizeof(int), cudaMemcpyDeviceToHost);
        for (int s : smid)
            if (s >= 0 && s < sms)
                blocks_on[s]++;
        std::vector<int> histogram(per_sm + 2, 0);
        for (int b : blocks_on)
            histogram[b <= per_sm ? b : per_sm + 1]++;
        int on_held = 0;
        for (int s : smid)
            on_held += s >= 0 && s < sms && held[s];
        printf("grid sized for %d SMs (%d blocks, %d started%s):", n, grid, started,
               holding ? ", the other SMs held" : "");
        for (int b = 0; b <= per_sm; b++)
            printf(" %d SMs hold %d,", histogram[b], b);
        printf(" %d hold more", histogram[per_sm + 1]);
        if (holding)
            printf("; %d blocks on a held SM", on_held);
        printf("\n");
    }
    return 0;
}
