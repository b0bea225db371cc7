#!/bin/bash
# Device call 2 of 2026-12-03 (session 13): main with the routed pair-order
# act and the group-scale conversion shared by every int4 kernel
# (mi4_dev_scale_to_f32: the FMA GEMV and the dequantization too), the tests'
# build: the HIP tests, then int4 at the README table's sizes against HEAD
# at the session's start (head: de6baed's kernels), the BF16 mode (bf), and
# the direct decode's ring depths at M = 1 and 8 as run-time knobs: gemm2's
# ring 6 / 8 (g6, g8), both rings 6 (r6), gemm2's token rows staged (xs).
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o2
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o2/tests-main.log 2>&1
tail -4 /tmp/o2/tests-main.log
export WEIGHTS_bf=bf16 TOKENS_bf=1,8,64,512,4096
export ENV_g6=MOEINT4_HIP_DECODE_RING2=6 ENV_g8=MOEINT4_HIP_DECODE_RING2=8 ENV_r6=MOEINT4_HIP_DECODE_RING=6
export ENV_xs=MOEINT4_HIP_DECODE_X=staged TOKENS_g6=1,8 TOKENS_g8=1,8 TOKENS_r6=1,8 TOKENS_xs=1,8
OUT=/tmp/o2 DEPS=build-hipdeps TOKENS=1,8,16,32,64,512,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="head=lib:build-head main=lib:build-nvt/lib bf=@main g6=@main g8=@main r6=@main xs=@main" \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1" \
  timeout 400 bash bench/hip/ab_bench.sh > /tmp/o2/ab.log 2>&1
cat /tmp/o2/ab-table.md
grep -h "us  x1\|forward" /tmp/o2/profile-*.log | head -40
tar czf "$OUT/call2.tgz" -C /tmp/o2 .
