#!/bin/bash
# Prepared for the next device session (not run): the two diffs of this
# folder measured against HEAD in one call. Before the call, on the
# development machine (bench/hip/README.md):
#   git worktree add /tmp/wt-two HEAD && git -C /tmp/wt-two apply \
#     $PWD/bench/results/hip-2026-12-04-s18/next-two-queued.diff
#   git worktree add /tmp/wt-epi HEAD && git -C /tmp/wt-epi apply \
#     $PWD/bench/results/hip-2026-12-04-s18/next-bf16-epilogue.diff
#   bash bench/hip/prebuild.sh . build-main
#   bash bench/hip/prebuild.sh /tmp/wt-epi build-epi
#   (the tests' tree with the two-queued diff applied:)
#   . bench/hip/nvidia_build.sh && configure_nvidia /tmp/wt-two build-nvt -DMOEINT4_BUILD_TESTS=ON
#   ninja -C build-nvt -j2
#   tar cf - --exclude='*.o' build-main build-epi build-nvt | xz -T2 -4 > build-packed/libs.tar.xz
# then run this with carry ["build-hipdeps", "build-packed"].
set -x
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
tar xJf build-packed/libs.tar.xz
. bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps
O=/tmp/o; mkdir -p $O
(cd build-nvt && timeout 120 ctest --timeout 110 -R '^(test_hip_forward_int4|test_hip_graph_int4)$' --output-on-failure) > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Passed" $O/tests.log | tail -4
OUT=$O/ab DEPS=build-hipdeps TOKENS=512,2048,4096 WEIGHTS=int4 ROUNDS=2 WEIGHTS_main=bf16,int4 WEIGHTS_epi=bf16 \
  VARIANTS="main=lib:build-main two=lib:build-nvt/lib epi=lib:build-epi" \
  PROFILE_POINTS="qwen3-30b-a3b:4096 mixtral-8x7b:512" \
  timeout 240 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "int4_ws|wgmma" $O/ab/profile-*.log | head -20
tar czf "$OUT/next.tgz" -C $O .
