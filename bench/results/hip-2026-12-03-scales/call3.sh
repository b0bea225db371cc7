#!/bin/bash
# Device call 3 of 2026-12-03 (session 12): f16 group scales by one hardware
# conversion in every matrix-core int4 kernel, and the routed decode GEMVs up
# to 4 rows per expert (new, the tests' build) against HEAD (old): the HIP
# tests on new, the A/B at 1-512 tokens, ncu's instruction count of the
# routed gemm13 at Mixtral M = 8.
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o3
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o3/tests-new.log 2>&1
tail -4 /tmp/o3/tests-new.log
OUT=/tmp/o3 DEPS=build-hipdeps TOKENS=1,8,16,32,64,512 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-grid new=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:1 mixtral-8x7b:8 mixtral-8x7b:16 qwen3-30b-a3b:64 mixtral-8x7b:512" \
  bash bench/hip/ab_bench.sh > /tmp/o3/ab.log 2>&1
grep graph /tmp/o3/ab.log
grep -h "us  x1\|forward" /tmp/o3/profile-*.log
for v in old:build-grid/libmoeint4.so new:build-nvt/lib/libmoeint4.so; do
  ncu --clock-control none --kernel-name "regex:int4_routed_decode" --launch-skip 20 --launch-count 2 \
    --section SpeedOfLight --section InstructionStats --section SchedulerStats \
    python3 bench/hip/hip_profile.py --plain --lib "${v#*:}" mixtral-8x7b:8 > "/tmp/o3/ncu-${v%%:*}.txt" 2>&1
done
grep -E "^  [a-z]|Duration|Executed Instructions  |Issued Warp" /tmp/o3/ncu-*.txt
tar czf "$OUT/call3.tgz" -C /tmp/o3 .
