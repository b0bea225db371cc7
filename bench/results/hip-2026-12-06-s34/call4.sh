#!/bin/bash
# Session 34, call 4 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200; any card): the int4 decode rings issue the next chunk
# before multiplying the current one (build-ks from ro34.tar.xz: routed
# decode and direct decode; the split gemm2 and L2 lookahead of calls 1-3
# removed) against main (build-rule33). Tests: the int4 forward, weights,
# graph and conformance entries. A/B: int4, M = 1, 2, 3, 4, 8, 16, two
# rounds, graph replay, L2 flushed; per kernel at Mixtral M = 1 and 8,
# Qwen3 M = 1.
O=$OUT/s34c4
. bench/hip/device_call.sh build-packs33 final33
. bench/hip/device_call.sh build-packs34 ro34
hip bash -c 'cd build-ks && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1,2,3,4,8,16 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib ro=lib:build-ks/lib" \
  PROFILE_POINTS="mixtral-8x7b:1 mixtral-8x7b:8 qwen3-30b-a3b:1" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
for v in main ro; do echo "== $v"; cat $O/ab/profile-$v.log; done
tar czf $OUT/call4.tgz -C $O .
