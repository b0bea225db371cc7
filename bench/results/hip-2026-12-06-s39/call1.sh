#!/bin/bash
# Session 39, call 1 (carry ["build-hipdeps", "build-packs39"]; build-packs39:
# h39 = main at e2f8d9a with its tests, made as bench/hip/README.md says;
# sm_placement and libsm_holder.so built with nvcc 13 -O3 -arch=sm_90a from
# bench/hip at 3b98273, unchanged since).
# On an H200: the README's table at main's head in both weights modes (and
# int4 at M = 4, 16, 32), two rounds, then every HIP entry in the time left.
# Elsewhere (an H100): does holding 38 of its 132 SMs (sm_holder.cu) with
# the grids sized for the other 94 stand in for an H200? sm_placement 38
# first (no block may land on a held SM), then main against main94 at both
# presets, int4, M = 1, 8, 64 (AB_TOKENS), two rounds; the prediction for
# the H200 is main94's time x 94/132, checked against session 32's pairs.
# CALL_LIMIT (the call's seconds, default 570) gates each step. SHORT=1 (a
# call of under 8 minutes): on the H200 the table alone, without the small
# batches and the profiles, and no tests; elsewhere M = 1 and 8 only.
# TABLE_TOKENS and ROUNDS narrow it further (a call of 3-4 minutes:
# TABLE_TOKENS=1,4096 ROUNDS=1 AB_TOKENS=1,8).
O=$OUT/s39c1
. bench/hip/device_call.sh build-packs39 h39
left() { echo $(( ${CALL_LIMIT:-570} - SECONDS )); }
if grep -q H200 $O/gpu.txt; then
  variants="main=lib:build-h39/lib small=@main"
  profiles="qwen3-30b-a3b:1 mixtral-8x7b:8 mixtral-8x7b:64 qwen3-30b-a3b:4096"
  tab=$(( $(left) - 150 )); [ $tab -gt 300 ] && tab=300
  [ -n "$SHORT" ] && variants="main=lib:build-h39/lib" profiles= tab=$(( $(left) - 15 ))
  [ $tab -lt 30 ] && tab=30 # timeout takes no negative limit
  hip env OUT=$O/table DEPS=build-hipdeps TOKENS=${TABLE_TOKENS:-1,8,64,256,512,4096} \
    TOKENS_small=4,16,32 WEIGHTS=bf16,int4 WEIGHTS_small=int4 ROUNDS=${ROUNDS:-2} \
    VARIANTS="$variants" PROFILE_POINTS="$profiles" \
    timeout $tab bash bench/hip/ab_bench.sh > $O/table.log 2>&1
  cat $O/table/ab-table.md || tail -20 $O/table.log
  t=$(( $(left) - 10 )); [ $t -gt 300 ] && t=300; [ -n "$SHORT" ] && t=0
  tests="ctest --timeout $((t - 5)) -j3 -R '^(test_hip_|hip_conformance_)' -E memory"
  [ $t -gt 60 ] && hip bash -c "cd build-h39 && timeout $t $tests --output-on-failure" \
    > $O/tests.log 2>&1
  grep -hE "tests passed|\*\*\*|Failed|Total Test" $O/tests.log 2>/dev/null | tail -6
else
  build-packs39/sm_placement 38 | tee $O/sm_placement.txt
  hold="MOEINT4_HIP_MULTIPROCESSORS=94 MOEINT4_BENCH_HOLD_SMS=38"
  hold="$hold MOEINT4_BENCH_SM_HOLDER=$PWD/build-packs39/libsm_holder.so"
  tokens=${AB_TOKENS:-1,8,64} profiles=mixtral-8x7b:8
  [ -n "$SHORT" ] && tokens=${AB_TOKENS:-1,8} profiles=
  hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=$tokens WEIGHTS=int4 ROUNDS=${ROUNDS:-2} \
    ENV_main94="$hold" VARIANTS="main=lib:build-h39/lib main94=@main" \
    PROFILE_POINTS="$profiles" timeout $(( $(left) - 15 )) \
    bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab/ab-table.md || tail -20 $O/ab.log
fi
tar czf $OUT/call1.tgz -C $O .
