#!/bin/bash
# Device call 5 of 2026-12-04 (session 15), on the last device minutes: the
# committed default (gemm2 warp-specialized, gemm13 the old kernel; call
# 3's producer) checked end to end. The BF16 and int4 forward tests, then
# the BF16 mode and int4 at M = 4096, new against main (3568260) and
# new with MOEINT4_HIP_WGMMA_PIPE=sync, one round.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o5
(cd build-nvt && timeout 40 ctest -R '^test_hip_forward_' --output-on-failure) > /tmp/o5/tests-new.log 2>&1
tail -3 /tmp/o5/tests-new.log
export ENV_sync=MOEINT4_HIP_WGMMA_PIPE=sync
OUT=/tmp/o5 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=bf16,int4 ROUNDS=1 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib sync=@new" \
  timeout 120 bash bench/hip/ab_bench.sh > /tmp/o5/ab.log 2>&1
cat /tmp/o5/ab-table.md
tar czf "$OUT/call5.tgz" -C /tmp/o5 .
