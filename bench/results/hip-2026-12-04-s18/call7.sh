#!/bin/bash
# Device call 7 of session 18 (2026-12-04): gemm2's token rows by TMA in q256
# (the intermediate's rows of a tile are contiguous: one 256 x 64 box a
# stage, issued by one producer thread, instead of 16 cp.async a thread),
# against 63f0ce7 (build-prev: the committed q256); and an upper bound:
# build-probe = 63f0ce7 with no token copies at all (MI4_QW_PROBE=2, wrong
# results, per-kernel times only). build-nvt = the tests' tree (TMA; the
# BF16 GEMM's TMA helpers moved to hip_tma.h).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o7; mkdir -p $O
(cd build-nvt && timeout 120 ctest --timeout 110 -R '^(test_hip_forward_int4|test_hip_forward_bf16|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -5
(cd build-nvt && MOEINT4_HIP_TILE=q256 timeout 40 ctest --timeout 35 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conf-q256.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conf-q256.log | tail -2
OUT=$O/ab DEPS=build-hipdeps TOKENS=512,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="prev=lib:build-prev tma=lib:build-nvt/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:512" \
  timeout 150 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "int4_ws" $O/ab/profile-*.log | head -12
MOEINT4_HIP_TILE=q256 timeout 40 python3 bench/hip/hip_profile.py --lib build-probe/libmoeint4.so qwen3-30b-a3b:4096 mixtral-8x7b:512 2>&1 | grep -E "int4_ws|forward" > $O/profile-probe.log
cat $O/profile-probe.log
tar czf "$OUT/call7.tgz" -C $O .
