#!/bin/bash
# Session 24, call 1 (carry ["build-hipdeps", "build-packn", "build-packs"];
# builds: prepare.sh). The int4 wgmma tiles' rounded A fragments by two
# bf16x2 FMAs a pair (branch hip-split-scale, build-split) against main
# (build-new):
# 1. on the branch: test_hip_dequant_int4 (its new test_rounded_pairs: every
#    f16 / bf16 scale, zero point 0..16 and code against the BF16 mode's
#    bits, on the device), test_hip_forward_int4 (q256, q64, q128 forced
#    over the tile matrix), hip_conformance_int4, test_hip_graph_int4;
# 2. A/B where q256 runs: Qwen3 M = 2048 / 4096 (128 / 256 rows an expert),
#    Mixtral M = 1024 (256 rows) and, with MOEINT4_HIP_INT4_PREFILL=q256,
#    Mixtral M = 2048 / 4096; per-kernel profiles at Qwen3 4096 and
#    Mixtral 1024.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-split
for t in build-packn/new build-packs/split; do tar xJf $t.tar.xz; done
O=/tmp/s24c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
(cd build-split && timeout 200 ctest --timeout 190 -j4 \
  -R '^(test_hip_dequant_int4|test_hip_forward_int4|hip_conformance_int4|test_hip_graph_int4)$' \
  --output-on-failure) > $O/tests-split.log 2>&1
grep -E "tests passed|\*\*\*|Failed|mismatching|SKIPPED" $O/tests-split.log | tail -12
OUT=$O/ab DEPS=build-hipdeps TOKENS=1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-new/lib split=lib:build-split/lib mainq=@main splitq=@split" \
  ENV_mainq=MOEINT4_HIP_INT4_PREFILL=q256 ENV_splitq=MOEINT4_HIP_INT4_PREFILL=q256 \
  TOKENS_mainq=2048,4096 TOKENS_splitq=2048,4096 \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:1024" \
  timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|^[a-z0-9-]+:[0-9]+:" $O/ab/profile-*.log | head -40
tar czf "$OUT/call1.tgz" -C $O .
