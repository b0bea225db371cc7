#!/bin/bash
# Session 35, call 4 (carry ["build-hipdeps", "build-packs35"]; any card): the
# warp-specialized BF16 wgmma GEMM's producer arriving on a stage's full
# barrier as its copies land, as the int4 one does since 6b7e5a5 (build-bw
# from bw.tar.xz) against 6b7e5a5 (build-ac from ac.tar.xz). Tests of bw:
# the BF16 and int4 forward, graph and conformance entries. A/B: the BF16
# mode at M = 256, 1024, 4096 and int4 at M = 4096 (Mixtral's expansion
# runs the BF16 GEMMs), two rounds, graph replay, L2 flushed.
O=$OUT/s35c4
. bench/hip/device_call.sh build-packs35 ac bw
hip bash -c 'cd build-bw && timeout 150 ctest --timeout 140 -j4 -R "^(test_hip_forward_bf16|test_hip_graph_bf16|hip_conformance_bf16|test_hip_forward_int4|hip_conformance_int4|test_hip_route_bf16)$" --output-on-failure' > $O/tests.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=256,1024,4096 WEIGHTS=bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-ac/lib bw=lib:build-bw/lib" PROFILE_POINTS="qwen3-30b-a3b:4096" \
  timeout 280 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
hip env OUT=$O/ab4 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-ac/lib bw=lib:build-bw/lib" \
  timeout 120 bash bench/hip/ab_bench.sh > $O/ab4.log 2>&1
cat $O/ab4/ab-table.md || tail -20 $O/ab4.log
grep -h "copy .* GB/s\|dense" $O/ab.log | head -3
for v in main bw; do echo "== $v"; head -12 $O/ab/profile-$v.log 2>/dev/null; done
tar czf $OUT/call4.tgz -C $O .
