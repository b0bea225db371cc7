#!/bin/bash
# Session 33, call 6 (carry ["build-hipdeps", "build-packs33"]): the tile
# rule as landed (MI4_DIRECT_MAX_EXTRA_BYTES 100 MB, only where d8 / w64
# exist; build-rule33 from final33.tar.xz) against main (build-n). Every HIP
# test entry and the memory entries on the rule's build, then main and rule
# at M = 1, 2, 3, 4, 8 of both presets in both weights modes, two rounds,
# graph replay, L2 flushed.
O=$OUT/s33c6
. bench/hip/device_call.sh build-packs33 main33 final33
hip bash -c 'cd build-rule33 && timeout 170 ctest --timeout 160 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests.log 2>&1
hip bash -c 'cd build-rule33 && timeout 50 ctest --timeout 45 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log $O/tests-memory.log | tail -8
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1,2,3,4,8 WEIGHTS=int4,bf16 ROUNDS=2 \
  VARIANTS="main=lib:build-n/lib rule=lib:build-rule33/lib" PROFILE_POINTS="mixtral-8x7b:3" \
  timeout 300 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
tar czf $OUT/call6.tgz -C $O .
