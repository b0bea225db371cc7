#!/bin/bash
# Session 38, call 3 (carry ["build-hipdeps", "build-packs38"]; in
# build-packs38: h38 = main at 3f159e4, sm_placement and libsm_holder.so
# built with nvcc 13 -O3 -arch=sm_90a from this commit's bench/hip). On an
# H200: call 1's H200 part (the README's table at main's head) within
# CALL_LIMIT. Elsewhere: does an H100 with 38 of its 132 SMs held
# (sm_holder.cu) and the grids sized for the other 94 stand in for an H200
# (the same HBM share an SM)? sm_placement first (no block may land on a
# held SM), then main against main-94 at both presets, int4, M = 1, 8, 64,
# two rounds (AB_TOKENS: other sizes); predicted H200 time = main-94's x 94/132.
O=$OUT/s38c3
mkdir -p $O
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=$(( ${CALL_LIMIT:-575} - SECONDS )) bash bench/results/hip-2026-12-06-s38/call1.sh
  exit
fi
build-packs38/sm_placement 38 | tee $O/sm_placement.txt
. bench/hip/device_call.sh build-packs38 h38
hold="MOEINT4_HIP_MULTIPROCESSORS=94 MOEINT4_BENCH_HOLD_SMS=38"
hold="$hold MOEINT4_BENCH_SM_HOLDER=$PWD/build-packs38/libsm_holder.so"
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=${AB_TOKENS:-1,8,64} WEIGHTS=int4 ROUNDS=2 \
  ENV_main94="$hold" VARIANTS="main=lib:build-h38/lib main94=@main" \
  PROFILE_POINTS="mixtral-8x7b:8" timeout $(( ${CALL_LIMIT:-575} - SECONDS - 15 )) \
  bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
tar czf $OUT/call3.tgz -C $O .
