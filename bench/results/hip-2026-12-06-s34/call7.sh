#!/bin/bash
# Session 34, call 7 (carry ["build-hipdeps", "build-packs33"], kind
# nvidia-h200; any card): q16 (the default from 5 to 12 rows an expert)
# against qw32 forced (MOEINT4_HIP_TILE=qw32) on main's build
# (build-rule33) at 5, 6, 8 and 12 rows an expert: Mixtral M = 20, 24, 32,
# 48 and Qwen3 M = 80, 96, 128, 192, each preset at all eight sizes (call 6 had qw32 12.5% / 4.5% faster
# at 8 rows on an H100; session 20 had it 8-11% slower on the H200 before
# qw32's gemm13 moved to the warp-specialized kernel). int4, two rounds,
# graph replay, L2 flushed.
O=$OUT/s34c7
. bench/hip/device_call.sh build-packs33 final33
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=20,24,32,48,80,96,128,192 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib qw32=@main" ENV_qw32="MOEINT4_HIP_TILE=qw32" \
  PROFILE_POINTS="mixtral-8x7b:32" timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -1
tar czf $OUT/call7.tgz -C $O .
