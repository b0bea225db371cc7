#!/bin/bash
# Session 37, call 1 (carry ["build-hipdeps", "build-packs37"]; packs made in
# session 36: build-mn = main at ccabdd0, whose HIP code is main's head;
# build-ch = branch chains37, -DMI4_ROUTED_TWO_CHAINS=1; build-kb = libs).
# On an H200 (the card issue 15's targets name, none lent since session 34):
#   1. the README's table at main's head, both weights modes, two rounds;
#   2. main's int4 forward entry alone, then its other int4 entries;
#   3. the routed decode's two chains against main at M = 4, 8, 16.
# On an H100: session 36's call 4 (steps 2, 3, then the chains with 66 SMs).
O=$OUT/s37c1
. bench/hip/device_call.sh build-packs37 mn kb ch
tests() {
  hip bash -c 'cd build-mn && timeout 100 ctest --timeout 95 -R "^test_hip_forward_int4$" --output-on-failure' > $O/tests-forward.log 2>&1
  grep -hE "tests passed|\*\*\*|Failed|FAILED|ERROR" $O/tests-forward.log | tail -4
  hip bash -c 'cd build-mn && timeout 80 ctest --timeout 75 -j3 -R "^(test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests-main.log 2>&1
  grep -hE "tests passed|\*\*\*|Failed|FAILED|ERROR" $O/tests-main.log | tail -4
  hip bash -c 'cd build-ch && timeout 60 ctest --timeout 55 -R "^test_hip_graph_int4$" --output-on-failure' > $O/tests-ch.log 2>&1
  grep -hE "tests passed|\*\*\*|Failed|differ|FAILED" $O/tests-ch.log | tail -6
}
chains() { # extra VARIANTS / ENV words for the 66-SM rows
  hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=4,8,16 WEIGHTS=int4 ROUNDS=2 "$@" \
    PROFILE_POINTS="mixtral-8x7b:8" timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
  cat $O/ab/ab-table.md || tail -20 $O/ab.log
}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  hip env OUT=$O/table DEPS=build-hipdeps TOKENS=1,8,64,256,512,4096 WEIGHTS=bf16,int4 ROUNDS=2 \
    VARIANTS="main=lib:build-mn/lib" PROFILE_POINTS="qwen3-30b-a3b:1 mixtral-8x7b:64 qwen3-30b-a3b:4096" \
    timeout 250 bash bench/hip/ab_bench.sh > $O/table.log 2>&1
  cat $O/table/ab-table.md || tail -20 $O/table.log
  grep -h "copy .* GB/s" $O/table.log | head -2
  tests
  [ $SECONDS -lt 420 ] && chains VARIANTS="main=lib:build-kb/lib chains=lib:build-ch/lib"
else
  tests
  chains ENV_main66=MOEINT4_HIP_MULTIPROCESSORS=66 ENV_chains66=MOEINT4_HIP_MULTIPROCESSORS=66 \
    VARIANTS="main=lib:build-kb/lib chains=lib:build-ch/lib main66=@main chains66=@chains"
fi
for f in $O/ab/profile-*.log; do echo "== $f"; head -6 "$f"; done 2>/dev/null
tar czf $OUT/call1.tgz -C $O .
