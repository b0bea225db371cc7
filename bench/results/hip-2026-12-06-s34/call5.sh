#!/bin/bash
# Session 34, call 5 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200; any card): the routed decode without zero-point
# registers for weights without zero points (build-ks from nz34.tar.xz:
# int4_routed_decode<GATED, X_RING, ZEROS>; gemm13 80 registers instead of
# 104, gemm2 96 instead of 110) and gemm13's warp splits forced
# (MOEINT4_HIP_ROUTED_SPLITS13) against main (build-rule33). Tests: the
# int4 forward (routed decode: GPTQ asym and AWQ with zero points, GPTQ
# sym without), weights, graph and conformance entries. A/B: int4, M = 3,
# 4, 8, 16, two rounds, graph replay, L2 flushed: main, nz, nz_s2 (gemm13
# splits 2: 16 chunks a warp an item), nz_s8 (splits 8); per kernel at
# Mixtral M = 8.
O=$OUT/s34c5
. bench/hip/device_call.sh build-packs33 final33
. bench/hip/device_call.sh build-packs34 nz34
hip bash -c 'cd build-ks && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=3,4,8,16 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib nz=lib:build-ks/lib nz_s2=@nz nz_s8=@nz" \
  ENV_nz_s2="MOEINT4_HIP_ROUTED_SPLITS13=2" ENV_nz_s8="MOEINT4_HIP_ROUTED_SPLITS13=8" \
  PROFILE_POINTS="mixtral-8x7b:8" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
for v in main nz nz_s2 nz_s8; do echo "== $v"; cat $O/ab/profile-$v.log; done
tar czf $OUT/call5.tgz -C $O .
