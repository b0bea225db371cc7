#!/bin/bash
# Session 37, call 3 (carry ["build-hipdeps", "build-packs38"]; build-h37 =
# main at 04af97c with its tests, made as bench/hip/README.md says). On an
# H200 (the card issue 15's targets name): the README's table at main's head
# in both weights modes (and int4 at M = 4, 16, 32), two rounds, then every
# HIP entry. On another card: every HIP entry only (no table).
# LIMIT (the call's seconds, default 470) gates each step.
O=$OUT/s37c3
. bench/hip/device_call.sh build-packs38 h37
left() { echo $(( ${LIMIT:-470} - SECONDS )); }
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  tab=$(( $(left) - 150 )); [ $tab -gt 300 ] && tab=300
  hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 TOKENS_small=4,16,32 \
    WEIGHTS=bf16,int4 WEIGHTS_small=int4 ROUNDS=2 \
    VARIANTS="main=lib:build-h37/lib small=@main" PROFILE_POINTS="qwen3-30b-a3b:1 mixtral-8x7b:8 mixtral-8x7b:64 qwen3-30b-a3b:4096" \
    timeout $tab bash bench/hip/ab_bench.sh > $O/table.log 2>&1
  cat $O/table/ab-table.md || tail -20 $O/table.log
fi
t=$(( $(left) - 10 )); [ $t -gt 300 ] && t=300
hip bash -c "cd build-h37 && timeout $t ctest --timeout $((t - 5)) -j3 -R '^(test_hip_|hip_conformance_)' -E memory --output-on-failure" > $O/tests.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
tar czf $OUT/call3.tgz -C $O .
