#!/bin/bash
# Session 35, call 1 (carry ["build-hipdeps", "build-packs34", "build-packs35"];
# any card): the warp-specialized int4 GEMM's producer signalling a stage by
# cp.async.mbarrier.arrive (MI4_QW_ARRIVE_ON_COPIES=1: each producer
# thread's copies arrive on the stage's `full` barrier as they land; no lag,
# no wait on its own copies; build-v1 from v1.tar.xz) against main
# (build-ks from tr34.tar.xz). Tests of v1: the int4 forward (every tile
# forced), weights, graph and conformance entries. A/B: int4, M = 32, 64,
# 256, 1024, 4096 (Mixtral: qw32, qw32, qw64, q256, expansion; Qwen3: d8,
# d8, qw32, qw64, q256), two rounds, graph replay, L2 flushed.
O=$OUT/s35c1
. bench/hip/device_call.sh build-packs34 tr34
. bench/hip/device_call.sh build-packs35 v1
hip bash -c 'cd build-v1 && timeout 170 ctest --timeout 160 -j3 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=32,64,256,1024,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ks/lib v1=lib:build-v1/lib" PROFILE_POINTS="mixtral-8x7b:64" \
  timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -1
for v in main v1; do echo "== $v"; cat $O/ab/profile-$v.log 2>/dev/null | head -12; done
tar czf $OUT/call1.tgz -C $O .
