#!/bin/bash
# Session 34, call 6 (carry ["build-hipdeps", "build-packs33"], kind
# nvidia-h200; any card): which int4 tile serves Mixtral's 8, 16 and 32
# rows an expert (M = 32, 64, 128) best, on main's build (build-rule33)
# with MOEINT4_HIP_TILE forcing each: the default (q16 / qw32 / qw64), d8
# (the routed decode GEMVs: 8-row tiles, each expert read once a tile),
# q16, qw32, qw64. int4, two rounds, graph replay, L2 flushed.
O=$OUT/s34c6
. bench/hip/device_call.sh build-packs33 final33
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=32,64,128 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib d8=@main q16=@main qw32=@main qw64=@main" \
  ENV_d8="MOEINT4_HIP_TILE=d8" ENV_q16="MOEINT4_HIP_TILE=q16" ENV_qw32="MOEINT4_HIP_TILE=qw32" \
  ENV_qw64="MOEINT4_HIP_TILE=qw64" PROFILE_POINTS="mixtral-8x7b:64" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
for v in main d8 qw64; do echo "== $v"; cat $O/ab/profile-$v.log; done
tar czf $OUT/call6.tgz -C $O .
