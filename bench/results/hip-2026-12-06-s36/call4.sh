#!/bin/bash
# Prepared in session 36 for the next session, not run (carry ["build-hipdeps",
# "build-packs34", "build-packs37"]; any card; made as the page says:
# build-mn = main at ccabdd0, build-ch = branch chains37, build-kb and
# build-hd as in call 2).
# 1. main's int4 forward entry alone (the knob's tests in int4 mode and
#    session 35's review code, which no GPU has run through it), then its
#    int4 weights, conformance and graph entries.
# 2. The routed decode with a chunk's 8 MMAs in two chains of 4
#    (build-ch: -DMI4_ROUTED_TWO_CHAINS=1) against main (build-kb): its
#    graph test (eager and replays bit-identical), then int4 M = 4, 8, 16
#    with all SMs and with 66 (where the SMs bound it, as on the H200).
# 3. On an H200 only, while time is left: main before session 35 (build-ks)
#    against main's head (build-hd) at M = 4096, both modes (what session
#    35's call 7, never run and now removed, was for).
O=$OUT/s37c4
. bench/hip/device_call.sh build-packs37 mn kb ch
hip bash -c 'cd build-mn && timeout 100 ctest --timeout 95 -R "^test_hip_forward_int4$" --output-on-failure' > $O/tests-forward.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|FAILED|ERROR" $O/tests-forward.log | tail -4
hip bash -c 'cd build-mn && timeout 80 ctest --timeout 75 -j3 -R "^(test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests-main.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|FAILED|ERROR" $O/tests-main.log | tail -4
hip bash -c 'cd build-ch && timeout 60 ctest --timeout 55 -R "^test_hip_graph_int4$" --output-on-failure' > $O/tests-ch.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|differ|FAILED" $O/tests-ch.log | tail -6
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=4,8,16 WEIGHTS=int4 ROUNDS=2 \
  ENV_main66=MOEINT4_HIP_MULTIPROCESSORS=66 ENV_chains66=MOEINT4_HIP_MULTIPROCESSORS=66 \
  VARIANTS="main=lib:build-kb/lib chains=lib:build-ch/lib main66=@main chains66=@chains" \
  PROFILE_POINTS="mixtral-8x7b:8" timeout 200 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
for v in main chains main66 chains66; do echo "== $v"; head -6 $O/ab/profile-$v.log 2>/dev/null; done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && [ $SECONDS -lt 420 ]; then
  . bench/hip/device_call.sh build-packs34 tr34
  . bench/hip/device_call.sh build-packs37 hd
  hip env OUT=$O/ab4096 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4,bf16 ROUNDS=2 \
    VARIANTS="main=lib:build-ks/lib head=lib:build-hd/lib" PROFILE_POINTS="qwen3-30b-a3b:4096" \
    timeout 160 bash bench/hip/ab_bench.sh > $O/ab4096.log 2>&1
  cat $O/ab4096/ab-table.md || tail -20 $O/ab4096.log
fi
tar czf $OUT/call4.tgz -C $O .
