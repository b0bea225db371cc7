#!/bin/bash
# Session 35, call 6 (carry ["build-hipdeps", "build-packs35"]; any card): the
# BF16 warp-specialized GEMM arriving as its copies land only for gemm13
# over at most 2048 inputs (ws_arrives, from call 5's per-kernel times;
# build-bw from bw.tar.xz) against 6b7e5a5 (build-ac). Tests of bw: the
# BF16 and int4 forward, graph and conformance entries. A/B: the BF16 mode
# at M = 1024 and 4096, int4 at 4096, two rounds, graph replay, L2 flushed.
O=$OUT/s35c6
. bench/hip/device_call.sh build-packs35 ac bw
hip bash -c 'cd build-bw && timeout 150 ctest --timeout 140 -j4 -R "^(test_hip_forward_bf16|test_hip_graph_bf16|hip_conformance_bf16|test_hip_forward_int4|hip_conformance_int4|test_hip_route_bf16)$" --output-on-failure' > $O/tests.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1024,4096 WEIGHTS=bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-ac/lib bw=lib:build-bw/lib" WEIGHTS_bw=bf16 \
  PROFILE_POINTS="qwen3-30b-a3b:4096" timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
hip env OUT=$O/ab4 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ac/lib bw=lib:build-bw/lib" PROFILE_POINTS="mixtral-8x7b:4096" \
  timeout 140 bash bench/hip/ab_bench.sh > $O/ab4.log 2>&1
cat $O/ab4/ab-table.md || tail -20 $O/ab4.log
grep -h "dense\|copy .* GB/s" $O/ab.log | head -3
tar czf $OUT/call6.tgz -C $O .
