#!/bin/bash
# Device call 4 of 2026-12-03 (session 12): the routing kernel's block scan
# by warp shuffles, its slots loaded once, and the routed gemm13 launched
# early after it (route, the tests' build) against fc6404b (fc): the HIP
# tests on route, the A/B in int4 at 1-4096 tokens, and the BF16 mode on
# route's build at the README table's sizes (bf).
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o4
(cd build-nvt && ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o4/tests-route.log 2>&1
tail -4 /tmp/o4/tests-route.log
export WEIGHTS_bf=bf16 TOKENS_bf=1,8,64,512,4096
OUT=/tmp/o4 DEPS=build-hipdeps TOKENS=1,8,16,32,64,512,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="fc=lib:build-fc route=lib:build-nvt/lib bf=@route" \
  PROFILE_POINTS="mixtral-8x7b:8 qwen3-30b-a3b:64 mixtral-8x7b:4096" \
  bash bench/hip/ab_bench.sh > /tmp/o4/ab.log 2>&1
grep graph /tmp/o4/ab.log
grep -h "us  x1\|forward" /tmp/o4/profile-*.log
tar czf "$OUT/call4.tgz" -C /tmp/o4 .
