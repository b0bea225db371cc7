#!/bin/bash
# Session 32, call 3 (carry ["build-hipdeps", "build-packs32"]), on the warm
# H200 after call 1: more rounds of the points nearest issue 15's targets
# (Qwen3 M = 4096 int4 / BF16 1.24x in call 1, target 1.25x; M = 1 and 64),
# both weights modes, five rounds in alternating order, same build of main.
O=$OUT/s32c3
. bench/hip/device_call.sh build-packs32 main32
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,64,4096 WEIGHTS=bf16,int4 ROUNDS=5 \
  VARIANTS="main=lib:build-main32/lib" PROFILE_POINTS="qwen3-30b-a3b:1" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
tar czf $OUT/call3.tgz -C $O .
