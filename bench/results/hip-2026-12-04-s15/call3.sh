#!/bin/bash
# Device call 3 of 2026-12-04 (session 15): the warp-specialized BF16
# wgmma GEMM (a producer warpgroup fills the stages, two consumer
# warpgroups wait on per-stage mbarriers; the default for BF16 weights,
# MOEINT4_HIP_WGMMA_PIPE=sync keeps the old kernel). First the BF16
# forward test alone (a hang stops the call), then the int4 one, then
# the BF16 mode at M = 64, 512, 4096 (new, sync, main = 3568260) and
# int4 at M = 4096 (n4 = new, m4 = main). Since call 2: the producer copies
# whole 128-byte rows (4 a warp-copy, not 16 half-sectors), one arrival a
# warp on both barriers, a stage signalled one step after its copies were
# issued (new) or two (ws2 = MOEINT4_HIP_WGMMA_PIPE=ws2).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o3
(cd build-nvt && timeout 60 ctest -R '^test_hip_forward_bf16$' --output-on-failure) > /tmp/o3/smoke.log 2>&1
smoke=$?
tail -5 /tmp/o3/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && timeout 60 ctest -R '^test_hip_forward_int4$' --output-on-failure) > /tmp/o3/tests-new.log 2>&1
  tail -5 /tmp/o3/tests-new.log
  export ENV_sync=MOEINT4_HIP_WGMMA_PIPE=sync ENV_ws2=MOEINT4_HIP_WGMMA_PIPE=ws2 WEIGHTS_n4=int4 TOKENS_n4=4096 WEIGHTS_m4=int4 TOKENS_m4=4096
  OUT=/tmp/o3 DEPS=build-hipdeps TOKENS=64,512,4096 WEIGHTS=bf16 ROUNDS=2 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib ws2=@new sync=@new n4=@new m4=@main" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096" \
    timeout 330 bash bench/hip/ab_bench.sh > /tmp/o3/ab.log 2>&1
  cat /tmp/o3/ab-table.md
fi
tar czf "$OUT/call3.tgz" -C /tmp/o3 .
