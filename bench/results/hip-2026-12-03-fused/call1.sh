#!/bin/bash
# Device call 1 of 2026-12-03 (session 13): the direct decode as one
# cooperative kernel (fused) and the routed gemm13 writing act in pair order
# (pair), together in the tests' build (comb), against HEAD (head: de6baed's
# kernels) and pair alone: the HIP tests on comb, then the A/B in int4; comb2k
# is comb's build with the fused kernel off (MOEINT4_HIP_DECODE_FUSED=0).
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o1
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o1/tests-comb.log 2>&1
tail -4 /tmp/o1/tests-comb.log
export ENV_comb2k=MOEINT4_HIP_DECODE_FUSED=0 TOKENS_comb2k=1,8
OUT=/tmp/o1 DEPS=build-hipdeps TOKENS=1,8,16,64 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="head=lib:build-head pair=lib:build-pair comb=lib:build-nvt/lib comb2k=@comb" \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1 mixtral-8x7b:8" \
  timeout 330 bash bench/hip/ab_bench.sh > /tmp/o1/ab.log 2>&1
grep graph /tmp/o1/ab.log
grep -h "us  x1\|forward" /tmp/o1/profile-*.log
tar czf "$OUT/call1.tgz" -C /tmp/o1 .
