#!/bin/bash
# Device call 5 of 2026-12-03: the routed decode's staged-row kernels with
# biased codes and a per-block table of chunk sums (new) against HEAD 2e58994
# (grid): HIP tests on new, A/B at 1, 8 and 32 tokens, and the stream probes
# after their timing code moved into stream_timing.cuh.
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o5
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o5/tests-new.log 2>&1
tail -4 /tmp/o5/tests-new.log
OUT=/tmp/o5 DEPS=build-hipdeps TOKENS=1,8,32 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="grid=lib:build-grid new=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:32" \
  bash bench/hip/ab_bench.sh > /tmp/o5/ab.log 2>&1
grep graph /tmp/o5/ab.log
cat /tmp/o5/profile-*.log
nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o /tmp/se bench/hip/stream_engines.cu && /tmp/se > /tmp/o5/stream_engines.txt 2>&1
tail -40 /tmp/o5/stream_engines.txt
tar czf "$OUT/call5.tgz" -C /tmp/o5 .
