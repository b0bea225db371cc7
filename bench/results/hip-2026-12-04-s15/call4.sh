#!/bin/bash
# Device call 4 of 2026-12-04 (session 15): the warp-specialized BF16
# wgmma GEMM as it is committed: the producer reads its row numbers from
# shared memory each k tile and runs at 120 registers, the consumers at
# 192 (ptxas: no spills), a stage signalled one step after its copies.
# First the BF16 forward test (a hang stops the call), then every HIP test
# (default: warp-specialized for both GEMMs), the forward tests again with
# MOEINT4_HIP_WGMMA_PIPE=sync and =gemm2, then the BF16 mode at M = 64,
# 512, 4096 (new; g2 = gemm2 only; sync; main = 3568260) and int4 at
# M = 4096 (n4 = new, g4 = gemm2 only, m4 = main).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/o4/gpu.txt
(cd build-nvt && timeout 60 ctest -R '^test_hip_forward_bf16$' --output-on-failure) > /tmp/o4/smoke.log 2>&1
smoke=$?
tail -5 /tmp/o4/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o4/tests-new.log 2>&1
  tail -5 /tmp/o4/tests-new.log
  for pipe in sync gemm2; do
    (cd build-nvt && MOEINT4_HIP_WGMMA_PIPE=$pipe timeout 60 ctest -R '^test_hip_forward_' --output-on-failure) > /tmp/o4/tests-$pipe.log 2>&1
    tail -3 /tmp/o4/tests-$pipe.log
  done
  export ENV_g2=MOEINT4_HIP_WGMMA_PIPE=gemm2 ENV_g4=MOEINT4_HIP_WGMMA_PIPE=gemm2 ENV_sync=MOEINT4_HIP_WGMMA_PIPE=sync
  export WEIGHTS_n4=int4 TOKENS_n4=4096 WEIGHTS_g4=int4 TOKENS_g4=4096 WEIGHTS_m4=int4 TOKENS_m4=4096
  OUT=/tmp/o4 DEPS=build-hipdeps TOKENS=64,512,4096 WEIGHTS=bf16 ROUNDS=2 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib g2=@new sync=@new n4=@new g4=@new m4=@main" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096" \
    timeout 300 bash bench/hip/ab_bench.sh > /tmp/o4/ab.log 2>&1
  cat /tmp/o4/ab-table.md
fi
tar czf "$OUT/call4.tgz" -C /tmp/o4 .
