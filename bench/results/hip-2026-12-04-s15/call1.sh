#!/bin/bash
# Device call 1 of 2026-12-04 (session 15): w2's expansion to BF16 on a
# side stream beside gemm13 with the expansion kernel's shared-memory
# carve-out set to the most (expand-beside-carveout.diff of session 14 on
# 3568260). The HIP tests on that build (tests' tree carried as build-nvt:
# the graph test forks at M = 64 with w256 forced), then int4 at M = 2048
# and 4096 with the side stream (new) and without (inline:
# MOEINT4_HIP_EXPAND_BESIDE=0), against main (build-main: 3568260) and the
# BF16 mode (bf).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/o1/gpu.txt
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o1/tests-new.log 2>&1
tail -5 /tmp/o1/tests-new.log
export ENV_inline=MOEINT4_HIP_EXPAND_BESIDE=0 WEIGHTS_bf=bf16
OUT=/tmp/o1 DEPS=build-hipdeps TOKENS=2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib inline=@new bf=@new" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096" \
  timeout 300 bash bench/hip/ab_bench.sh > /tmp/o1/ab.log 2>&1
cat /tmp/o1/ab-table.md
tar czf "$OUT/call1.tgz" -C /tmp/o1 .
