#!/bin/bash
# Session 36, call 1 (carry ["build-hipdeps", "build-packs34", "build-packs36"];
# any card). main's head 7709b3d (build-hd from hd.tar.xz: session 35's
# landings with its review, a6a0e54, which no GPU had run) against main
# before session 35 (build-ks from tr34.tar.xz, 77a2c44's HIP sources).
# 1. Every HIP test entry of build-hd but cli_device_hip (needs cmake), the
#    memory entries alone. 2. A/B at M = 4096, both weights modes, then int4
#    Mixtral M = 20, 32, 48, 64 and Qwen3 M = 1; two rounds, graph replay,
#    L2 flushed; per-kernel times at Qwen3 4096 and Mixtral 64.
O=$OUT/s36c1
. bench/hip/device_call.sh build-packs34 tr34
. bench/hip/device_call.sh build-packs36 hd
hip bash -c 'cd build-hd && timeout 150 ctest --timeout 140 -j4 -R "^(test_hip_|hip_conformance_)" -E "memory" --output-on-failure' > $O/tests.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test|FAILED|ERROR" $O/tests.log | tail -8
hip bash -c 'cd build-hd && timeout 60 ctest --timeout 55 -j1 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests-memory.log | tail -4
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4,bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib head=lib:build-hd/lib" PROFILE_POINTS="qwen3-30b-a3b:4096" \
  timeout 170 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
hip env OUT=$O/ab2 DEPS=build-hipdeps TOKENS=1,20,32,48,64 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib head=lib:build-hd/lib" PROFILE_POINTS="mixtral-8x7b:64" \
  timeout 180 bash bench/hip/ab_bench.sh > $O/ab2.log 2>&1
cat $O/ab2/ab-table.md || tail -20 $O/ab2.log
grep -h "copy .* GB/s" $O/ab.log | head -1
tar czf $OUT/call1.tgz -C $O .
