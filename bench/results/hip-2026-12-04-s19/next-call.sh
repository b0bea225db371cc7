#!/bin/bash
# Prepared for the next device session (not run): q256 on the exact tiles'
# k loop (next-rounded-loop.diff: one loop for both numerics, stage
# descriptors stepped from the ring's first, no bound checks but in the last
# two chunks; the qw64 and qw128 kernels stay byte-identical, q256's change:
# no C75xx, no spill, its 8-byte spill gone, code 55 KB larger a kernel).
# Before the call, on the development machine (bench/hip/README.md):
#   git worktree add /tmp/wt-loop HEAD && git -C /tmp/wt-loop apply \
#     $PWD/bench/results/hip-2026-12-04-s19/next-rounded-loop.diff
#   bash bench/hip/prebuild.sh . build-main
#   . bench/hip/nvidia_build.sh && configure_nvidia /tmp/wt-loop build-nvt -DMOEINT4_BUILD_TESTS=ON
#   ninja -C build-nvt -j2
#   tar cf - --exclude='*.o' build-main build-nvt | xz -T2 -4 > build-packed/libs.tar.xz
# then run this with carry ["build-hipdeps", "build-packed"].
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o; mkdir -p $O
(cd build-nvt && timeout 150 ctest --timeout 100 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
(cd build-nvt && MOEINT4_HIP_TILE=q256 timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conformance-q256.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests-conformance-q256.log | tail -2
OUT=$O/ab DEPS=build-hipdeps TOKENS=768,1024,1536,2560,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main new=lib:build-nvt/lib" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:1024" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep gemm | head -20
tar czf "$OUT/next.tgz" -C $O .
