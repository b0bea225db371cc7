#!/bin/bash
# Device call 1 of 2026-12-03 (session 12): the routed decode with more warps
# an SM. Variants (prebuilt with bench/hip/prebuild.sh, -D flags through
# CUDAFLAGS): staged kernels 12 warps, ring 3 (w12, the tests' build), 16
# warps, ring 2 (w16); Mixtral's gemm2 (token rows in the ring) 8 warps,
# ring 4 as before, or 10 warps, ring 3 (r10). HIP tests on w12, then the
# A/B against HEAD (old) at 8 and 32 tokens, and the routed tiles forced
# (MOEINT4_HIP_TILE=d8) at 32 and 64 tokens.
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o1
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o1/tests-w12.log 2>&1
tail -4 /tmp/o1/tests-w12.log
export ENV_oldd8="MOEINT4_HIP_TILE=d8" ENV_w12d8="MOEINT4_HIP_TILE=d8" ENV_w16d8="MOEINT4_HIP_TILE=d8"
export TOKENS_oldd8=32,64 TOKENS_w12d8=32,64 TOKENS_w16d8=32,64
OUT=/tmp/o1 DEPS=build-hipdeps TOKENS=8,32 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-grid w12=lib:build-w12 w12r10=lib:build-w12r10 w16=lib:build-w16 w16r10=lib:build-w16r10 oldd8=@old w12d8=@w12 w16d8=@w16" \
  PROFILE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:32" \
  bash bench/hip/ab_bench.sh > /tmp/o1/ab.log 2>&1
grep graph /tmp/o1/ab.log
grep -h "us  x1\|forward" /tmp/o1/profile-*.log
tar czf "$OUT/call1.tgz" -C /tmp/o1 .
