#!/bin/bash
# Prepared for the next device session (not run: this session's device time
# was spent). Two changes to the exact warp-specialized int4 tiles (qw32,
# qw64, qw128), stacked; q256's kernels stay byte-identical in both:
#  A  next-chunk-stages.diff: a stage holds a whole 128-input chunk (two
#     128B-swizzled token blocks, the codes' 64 bytes a row by 16-byte
#     copies, one mbarrier round, scale load and join a chunk) instead of
#     half of one; rings of 6 / 9 / 5 stages (16 / 24 / 40 KB).
#  B  next-code-tma.diff (on A): the codes of a stage by TMA, 3D boxes of
#     the re-tiled groups of 8 rows (gemm13: gate and up rows, 4 KB each;
#     gemm2: 8 KB), one thread issuing them with the token box(es); cp.async
#     remains the fallback (MOEINT4_HIP_WGMMA_TMA=0). Also: hip_tma.h's two
#     maps share one encoder call.
# Why: session 19's ncu of qw64 at 16 rows an expert had its consumers
# waiting for stages 27% of the time with the producer at ~100 instructions
# a stage, and session 20's qw32 (two producers an SM) was 18% faster on
# Mixtral's gemm2 at 16 rows: the producer's issue looks like the limit.
# Before the call, on the development machine (bench/hip/README.md):
#   git worktree add /tmp/wt-a HEAD && git -C /tmp/wt-a apply $PWD/bench/results/hip-2026-12-04-s20/next-chunk-stages.diff
#   git worktree add /tmp/wt-b HEAD && git -C /tmp/wt-b apply $PWD/bench/results/hip-2026-12-04-s20/next-chunk-stages.diff \
#     && git -C /tmp/wt-b apply $PWD/bench/results/hip-2026-12-04-s20/next-code-tma.diff
#   bash bench/hip/prebuild.sh . build-main && bash bench/hip/prebuild.sh /tmp/wt-a build-a
#   . bench/hip/nvidia_build.sh && configure_nvidia /tmp/wt-b build-nvt -DMOEINT4_BUILD_TESTS=ON && ninja -C build-nvt -j2
#   tar cf - --exclude='*.o' build-main build-a build-nvt | xz -T2 -4 > build-packed/libs.tar.xz
# then run this with carry ["build-hipdeps", "build-packed"].
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/next; mkdir -p $O
# B's tests: the int4 entries (the tile test forces qw32, qw64, qw128, also
# on a 2-block grid), the graph test (M = 128: qw32 captured), the int4
# matrix with each exact tile forced, and the forward with TMA off (A's
# cp.async codes)
(cd build-nvt && timeout 250 ctest --timeout 120 -R '^(test_hip_forward_int4|test_hip_graph_int4|test_hip_weights|hip_conformance_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -5
for tile in qw32 qw64 qw128; do
  (cd build-nvt && MOEINT4_HIP_TILE=$tile timeout 60 ctest --timeout 50 -R '^hip_conformance_int4$' --output-on-failure) > $O/tests-conformance-$tile.log 2>&1
  grep -E "tests passed" $O/tests-conformance-$tile.log
done
(cd build-nvt && MOEINT4_HIP_WGMMA_TMA=0 timeout 100 ctest --timeout 90 -R '^test_hip_forward_int4$' --output-on-failure) > $O/tests-tma-off.log 2>&1
grep -E "tests passed" $O/tests-tma-off.log
OUT=$O/ab DEPS=build-hipdeps TOKENS=64,128,256,512,1024,1536 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-main a=lib:build-a b=lib:build-nvt/lib" \
  PROFILE_POINTS="mixtral-8x7b:64 mixtral-8x7b:256 mixtral-8x7b:512 qwen3-30b-a3b:1024" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x" $O/ab/profile-*.log | grep gemm | head -30
tar czf "$OUT/next.tgz" -C $O .
