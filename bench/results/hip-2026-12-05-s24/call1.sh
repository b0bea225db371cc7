#!/bin/bash
# Session 24, call 1 (carry ["build-hipdeps", "build-packn", "build-packs"];
# builds: prepare.sh). Two changes made without a GPU, against main
# (build-new):
#   split: the int4 wgmma tiles' rounded A fragments by two bf16x2 FMAs a
#     pair (branch hip-split-scale, libraries only: build-split);
#   both: split and the combine with 8 slots' rows in flight (branch
#     hip-s24, with the tests: build-s24).
# 1. every HIP entry on hip-s24 but the memory ones (among them
#    test_hip_dequant_int4's new test_rounded_pairs: every f16 / bf16 scale,
#    zero point 0..16 and code against the BF16 mode's bits, on the device);
# 2. A/B where q256 and the combine run: M = 1024 / 2048 / 4096 for both
#    shapes (Qwen3 M = 1024, 64 rows an expert, runs the exact qw64 tile:
#    split's control), and with MOEINT4_HIP_INT4_PREFILL=q256 Mixtral
#    M = 2048 / 4096 (the combine is the same kernel in the BF16 mode);
#    per-kernel profiles at Qwen3 4096 and Mixtral 1024.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/wt-s24
for t in build-packn/new build-packs/s24; do tar xJf $t.tar.xz; done
O=/tmp/s24c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
(cd build-s24 && timeout 200 ctest --timeout 190 -j4 -R '^(test_hip_|hip_conformance_)' -E memory \
  --output-on-failure) > $O/tests-s24.log 2>&1
grep -E "tests passed|\*\*\*|Failed|mismatching|SKIPPED" $O/tests-s24.log | tail -14
OUT=$O/ab DEPS=build-hipdeps TOKENS=1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-new/lib split=lib:build-split both=lib:build-s24/lib mainq=@main bothq=@both" \
  ENV_mainq=MOEINT4_HIP_INT4_PREFILL=q256 ENV_bothq=MOEINT4_HIP_INT4_PREFILL=q256 \
  TOKENS_mainq=2048,4096 TOKENS_bothq=2048,4096 \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:1024" \
  timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|^[a-z0-9-]+:[0-9]+:" $O/ab/profile-*.log | head -60
tar czf "$OUT/call1.tgz" -C $O .
