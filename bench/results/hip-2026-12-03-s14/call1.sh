#!/bin/bash
# Device call 1 of 2026-12-03 (session 14): the HIP tests on the d16 build
# (routed decode tiles of 16 token rows: two MMAs on each dequantized A;
# the tests' build, carried as build-nvt), then main (build-main: 1496782's
# libs, the routed kernels of 271bb81) against it: new (its default: d8 up
# to 4 rows an expert, d16 up to 12) and d16 forced (MOEINT4_HIP_TILE=d16),
# int4, at the sizes where experts see 4 to 24 rows.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o1
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o1/tests-new.log 2>&1
tail -4 /tmp/o1/tests-new.log
export ENV_d16=MOEINT4_HIP_TILE=d16 TOKENS_d16=16,64,128
OUT=/tmp/o1 DEPS=build-hipdeps TOKENS=16,24,32,48,64,128,192 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib d16=@new" \
  PROFILE_POINTS="mixtral-8x7b:32 mixtral-8x7b:48 qwen3-30b-a3b:128" \
  timeout 300 bash bench/hip/ab_bench.sh > /tmp/o1/ab.log 2>&1
cat /tmp/o1/ab-table.md
tar czf "$OUT/call1.tgz" -C /tmp/o1 .
