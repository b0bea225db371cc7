#!/bin/bash
# Device call 2 of 2026-12-03 (session 14): the HIP tests on HEAD (271bb81,
# the tests' build, carried as build-nvt: the routed guard of the review
# mend had not run on a GPU), then ncu of the BF16 wgmma GEMM (the prefill
# tile of both modes at M = 4096) in the BF16 mode: Mixtral and Qwen3,
# gemm13 and gemm2, to see what bounds it (L2, issue, tensor pipe).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o2
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o2/tests-head.log 2>&1
tail -4 /tmp/o2/tests-head.log
for p in mixtral-8x7b:4096 qwen3-30b-a3b:4096; do
  MOEINT4_HIP_WEIGHTS=bf16 OUT=/tmp/o2 LIB=build-nvt/lib/libmoeint4.so POINT=$p KERNEL=wgmma_gemm SKIP=4 \
    SECTIONS="SpeedOfLight ComputeWorkloadAnalysis MemoryWorkloadAnalysis SchedulerStats WarpStateStats Occupancy LaunchStats InstructionStats" \
    timeout 150 bash bench/hip/ncu_point.sh
done
tar czf "$OUT/call2.tgz" -C /tmp/o2 .
