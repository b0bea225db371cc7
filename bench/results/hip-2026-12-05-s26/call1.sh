#!/bin/bash
# Session 26, call 1 (carry ["build-hipdeps", "build-packn", "build-packm"]):
# session 25's call 3 (the merged main d600039 as one tree: every HIP entry,
# the memory ones alone after; A/B against 4f763da where its two changes
# run) and two sweeps of run-time knobs on d600039:
#  - q256 against the expansion to BF16 from 512 rows an expert (Mixtral
#    M = 2048 .. 3584: 512 .. 896 rows; Qwen3 at those M is the control);
#  - the tiles at 64 and 128 rows an expert (Mixtral M = 256 / 512, Qwen3
#    M = 1024), where issue 15 wants int4 faster than the BF16 mode,
#    timed in the same rounds.
# Packs: made by bench/results/hip-2026-12-05-s26/prepare.sh.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for t in build-packn/new build-packm/m25; do tar xJf $t.tar.xz; done
O=/tmp/s26c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
(cd build-m25 && timeout 170 ctest --timeout 160 -j4 -R '^(test_hip_|hip_conformance_)' -E memory \
  --output-on-failure) > $O/tests-m25.log 2>&1
(cd build-m25 && timeout 60 ctest --timeout 50 -R '^test_hip_memory' --output-on-failure) > $O/tests-m25-memory.log 2>&1
grep -E "tests passed|\*\*\*|Failed" $O/tests-m25.log $O/tests-m25-memory.log | tail -14
OUT=$O/ab DEPS=build-hipdeps TOKENS=64,1024,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-new/lib m25=lib:build-m25/lib" PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:4096" \
  timeout 120 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
OUT=$O/q256 DEPS=build-hipdeps TOKENS=2048,2560,3072,3584 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="m25=lib:build-m25/lib q256=@m25" ENV_q256=MOEINT4_HIP_INT4_PREFILL=q256 \
  PROFILE_POINTS="mixtral-8x7b:3072" timeout 130 bash bench/hip/ab_bench.sh > $O/q256.log 2>&1
cat $O/q256/ab-table.md || tail -30 $O/q256.log
OUT=$O/tiles DEPS=build-hipdeps TOKENS=256,512,1024 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="m25=lib:build-m25/lib bf16=@m25 qw64=@m25 qw128=@m25 q256=@m25" WEIGHTS_bf16=bf16 \
  ENV_qw64=MOEINT4_HIP_TILE=qw64 ENV_qw128=MOEINT4_HIP_TILE=qw128 ENV_q256=MOEINT4_HIP_TILE=q256 \
  PROFILE_POINTS="mixtral-8x7b:256 mixtral-8x7b:512" timeout 190 bash bench/hip/ab_bench.sh > $O/tiles.log 2>&1
cat $O/tiles/ab-table.md || tail -30 $O/tiles.log
tar czf "$OUT/call1.tgz" -C $O .
