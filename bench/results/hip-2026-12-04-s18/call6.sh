#!/bin/bash
# Device call 6 of session 18 (2026-12-04): the tree to commit. q256 is the
# default int4 GEMM from 96 to 511 rows an expert (MI4_Q256_MIN / 
# MI4_EXPAND_MIN_ROWS_PER_EXPERT), its producer keeps 64-bit row pointers
# for a tile. build-nvt = the tests' tree; build-prev = the same with call
# 5's producer (32-bit rows, a multiply a copy); build-main = main 38d5bf4.
# Every HIP test and both conformance matrices, then the README's table
# (both weights modes, M = 1 .. 4096, two rounds) with prev at 512 / 4096.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o6; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 200 ctest --timeout 120 -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -24
OUT=$O/ab DEPS=build-hipdeps TOKENS=1,8,64,512,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 \
  VARIANTS="main=lib:build-main prev=lib:build-prev new=lib:build-nvt/lib" TOKENS_prev=512,4096 \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:512" \
  timeout 290 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "int4_ws|expand|wgmma" $O/ab/profile-*.log | head -30
tar czf "$OUT/call6.tgz" -C $O .
