#!/bin/bash
# Session 19, call 7 (carry ["build-hipdeps", "build-packed"]): qw128 (the
# exact warp-specialized int4 GEMM with 128-row tiles; qw64 now keeps one
# accumulator set: the join waits for the chunk anyway), the int4 default
# from 96 to 255 rows an expert in this tree (build-nvt, with its tests);
# build-main is 701484d.
# 1. the int4 test entries, the int4 conformance matrix by default and with
#    qw128 forced;
# 2. A/B main vs new vs qw128 forced at every size (qwf).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o7; mkdir -p $O
(cd build-nvt && timeout 150 ctest --timeout 100 -R '^(test_hip_forward_int4|test_hip_graph_int4|test_hip_route_int4|test_hip_weights|hip_conformance_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -6
(cd build-nvt && MOEINT4_HIP_TILE=qw128 timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conformance-qw128.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conformance-qw128.log | tail -2
OUT=$O/ab DEPS=build-hipdeps TOKENS=384,512,1536,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  ENV_qwf="MOEINT4_HIP_TILE=qw128" VARIANTS="main=lib:build-main new=lib:build-nvt/lib qwf=@new" \
  PROFILE_POINTS="mixtral-8x7b:512 qwen3-30b-a3b:2048" \
  timeout 220 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep -E "gemm" | head -20
tar czf "$OUT/call7.tgz" -C $O .
