#!/bin/bash
# Session 23, call 2 (carry ["build-hipdeps", "build-packed"]): gemm13 of the
# int4 decode pulls gemm2's codes into L2 (MOEINT4_HIP_DECODE_PREFETCH=P, the
# first P% of each routed expert's codes and all of its scales; branch
# hip-decode-prefetch, tests build build-pft made on the development machine).
# 1. the decode test (every ring, grid, x mode with prefetch 0 / 37 / 100),
#    the graph test and the int4 matrix with prefetch 100;
# 2. A/B at the decode sizes: main, the branch with the knob off, 50, 100.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-pf
[ -d build-main ] || tar xJf build-packed/libs.tar.xz
tar xJf build-packed/pf.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s23c2; mkdir -p $O
(cd build-pft && timeout 150 ctest --timeout 140 -R '^test_hip_forward_int4$' --output-on-failure) > $O/tests-pf.log 2>&1 &
(cd build-pft && MOEINT4_HIP_DECODE_PREFETCH=100 timeout 150 ctest --timeout 140 -j2 -R '^(test_hip_graph_int4|hip_conformance_int4)$' --output-on-failure) > $O/tests-pf100.log 2>&1 &
wait
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-pf*.log | tail -6
OUT=$O/ab DEPS=build-hipdeps TOKENS=1,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main pf=lib:build-pft/lib pf50=@pf pf100=@pf" \
  ENV_pf50=MOEINT4_HIP_DECODE_PREFETCH=50 ENV_pf100=MOEINT4_HIP_DECODE_PREFETCH=100 \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1 qwen3-30b-a3b:8" \
  timeout 280 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|^[a-z0-9-]+:[0-9]+:" $O/ab/profile-*.log | head -60
tar czf "$OUT/call2.tgz" -C $O .
