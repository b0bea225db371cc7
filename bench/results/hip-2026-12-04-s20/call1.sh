#!/bin/bash
# Session 20, call 1 (carry ["build-hipdeps", "build-packed"]):
# 1. all 17 HIP test entries on main (aeae7d6, its tests tree build-nvt):
#    the review's shared activation dispatch had not run on the GPU;
# 2. session 19's prepared q256-on-the-exact-loop change
#    (hip-2026-12-04-s19/next-rounded-loop.diff; plugin with test extras in
#    build-nvt2, built from a worktree with the diff applied): the int4
#    entries and the int4 conformance matrix with q256 forced, on that plugin;
# 3. A/B main (build-main, prebuild.sh of aeae7d6) vs the diff at the q256
#    sizes, with per-kernel times.
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/s20c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $O/gpu.txt 2>&1
(cd build-nvt && timeout 200 ctest --timeout 120 -R '^(test_hip_|hip_conformance_)' --output-on-failure) > $O/tests-main.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-main.log | tail -20
cp build-nvt/lib/libmoeint4-hip.so $O/plugin-main.so
cp build-nvt2/lib/libmoeint4-hip.so build-nvt/lib/libmoeint4-hip.so
(cd build-nvt && timeout 150 ctest --timeout 100 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$' --output-on-failure) > $O/tests-loop.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-loop.log | tail -4
(cd build-nvt && MOEINT4_HIP_TILE=q256 timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-loop-q256.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-loop-q256.log | tail -2
cp $O/plugin-main.so build-nvt/lib/libmoeint4-hip.so
OUT=$O/ab DEPS=build-hipdeps TOKENS=768,1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main loop=lib:build-nvt2/lib" \
  TOKENS_main=768,1024,2048,4096 \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:1024" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep gemm | head -20
rm -f $O/plugin-main.so
tar czf "$OUT/call1.tgz" -C $O .
