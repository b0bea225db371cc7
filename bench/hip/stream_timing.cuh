// What the standalone stream probes (stream_pattern.cu, stream_engines.cu)
// share: the device's SM count, a 256 MB buffer whose memset flushes L2
// before each timed launch, a sink that keeps loads alive, and the median
// of 20 timed launches (CUDA events; one warm-up launch not counted).
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

struct stream_bench {
    int sms = 0;
    size_t flush_bytes = 256u << 20;
    uint8_t *flush = nullptr;
    unsigned *sink = nullptr;

    stream_bench()
    {
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
        cudaMalloc(&flush, flush_bytes);
        cudaMalloc(&sink, 4);
    }

    // Median us of `launch()` over 20 launches, L2 flushed before each.
    template <typename Launch> float median_us(Launch launch) const
    {
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        std::vector<float> t;
        for (int i = 0; i < 21; i++) {
            cudaMemsetAsync(flush, i, flush_bytes);
            cudaEventRecord(a);
            launch();
            cudaEventRecord(b);
            cudaEventSynchronize(b);
            float ms;
            cudaEventElapsedTime(&ms, a, b);
            if (i > 0)
                t.push_back(ms * 1000.0f);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};
