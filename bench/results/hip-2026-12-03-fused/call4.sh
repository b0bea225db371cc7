#!/bin/bash
# Device call 4 of 2026-12-03 (session 13): the HIP tests on HEAD (72e5811,
# the tests' build: the routed GEMMs serve both or neither), then, with
# hip_bench.py seeding every random draw from the preset and M alone (runs
# over other size lists now time the same routings): main (that build) at
# the README table's sizes in int4 and in the BF16 mode (bf), and the int4
# grouped GEMM's row tiles forced (MOEINT4_HIP_TILE=q8 .. q128: t8 .. t128)
# at M = 16, 32, 64 and 512, against the tile the library chooses.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o4
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o4/tests-main.log 2>&1
tail -4 /tmp/o4/tests-main.log
export WEIGHTS_bf=bf16 TOKENS_bf=1,8,64,512,4096
for t in 8 16 32 64 128; do
  export ENV_t$t=MOEINT4_HIP_TILE=q$t TOKENS_t$t=16,32,64,512
done
OUT=/tmp/o4 DEPS=build-hipdeps TOKENS=1,8,16,32,64,512,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-nvt/lib bf=@main t8=@main t16=@main t32=@main t64=@main t128=@main" \
  PROFILE_POINTS="mixtral-8x7b:16 mixtral-8x7b:64" \
  timeout 330 bash bench/hip/ab_bench.sh > /tmp/o4/ab.log 2>&1
cat /tmp/o4/ab-table.md
tar czf "$OUT/call4.tgz" -C /tmp/o4 .
