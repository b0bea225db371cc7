#!/bin/bash
# Session 20, call 3 (carry ["build-hipdeps", "build-packed"]): the new
# defaults (qw32 at 13-24 rows an expert: q32's gemm13 and the
# warp-specialized gemm2; qw64 at 25-40 rows where the intermediate is
# >= 4096), built with the tests as build-nvt from the working tree.
# 1. all 17 HIP test entries, and the int4 conformance matrix with qw32 forced;
# 2. the README's table (both weights modes, two rounds) and main's int4
#    (build-main: aeae7d6) at the changed sizes in the same rounds.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s20c3; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 330 ctest --timeout 150 -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -20
(cd build-nvt && MOEINT4_HIP_TILE=qw32 timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conformance-qw32.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conformance-qw32.log | tail -2
OUT=$O/ab DEPS=build-hipdeps TOKENS=1,8,64,96,128,256,512,1024,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  WEIGHTS_main=int4 TOKENS_main=64,96,128 \
  PROFILE_POINTS="mixtral-8x7b:64 mixtral-8x7b:128 qwen3-30b-a3b:256 qwen3-30b-a3b:4096" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep -E "gemm" | head -30
tar czf "$OUT/call3.tgz" -C $O .
