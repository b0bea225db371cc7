#!/bin/bash
# Session 34, call 8 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200; any card): the tile rule with qw32 from 5 rows an
# expert (was q16 at 5-12; build-ks from tr34.tar.xz) against main
# (build-rule33). Tests: the int4 forward (every tile forced), weights
# (24 tokens: 6 rows, now qw32), graph (M = 64: 10 rows, now qw32) and
# conformance entries. A/B: int4, M = 20, 32, 48, 64, 96, 192, two
# rounds, graph replay, L2 flushed.
O=$OUT/s34c8
. bench/hip/device_call.sh build-packs33 final33
. bench/hip/device_call.sh build-packs34 tr34
hip bash -c 'cd build-ks && timeout 170 ctest --timeout 160 -j3 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=20,32,48,64,96,192 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib rule=lib:build-ks/lib" PROFILE_POINTS="mixtral-8x7b:32" \
  timeout 250 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -1
tar czf $OUT/call8.tgz -C $O .
