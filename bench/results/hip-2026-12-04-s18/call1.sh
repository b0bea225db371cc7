#!/bin/bash
# Device call 1 of session 18 (2026-12-04): q256 with its weights dequantized
# into shared-memory A tiles and wgmma from shared memory for both operands
# (MI4_QW_SMEM_A=1: a stage's 4 wgmmas in flight while the next stage is
# dequantized), against main's register-A q256 (one wgmma in flight) and
# session 17's prepared deeper register-A queue (next-deeper-queue.diff).
# build-nvt = the tests' tree (new kernel), build-main = main 38d5bf4,
# build-deep = 38d5bf4 + next-deeper-queue.diff. q256 forced by
# MOEINT4_HIP_TILE=q256 in the q256 variants.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 100 ctest --timeout 90 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
(cd build-nvt && MOEINT4_HIP_TILE=q256 timeout 100 ctest --timeout 90 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conf-q256.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conf-q256.log | tail -3
OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
  VARIANTS="main=lib:build-main oldq=@main deep=lib:build-deep new=lib:build-nvt/lib" \
  ENV_oldq="MOEINT4_HIP_TILE=q256" ENV_deep="MOEINT4_HIP_TILE=q256" ENV_new="MOEINT4_HIP_TILE=q256" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
  timeout 260 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab-table.md || tail -20 $O/ab.log
grep -E "int4_ws|expand|wgmma" $O/profile-*.log | head -40
tar czf "$OUT/call1.tgz" -C $O .
