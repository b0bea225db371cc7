#!/bin/bash
# Session 40, call 1b (as run, there on one line, on the machine call 1 left
# warm; carry ["build-hipdeps", "build-packs39"]): one more round of int4 at
# M = 1, 16, 32 with per-kernel profiles at five points.
O=$OUT/p2
. bench/hip/device_call.sh build-packs39 h39 > /dev/null 2>&1
hip env OUT=$O DEPS=build-hipdeps TOKENS=1,16,32 WEIGHTS=int4 ROUNDS=1 \
  VARIANTS="main=lib:build-h39/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:1 mixtral-8x7b:16 mixtral-8x7b:32 qwen3-30b-a3b:32 mixtral-8x7b:1" \
  timeout 400 bash bench/hip/ab_bench.sh > $O.log 2>&1
cat $O/ab-table.md
ls $O
tar czf $OUT/p2.tgz -C $O . $O.log 2>/dev/null
true
