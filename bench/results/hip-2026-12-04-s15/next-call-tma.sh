#!/bin/bash
# Prepared for the next session, not yet run: the warp-specialized BF16
# wgmma GEMM with its weight rows loaded by TMA (ws-tma-weights.diff on
# dc5888a: 2D boxes of 64 inputs, 128B swizzle, counted on the stage's
# `full` mbarrier; the producer's 16 weight-row pointers go, and with them
# the gated producer's spill). Opt-in with MOEINT4_HIP_WGMMA_TMA=1.
# Build the tests' tree with the diff applied (bench/hip/README.md), carry
# build-nvt, build-hipdeps, build-packed (build-main = dc5888a's libraries).
# Checks that the diff compiles for sm_90a (ptxas: no spills in any of the
# 12 ws instantiations) and for gfx90a/gfx940 were made on 2026-12-04.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o6
(cd build-nvt && MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws timeout 60 ctest -R '^test_hip_forward_bf16$' --output-on-failure) > /tmp/o6/smoke.log 2>&1
smoke=$?
tail -5 /tmp/o6/smoke.log
if [ $smoke -eq 0 ]; then
  (cd build-nvt && MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o6/tests-tma.log 2>&1
  tail -5 /tmp/o6/tests-tma.log
  export ENV_tma="MOEINT4_HIP_WGMMA_TMA=1" ENV_tmaws="MOEINT4_HIP_WGMMA_TMA=1 MOEINT4_HIP_WGMMA_PIPE=ws"
  export WEIGHTS_n4=int4 TOKENS_n4=4096 WEIGHTS_t4=int4 TOKENS_t4=4096 ENV_t4="MOEINT4_HIP_WGMMA_TMA=1"
  OUT=/tmp/o6 DEPS=build-hipdeps TOKENS=64,512,4096 WEIGHTS=bf16 ROUNDS=2 \
    VARIANTS="main=lib:build-main new=lib:build-nvt/lib tma=@new tmaws=@new n4=@new t4=@new" \
    PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096" \
    timeout 330 bash bench/hip/ab_bench.sh > /tmp/o6/ab.log 2>&1
  cat /tmp/o6/ab-table.md
fi
tar czf "$OUT/call6.tgz" -C /tmp/o6 .
