#!/bin/bash
# Device call 4 of 2026-12-03: the routed decode's grid shared over the
# tiles the routing made (grid) and, on top, its biased codes (biased):
# HIP tests on biased, then the A/B against HEAD (old) at 8-64 tokens.
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o4
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o4/tests-biased.log 2>&1
tail -4 /tmp/o4/tests-biased.log
OUT=/tmp/o4 DEPS=build-hipdeps TOKENS=8,32,64 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="old=lib:build-main grid=lib:build-grid biased=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:8 mixtral-8x7b:64 qwen3-30b-a3b:64" \
  bash bench/hip/ab_bench.sh > /tmp/o4/ab.log 2>&1
grep graph /tmp/o4/ab.log
cat /tmp/o4/profile-*.log
tar czf "$OUT/call4.tgz" -C /tmp/o4 .
