#!/bin/bash
# Session 33, call 1 (carry ["build-hipdeps", "build-packs33"]): the fused
# int4 decode (hip_int4_fused_decode.hip, uncommitted tree of the session)
# built for NVIDIA (build-n). Every HIP test entry and the memory entries,
# then an A/B in one process a round: fused (the default: Qwen3 M = 1),
# two (MOEINT4_HIP_DECODE_FUSED=0: the two-kernel decode) and force (=1:
# fused at every direct-decode M) at M = 1, 2, 4, 8 of both presets
# (Mixtral's hidden 4096 does not fit the fused block: the same kernels in
# all three), graph replay, L2 flushed, with per-kernel profiles of Qwen3
# M = 1. LIMIT (the call's seconds) gates each step.
O=$OUT/s33c1
. bench/hip/device_call.sh build-packs33 fused33
left() { echo $(( ${LIMIT:-590} - SECONDS )); }
hip bash -c 'cd build-n && timeout 170 ctest --timeout 160 -j3 -R "^(test_hip_|hip_conformance_)" -E memory --output-on-failure' > $O/tests.log 2>&1
hip bash -c 'cd build-n && timeout 50 ctest --timeout 45 -R "^test_hip_memory" --output-on-failure' > $O/tests-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log $O/tests-memory.log | tail -12
grep -B2 -A12 "test_fused_decode" $O/tests.log | grep -E "FAILED|error|Error|workspace at" | head -20
ab=$(( $(left) - 15 )); [ $ab -gt 300 ] && ab=300
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=1,2,4,8 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="fused=lib:build-n/lib two=@fused force=@fused" ENV_two="MOEINT4_HIP_DECODE_FUSED=0" \
  ENV_force="MOEINT4_HIP_DECODE_FUSED=1" PROFILE_POINTS="qwen3-30b-a3b:1" \
  timeout $ab bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -20 $O/ab.log
grep -h "copy .* GB/s" $O/ab.log | head -2
grep -hE "us  x1 |forward" $O/ab/profile-*.log | head -30
tar czf $OUT/call1.tgz -C $O .
