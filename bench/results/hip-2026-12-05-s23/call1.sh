#!/bin/bash
# Session 23, call 1 (carry ["build-hipdeps", "build-packed"]); the builds
# were made on the development machine with nvcc 13 (bench/hip/README.md):
#   build-main  prebuild.sh of main (ddad702)
#   build-a     prebuild.sh of main + hip-2026-12-04-s20/next-chunk-stages.diff
#   build-nvt   tests build of main + next-chunk-stages.diff + next-code-tma.diff (B)
#   build-ao    tests build of main + hip-2026-12-05-act-order/int4-act-order.diff,
#               with hip's act_order set to 1 in conformance_expect.c
# 1. the act-order change's entries (int4 and bf16 forward and dequant, the
#    int4 conformance matrix now holding the 17 act-order cases);
# 2. B's int4 entries, the int4 matrix with each exact tile forced, the
#    forward with TMA off (A's cp.async codes);
# 3. A/B main vs A vs B at the exact tiles' sizes, per-kernel times.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
# the test builds name their source trees (worktrees on the development machine)
for wt in /tmp/wt-b /tmp/wt-ao; do ln -sfn "$PWD" $wt; done
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s23c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-ao && timeout 200 ctest --timeout 180 -j3 -R '^(test_hip_forward_(int4|bf16)|test_hip_dequant_(int4|bf16)|hip_conformance_(int4|bf16))$' --output-on-failure) > $O/tests-act-order.log 2>&1 &
(cd build-nvt && timeout 200 ctest --timeout 180 -j3 -R '^(test_hip_forward_int4|test_hip_graph_int4|test_hip_weights|hip_conformance_int4)$' --output-on-failure) > $O/tests-b.log 2>&1 &
wait
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-act-order.log | tail -8
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-b.log | tail -6
for tile in qw32 qw64 qw128; do
  (cd build-nvt && MOEINT4_HIP_TILE=$tile timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-b-conformance-$tile.log 2>&1 &
done
(cd build-nvt && MOEINT4_HIP_WGMMA_TMA=0 timeout 100 ctest --timeout 90 -R '^test_hip_forward_int4$' --output-on-failure) > $O/tests-b-tma-off.log 2>&1 &
wait
grep -E "tests passed" $O/tests-b-*.log
OUT=$O/ab DEPS=build-hipdeps TOKENS=64,128,256,512,1024,1536 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main a=lib:build-a b=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:64 mixtral-8x7b:256 mixtral-8x7b:512 qwen3-30b-a3b:1024" \
  timeout 270 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep gemm | head -30
tar czf "$OUT/call1.tgz" -C $O .
