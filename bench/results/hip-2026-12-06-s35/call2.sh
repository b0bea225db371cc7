#!/bin/bash
# Session 35, call 2 (the same warm H100 as call 1; carry ["build-hipdeps",
# "build-packs34", "build-packs35"]): every HIP entry on v1
# (MI4_QW_ARRIVE_ON_COPIES=1); A/B main against v1 at M = 512, 1024, 2048,
# 4096 (Mixtral: qw128, q256, expansion, expansion; Qwen3: qw32, qw64,
# qw128, q256), two rounds; then ncu's stall samples of v1's qw32 gemm13 at
# Mixtral M = 64 (unchanged by v1 in call 1).
O=$OUT/s35c2
. bench/hip/device_call.sh build-packs34 tr34
. bench/hip/device_call.sh build-packs35 v1
hip bash -c 'cd build-v1 && timeout 150 ctest --timeout 140 -j4 -R "hip" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=512,1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib v1=lib:build-v1/lib" PROFILE_POINTS="qwen3-30b-a3b:4096" \
  timeout 260 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
for v in main v1; do echo "== $v"; head -12 $O/ab/profile-$v.log 2>/dev/null; done
hip env OUT=$O/ncu LIB=build-v1/lib/libmoeint4.so POINT=mixtral-8x7b:64 \
  KERNEL=int4_ws_gemm COUNT=1 SASS=1 \
  SECTIONS="SourceCounters WarpStateStats SchedulerStats LaunchStats" \
  timeout 150 bash bench/hip/ncu_point.sh > $O/ncu.log 2>&1
tail -20 $O/ncu.log
for f in $O/ncu/*-sass.csv; do python3 bench/hip/sass_stalls.py "$f" | head -30; done
tar czf $OUT/call2.tgz -C $O --exclude='*.ncu-rep' .
