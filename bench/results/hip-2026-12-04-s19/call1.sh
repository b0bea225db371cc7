#!/bin/bash
# Session 19, call 1 (carry ["build-hipdeps", "build-packed"]). Builds made
# on the development machine (bench/hip/README.md), packed in
# build-packed/libs.tar.xz:
#   build-main   32e2640 (HEAD)                       bench/hip/prebuild.sh
#   build-epi    HEAD + s18/next-bf16-epilogue.diff   bench/hip/prebuild.sh
#   build-narrow HEAD + narrow-tiles.diff (q256 with 16- and 32-row wgmmas,
#                gemm2 tiles of <= 64 rows copied, not one 256-row box)
#   build-nvt    HEAD + s18/next-two-queued.diff, with the tests
# 1. tests: two-queued's int4 forward and graph tests; narrow's through the
#    same test binaries (MOEINT4_BACKEND_PATH names its plugin): the tile
#    test forces q256 over 3-1200 tokens.
# 2. A/B prefill: main (bf16 + int4) vs two vs epi (bf16) at 512, 2048, 4096.
# 3. A/B small batches: main's defaults vs q256 forced, on main and narrow.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o; mkdir -p $O
(cd build-nvt && timeout 150 ctest --timeout 140 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests-two.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-two.log | tail -4
T=$(find build-nvt -name test_hip_forward -type f | head -1)
(MOEINT4_BACKEND_PATH=$PWD/build-narrow MOEINT4_HIP_WEIGHTS=int4 timeout 120 $T) > $O/tests-narrow.log 2>&1
echo "narrow test_hip_forward: exit $?"; grep -E "PASSED|FAILED|ERROR" $O/tests-narrow.log | tail -5
OUT=$O/ab DEPS=build-hipdeps TOKENS=512,2048,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 WEIGHTS_epi=bf16 \
  VARIANTS="main=lib:build-main two=lib:build-nvt/lib epi=lib:build-epi" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:512" \
  timeout 250 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "int4_ws|wgmma" $O/ab/profile-*.log | head -20
OUT=$O/small DEPS=build-hipdeps TOKENS=64,128,256,512 WEIGHTS=int4 ROUNDS=2 \
  ENV_q256f="MOEINT4_HIP_TILE=q256" ENV_narrowf="MOEINT4_HIP_TILE=q256" \
  VARIANTS="main=lib:build-main q256f=@main narrowf=lib:build-narrow" \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:512" \
  timeout 200 bash bench/hip/ab_bench.sh > $O/small.log 2>&1
cat $O/small/ab-table.md || tail -30 $O/small.log
grep -E "us  x" $O/small/profile-*.log | head -30
tar czf "$OUT/call1.tgz" -C $O .
