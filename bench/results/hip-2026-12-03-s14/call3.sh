#!/bin/bash
# Device call 3 of 2026-12-03 (session 14): the BF16 wgmma GEMM's k loop
# with its copies hoisted (each thread's row pointers and no-row byte
# counts set once a tile, one swizzled destination with fixed offsets):
# the HIP tests on that build (the tests' tree, carried as build-nvt),
# then main (build-main: 1496782's libraries, the same wgmma kernel as
# 271bb81) against it in both weights modes where the wgmma tiles serve
# (BF16 mode M = 64, 512, 4096; int4 M = 4096: expansion + the same GEMM).
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o3
(cd build-nvt && timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o3/tests-new.log 2>&1
tail -4 /tmp/o3/tests-new.log
export WEIGHTS_mainbf=bf16 WEIGHTS_newbf=bf16 TOKENS_mainbf=64,512,4096 TOKENS_newbf=64,512,4096
OUT=/tmp/o3 DEPS=build-hipdeps TOKENS=4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib mainbf=@main newbf=@new" \
  PROFILE_POINTS="mixtral-8x7b:4096 qwen3-30b-a3b:4096" \
  timeout 330 bash bench/hip/ab_bench.sh > /tmp/o3/ab.log 2>&1
cat /tmp/o3/ab-table.md
tar czf "$OUT/call3.tgz" -C /tmp/o3 .
