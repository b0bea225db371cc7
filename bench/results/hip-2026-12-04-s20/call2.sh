#!/bin/bash
# Session 20, call 2 (carry ["build-hipdeps", "build-packed"]): the qw32
# tile (the warp-specialized int4 GEMM with 32 token rows, two blocks an SM),
# built with its tests as build-nvt from the working tree (not the default:
# forced with MOEINT4_HIP_TILE=qw32). Its other kernels are byte-identical
# to main's (cubin .text compared).
# 1. tests: the int4 forward (its tile test forces qw32 too), graph and
#    conformance entries, the conformance matrix with qw32 forced, and the
#    three entries call 1's 200 s limit cut (test_hip_weights and both
#    conformance matrices);
# 2. A/B: main (build-main) against qw32 and qw64 forced, 32 .. 512 tokens.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s20c2; mkdir -p $O
(cd build-nvt && timeout 280 ctest --timeout 150 -R '^(test_hip_forward_int4|test_hip_graph_int4|test_hip_weights|hip_conformance_int4|hip_conformance_bf16)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -8
(cd build-nvt && MOEINT4_HIP_TILE=qw32 timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conformance-qw32.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conformance-qw32.log | tail -2
OUT=$O/ab DEPS=build-hipdeps TOKENS=32,64,128,256,512 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main qw32=lib:build-nvt/lib qw64=@qw32" \
  ENV_qw32="MOEINT4_HIP_TILE=qw32" ENV_qw64="MOEINT4_HIP_TILE=qw64" \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:256 mixtral-8x7b:128" \
  timeout 280 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep -E "gemm|forward" | head -30
tar czf "$OUT/call2.tgz" -C $O .
