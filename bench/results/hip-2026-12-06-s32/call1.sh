#!/bin/bash
# Session 32, call 1 (carry ["build-hipdeps", "build-packs32"]): main at
# 5f048fe (session 31's row pointers and identity map as one tree, never
# run together before) built for NVIDIA (build-main32). Every HIP test entry
# and the memory entries, then the README's table in both weights modes
# (M = 1, 8, 64, 256, 512, 4096 of both presets, two rounds, graph replay,
# L2 flushed), with per-kernel profiles of the points issue 15 still misses.
# LIMIT (the call's seconds) gates each step; outputs land under $OUT as they
# come, so a call cut at its limit keeps what finished.
O=$OUT/s32c1
. bench/hip/device_call.sh build-packs32 main32
left() { echo $(( ${LIMIT:-590} - SECONDS )); }
hip bash -c 'cd build-main32 && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests.log 2>&1
hip bash -c 'cd build-main32 && timeout 50 ctest --timeout 45 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log $O/tests-memory.log | tail -8
tab=$(( $(left) - 20 )); [ $tab -gt 240 ] && tab=240
hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main32/lib" PROFILE_POINTS="qwen3-30b-a3b:1 mixtral-8x7b:64 qwen3-30b-a3b:4096" \
  timeout $tab bash bench/hip/ab_bench.sh > $O/table.log 2>&1
cat $O/table/ab-table.md || tail -20 $O/table.log
grep -h "copy .* GB/s" $O/table.log | head -2
grep -hE "us  x1 |forward" $O/table/profile-*.log | head -40
tar czf $OUT/call1.tgz -C $O .
