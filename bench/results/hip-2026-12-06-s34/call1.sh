#!/bin/bash
# Session 34, call 1 (carry ["build-hipdeps", "build-packs33", "build-packs34"],
# kind nvidia-h200; runs on whatever card comes). The routed decode's gemm2
# with its input split over blocks (build-ks: each block stages its run of
# the token rows; the combine adds the runs' rows) against main (build-rule33,
# whose gemm2 carries the token rows in the ring: 2 KB of inputs with each
# KB of codes). Tests first: the routed-decode test (every x mode, split
# into 2 and 3 runs), the graph test with the split forced, the int4
# conformance matrix, and Mixtral's real shape through `moeint4 run` (error
# against the double reference) in each x mode. Then the A/B, int4, two
# rounds, graph replay, L2 flushed: main, ks (4 runs), ks8 (8 runs), ring
# (ks's build with the ring) at M = 3, 4, 8, 16; on an H200 also session
# 33's call 9 (old = main before the tile rule, build-n) at M = 3, 4 in both
# weights modes.
O=$OUT/s34c1
. bench/hip/device_call.sh build-packs33 main33 final33
. bench/hip/device_call.sh build-packs34 ks34
BP=MOEINT4_BACKEND_PATH=$PWD/build-ks/lib # only where build-ks runs
hip bash -c 'cd build-ks && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -6
hip env $BP MOEINT4_HIP_WEIGHTS=int4 MOEINT4_HIP_ROUTED_X=split timeout 100 build-ks/tests/hip/test_hip_graph > $O/graph-split.log 2>&1
echo "graph with split: exit $?"; tail -3 $O/graph-split.log
for x in default ring split; do
  for m in 3 8 16; do
    hip env $BP MOEINT4_HIP_ROUTED_X=$([ $x = default ] && echo "" || echo $x) timeout 60 build-ks/bin/moeint4 run --backend hip --preset mixtral-8x7b --tokens $m 2>&1 | grep -iE "check:|error|status" | head -3 | sed "s/^/[$x M=$m] /"
  done
done > $O/run-mixtral.log 2>&1
cat $O/run-mixtral.log
EXTRA_V=""
if grep -q H200 $O/gpu.txt; then EXTRA_V="old=lib:build-n/lib"; fi
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=3,4,8,16 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-rule33/lib ks=lib:build-ks/lib ks8=@ks ring=@ks $EXTRA_V" \
  ENV_ks8="MOEINT4_HIP_ROUTED_KSPLITS=8" ENV_ring="MOEINT4_HIP_ROUTED_X=ring" \
  TOKENS_old=3,4 WEIGHTS_old=int4,bf16 WEIGHTS_main=int4,bf16 TOKENS_main=3,4,8,16 \
  PROFILE_POINTS="mixtral-8x7b:8" \
  timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
tar czf $OUT/call1.tgz -C $O .
