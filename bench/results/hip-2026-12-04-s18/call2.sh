#!/bin/bash
# Device call 2 of session 18 (2026-12-04): call 1's A/B stopped at its
# timeout inside the `deep` variant (session 17's next-deeper-queue.diff:
# hung or far slower), before the new kernel ran. Again without it: main
# 38d5bf4 (BF16 mode, int4 default) against q256 with shared-memory A tiles
# (build-nvt, forced by MOEINT4_HIP_TILE=q256). No tests (call 1 ran them).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o2; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
#(cd build-nvt && timeout 100 ctest --timeout 90 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
#grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
#(cd build-nvt && MOEINT4_HIP_TILE=q256 timeout 100 ctest --timeout 90 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conf-q256.log 2>&1
#grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conf-q256.log | tail -3
OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  ENV_new="MOEINT4_HIP_TILE=q256" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
  timeout 260 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab-table.md || tail -20 $O/ab.log
grep -E "int4_ws|expand|wgmma" $O/profile-*.log | head -40
tar czf "$OUT/call2.tgz" -C $O .
