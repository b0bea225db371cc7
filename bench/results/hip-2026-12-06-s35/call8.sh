#!/bin/bash
# Session 35, call 8 (carry ["build-hipdeps", "build-packs35"]; any card): the
# exact warp-specialized tiles qw32 and qw128 with staged scales (the
# producer copies 8 chunks' scales and zero points of each row into a ring;
# the consumers read them from shared memory instead of loading them from
# global memory a chunk ahead; build-ss from ss.tar.xz) against 216996e
# (build-bw from bw.tar.xz). Tests of ss: the int4 forward (with the new
# test_ws_staged_scales), graph, weights and conformance entries. A/B:
# int4 at M = 64, 256, 512, 2048 (Mixtral: qw32, qw64 (unchanged), qw128,
# q256 (unchanged); Qwen3: d8, qw32, qw32, qw128), two rounds, graph replay.
O=$OUT/s35c8
. bench/hip/device_call.sh build-packs35 bw ss
hip bash -c 'cd build-ss && timeout 200 ctest --timeout 190 -j4 -R "^(test_hip_forward_int4|test_hip_weights|hip_conformance_int4|test_hip_graph_int4)$" --output-on-failure' > $O/tests.log 2>&1
grep -hE "tests passed|\*\*\*|Failed|Total Test|staged|FAILED|ERROR" $O/tests.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=64,256,512,2048 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-bw/lib ss=lib:build-ss/lib" PROFILE_POINTS="mixtral-8x7b:64" \
  timeout 260 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
for v in main ss; do echo "== $v"; head -8 $O/ab/profile-$v.log 2>/dev/null; done
tar czf $OUT/call8.tgz -C $O .
