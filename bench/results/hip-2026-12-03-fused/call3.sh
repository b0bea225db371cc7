#!/bin/bash
# Device call 3 of 2026-12-03 (session 13): the direct decode's gemm2 pulls
# the chunks of its runs past its ring into L2 before it waits for gemm13
# (prefetch.global.L2; MOEINT4_HIP_DECODE_L2 = chunks a run, 0 in this build
# unless set). The HIP tests with MOEINT4_HIP_DECODE_L2=64 (every chunk of
# every run), then int4 at every README size on main (HEAD before
# the prefetch: build-main) and the BF16 mode, and the prefetch's depths
# (l8, l16, l32, l64: chunks a run) on the new build at M = 1 and 8.
set -x
tar xJf build-packed/libs.tar.xz
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
ln -sfn "$PWD" /tmp/snap
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
mkdir -p /tmp/o3
(cd build-nvt && MOEINT4_HIP_DECODE_L2=64 timeout 200 ctest -R '^(test_hip_|hip_conformance_int4)' --output-on-failure) > /tmp/o3/tests-l2-64.log 2>&1
tail -4 /tmp/o3/tests-l2-64.log
export WEIGHTS_bf=bf16 TOKENS_bf=1,8,64,512,4096
export ENV_l8=MOEINT4_HIP_DECODE_L2=8 ENV_l16=MOEINT4_HIP_DECODE_L2=16 ENV_l32=MOEINT4_HIP_DECODE_L2=32 ENV_l64=MOEINT4_HIP_DECODE_L2=64
export TOKENS_l0=1,8 TOKENS_l8=1,8 TOKENS_l16=1,8 TOKENS_l32=1,8 TOKENS_l64=1,8
OUT=/tmp/o3 DEPS=build-hipdeps TOKENS=1,8,16,32,64,512,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main bf=@main l0=lib:build-nvt/lib l8=@l0 l16=@l0 l32=@l0 l64=@l0" \
  PROFILE_POINTS="mixtral-8x7b:1 qwen3-30b-a3b:1" \
  timeout 400 bash bench/hip/ab_bench.sh > /tmp/o3/ab.log 2>&1
cat /tmp/o3/ab-table.md
grep -h "us  x1\|forward" /tmp/o3/profile-*.log | head -40
tar czf "$OUT/call3.tgz" -C /tmp/o3 .
