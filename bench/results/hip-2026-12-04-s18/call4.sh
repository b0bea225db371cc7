#!/bin/bash
# Device call 4 of session 18 (2026-12-04): q256 after call 3's ncu source
# counters. The producer reads its 16 token rows once a tile (not a table
# read and a 64-bit multiply before every copy), ring steps are 32-bit,
# the consumers read the codes with shared-space loads, and the epilogue
# is one instance an activation (its code missed the instruction cache).
# build-nvt = the tests' tree (shared-memory A tiles, MI4_QW_SMEM_A=1),
# build-rs = the same with register A (MI4_QW_SMEM_A=0), build-main = main
# 38d5bf4. q256 forced by MOEINT4_HIP_TILE=q256 in rs and ss.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o4; mkdir -p $O
(cd build-nvt && timeout 100 ctest --timeout 90 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
OUT=$O DEPS=build-hipdeps TOKENS=512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
  VARIANTS="main=lib:build-main rs=lib:build-rs ss=lib:build-nvt/lib" \
  ENV_rs="MOEINT4_HIP_TILE=q256" ENV_ss="MOEINT4_HIP_TILE=q256" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096 mixtral-8x7b:512" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab-table.md || tail -20 $O/ab.log
grep -E "int4_ws|expand|wgmma" $O/profile-*.log | head -40
tar czf "$OUT/call4.tgz" -C $O .
