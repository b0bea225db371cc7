#!/bin/bash
# Prepared in session 28 (not run: its device time ran out), a call of its
# own after call4.sh: the warp-specialized int4 GEMM's producer with its
# token rows as pointers once a tile (branch hip-ws-row-pointers, 25ca565,
# ws-row-pointers.diff). Call 2's samples had 9.6% of q256's gemm13 on
# the address arithmetic (LEA) of its copies at Qwen3 M = 4096. The A/B
# goes first, over every ws tile's M points, then the tests. Carry
# ["build-hipdeps", "build-packs28"] (packs m27: main at 469a469; rowptr:
# configure_nvidia . build-rowptr -DMOEINT4_BUILD_TESTS=ON on the branch;
# where the branch is gone, main at 1e991b4 with `git apply
# bench/results/hip-2026-12-05-s28/ws-row-pointers.diff` is the same tree).
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for p in m27 rowptr; do tar xJf build-packs28/$p.tar.xz; done
O=$OUT/s28c5; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1; cat $O/gpu.txt
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=64,256,512,1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib rowptr=lib:build-rowptr/lib" \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:4096" timeout 330 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log
hip bash -c "cd build-rowptr && timeout 90 ctest --timeout 85 -j3 -R '^(test_hip_forward_int4|test_hip_graph_int4|hip_conformance_int4|test_hip_weights)$' --output-on-failure" > $O/tests.log 2>&1
grep -E "tests passed|\*\*\*|Failed|Total Test" $O/tests.log | tail -4
