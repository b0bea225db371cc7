#!/bin/bash
# Device call 5 of 2026-12-03 (session 14): w2's expansion to BF16 on a
# side stream beside gemm13 (int4 weights where the wgmma tiles serve:
# forked after w13's expansion, joined before gemm2; 132 blocks of 128
# threads that fit beside the GEMM's one block an SM). The HIP tests on
# that build (the tests' tree, carried as build-nvt; the graph test now
# captures M = 2048, which forks), then int4 at M = 2048 and 4096 with the
# side stream (new) and without (inline: MOEINT4_HIP_EXPAND_BESIDE=0),
# against main (build-main, 271bb81's kernels) and the BF16 mode.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o5
(cd build-nvt && timeout 240 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o5/tests-new.log 2>&1
tail -5 /tmp/o5/tests-new.log
export ENV_inline=MOEINT4_HIP_EXPAND_BESIDE=0 WEIGHTS_bf=bf16
OUT=/tmp/o5 DEPS=build-hipdeps TOKENS=2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib inline=@new bf=@new" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:4096" \
  timeout 260 bash bench/hip/ab_bench.sh > /tmp/o5/ab.log 2>&1
cat /tmp/o5/ab-table.md
tar czf "$OUT/call5.tgz" -C /tmp/o5 .
