#!/bin/bash
# Session 34, call 11 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200): only on an H200 (exits at once on another card). The
# tile rule with qw32 from 5 rows (build-ks from tr34.tar.xz) against main
# (build-rule33) on the card issue 15's targets name: Mixtral M = 20, 32,
# 48, Qwen3 M = 96, 192 (and each preset at the other's sizes), int4, two
# rounds, graph replay, L2 flushed. Then where the routed decode's gemm13
# waits at Mixtral M = 8 on the H200 (section 3 of the page: bound on the
# SM): ncu with per-SASS-instruction stall samples, summed by sass_stalls.py
# (the first int4_routed_decode launch after the 20 skipped, 10 forwards'
# gemm13 and gemm2: a gemm13).
O=$OUT/s34c11
. bench/hip/device_call.sh build-packs33 final33
grep -q H200 $O/gpu.txt || { echo "not an H200: nothing run"; exit 0; }
. bench/hip/device_call.sh build-packs34 tr34
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=20,32,48,96,192 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib rule=lib:build-ks/lib" PROFILE_POINTS="qwen3-30b-a3b:96" \
  timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -1
hip env OUT=$O/ncu LIB=build-ks/lib/libmoeint4.so POINT=mixtral-8x7b:8 \
  KERNEL=int4_routed_decode COUNT=1 SASS=1 \
  SECTIONS="SourceCounters WarpStateStats SchedulerStats InstructionStats LaunchStats" \
  timeout 200 bash bench/hip/ncu_point.sh > $O/ncu.log 2>&1
tail -32 $O/ncu.log
for f in $O/ncu/*-sass.csv; do python3 bench/hip/sass_stalls.py "$f" | head -40; done
tar czf $OUT/call11.tgz -C $O --exclude='*.ncu-rep' .
