#!/bin/bash
# Session 29, call 1 (carry ["build-hipdeps", "build-packs28"]): session 28's
# prepared calls 4 and 5 as one A/B, in the same rounds: main (m27: main at
# 469a469, whose device code equals main's since) against
#  - lagA: the warp-specialized int4 tiles' producer lag q256 2, qw128 2,
#    qw64 4, qw32 3 (main: 3, 3, 6, 4);
#  - lagB: 1, 1, 2, 2 (the BF16 warp-specialized GEMM measured lag 1 best);
#  - rowptr: branch hip-ws-row-pointers (ws-row-pointers.diff in
#    hip-2026-12-05-s28/): the producer keeps its token rows as pointers
#    once a tile (9.6% of q256's samples were that address arithmetic).
# M points: Mixtral 64 qw32, 256 qw64, 512 qw128, 1024 q256, 4096 the
# expansion (control); Qwen3 512 qw64, 1024 qw64, 2048 qw128, 4096 q256.
# Tests of the three builds: call2.sh.
ln -sfn "$PWD" /work/main 2>/dev/null || { mkdir -p /work && ln -sfn "$PWD" /work/main; }
for p in m27 lagA lagB rowptr; do tar xJf build-packs28/$p.tar.xz; done
O=$OUT/s29c1; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/gpu.txt 2>&1; cat $O/gpu.txt
hip() { ( . bench/hip/nvidia_build.sh && use_hip_deps build-hipdeps && "$@" ); }
hip env OUT=$O/ab DEPS=build-hipdeps TOKENS=64,256,512,1024,2048,4096 WEIGHTS=int4 ROUNDS=2 \
  VARIANTS="main=lib:build-m27/lib lagA=lib:build-lagA/lib lagB=lib:build-lagB/lib rowptr=lib:build-rowptr/lib" \
  PROFILE_POINTS="mixtral-8x7b:64 qwen3-30b-a3b:4096" timeout 560 bash bench/hip/ab_bench.sh > $O/ab.log 2>&1
cat $O/ab/ab-table.md || tail -30 $O/ab.log
grep -E "us  x|forward" $O/ab/profile-*.log
tar czf $OUT/call1.tgz -C $O .
