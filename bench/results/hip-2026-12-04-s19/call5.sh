#!/bin/bash
# Session 19, call 5 (carry ["build-hipdeps", "build-packed"]): the tree with
# qw64 the int4 default from 41 to 95 rows an expert (where q128 served),
# built with its tests as build-nvt; build-main is 510eae4 (calls 1-2's
# kept changes, bench/hip/prebuild.sh).
# 1. every HIP test entry and both conformance matrices;
# 2. A/B main vs new where the pick changed: Mixtral M = 192, 256 (48, 64
#    rows an expert), Qwen3 M = 768 .. 1280 (48 .. 80 rows), and around.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o5; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 220 ctest --timeout 120 -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -24
OUT=$O/ab DEPS=build-hipdeps TOKENS=192,256,320,768,1024,1280 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:256 qwen3-30b-a3b:1024" \
  timeout 250 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | head -30
tar czf "$OUT/call5.tgz" -C $O .
