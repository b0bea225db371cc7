#!/bin/bash
# Session 33, call 5 (carry ["build-hipdeps", "build-packs33"]): the tile
# rule that sends a batch to the routed paths when the direct decode would
# read too many experts twice (hip_tiles.hip, direct_extra_bytes; build
# build-rule33) against main (build-n, as calls 3 and 4). The forward and
# graph tests and the conformance matrix on the rule's build, then main,
# rule and w64 (main with MOEINT4_HIP_TILE=w64: the BF16 mode's routed
# tile, to see where the rule sends it) at M = 2, 3, 4, 8 of both presets in
# both weights modes, two rounds, graph replay, L2 flushed.
O=$OUT/s33c5
. bench/hip/device_call.sh build-packs33 main33 rule33
hip bash -c 'cd build-rule33 && timeout 150 ctest --timeout 140 -j3 -R "^(test_hip_forward|test_hip_graph|hip_conformance)" --output-on-failure' > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=2,3,4,8 WEIGHTS=int4,bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-n/lib rule=lib:build-rule33/lib w64=@main" ENV_w64="MOEINT4_HIP_TILE=w64" \
  WEIGHTS_w64=bf16 PROFILE_POINTS="mixtral-8x7b:3" timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
tar czf $OUT/call5.tgz -C $O .
