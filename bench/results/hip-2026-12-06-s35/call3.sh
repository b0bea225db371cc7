#!/bin/bash
# Session 35, call 3 (carry ["build-hipdeps", "build-packs34", "build-packs35"];
# any card): the landed form of call 1's v1 (the producer's lag path
# removed; build-ac from ac.tar.xz, the working tree's default build)
# against main (build-ks from tr34.tar.xz). Tests: every HIP entry but
# cli_device_hip (it needs /usr/bin/cmake, which the lent machine lacks),
# the memory entries alone after the rest. A/B: int4, M = 64, 256, 1024,
# 2048, 4096, two rounds, graph replay, L2 flushed.
O=$OUT/s35c3
. bench/hip/device_call.sh build-packs34 tr34
. bench/hip/device_call.sh build-packs35 ac
hip bash -c 'cd build-ac && timeout 150 ctest --timeout 140 -j4 -R "hip" -E "cli_device_hip|memory" --output-on-failure' > $O/tests.log 2>&1
hip bash -c 'cd build-ac && timeout 60 ctest --timeout 50 -j1 -R "hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests.log $O/tests-memory.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=64,256,1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib ac=lib:build-ac/lib" PROFILE_POINTS="mixtral-8x7b:1024" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -1
for v in main ac; do echo "== $v"; head -12 $O/ab/profile-$v.log 2>/dev/null; done
tar czf $OUT/call3.tgz -C $O .
