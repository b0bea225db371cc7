#!/bin/bash
# Session 34, call 3 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200; any card). build-ks (this session's tree: the split gemm2
# opt-in, MOEINT4_HIP_ROUTED_X=split; the routed decode's L2 lookahead,
# MOEINT4_HIP_ROUTED_L2=n). Tests: the routed-decode test (every x mode,
# splits, L2 lookahead 5 and 13), graph, weights, int4 conformance. Then
# the A/B, int4, two rounds, graph replay, L2 flushed, at M = 4, 8, 16:
# main (build-rule33), new (build-ks, defaults: main's behaviour), ks /
# ks8 (split into 4 / 8 runs), l2_4 / l2_8 / l2_16 (lookahead), ksl2 (split
# and lookahead 8). On an H200 first bench/hip/stream_pattern.cu (M = 8's
# bytes, blocks an SM forced) and session 33's call 9 (old = main before
# the tile rule, build-n, at M = 3, 4, both weights modes).
O=$OUT/s34c3
. bench/hip/device_call.sh build-packs33 main33 final33
. bench/hip/device_call.sh build-packs34 ks34
H200=0; grep -q H200 $O/gpu.txt && H200=1
if [ $H200 = 1 ]; then
  hip bash -c "nvcc -O3 -arch=sm_90a -o /tmp/stream_pattern bench/hip/stream_pattern.cu && timeout 150 /tmp/stream_pattern" > $O/stream_pattern.txt 2>&1
  cat $O/stream_pattern.txt
fi
hip bash -c 'cd build-ks && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
OLD=""; [ $H200 = 1 ] && OLD="old=lib:build-n/lib"
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=4,8,16 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib new=lib:build-ks/lib ks=@new ks8=@new l2_4=@new l2_8=@new l2_16=@new ksl2=@new $OLD" \
  ENV_ks="MOEINT4_HIP_ROUTED_X=split" ENV_ks8="MOEINT4_HIP_ROUTED_X=split MOEINT4_HIP_ROUTED_KSPLITS=8" \
  ENV_l2_4="MOEINT4_HIP_ROUTED_L2=4" ENV_l2_8="MOEINT4_HIP_ROUTED_L2=8" ENV_l2_16="MOEINT4_HIP_ROUTED_L2=16" \
  ENV_ksl2="MOEINT4_HIP_ROUTED_X=split MOEINT4_HIP_ROUTED_L2=8" \
  TOKENS_old=3,4 WEIGHTS_old=int4,bf16 TOKENS_main=3,4,8,16 WEIGHTS_main=int4,bf16 \
  PROFILE_POINTS="mixtral-8x7b:8" \
  timeout 400 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
for v in main new ks l2_8 ksl2; do echo "== $v"; cat $O/ab/profile-$v.log; done
tar czf $OUT/call3.tgz -C $O .
